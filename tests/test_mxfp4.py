"""The MXFP4 oracle against the rule of task-facts section 3, exactly (rtol=0, atol=0).

A second, deliberately naive scalar implementation (Python floats, ``struct`` bit casts, a
nearest-point search on the grid) checks the vectorised oracle on hypothesis inputs; tables of
edge cases check both against values worked out by hand.
"""

from __future__ import annotations

import math
import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.mxfp4 import (
    E2M1_VALUES,
    dequantize_mxfp4,
    e8m0_to_float,
    quantize_mxfp4,
    unpack_codes,
)
from tests import blocks
from tests.bits import assert_bits_equal

# The oracle's tests run no kernel: eight times the profile's examples cost a second or two.
CHEAP = settings(max_examples=8 * settings.default.max_examples)

GRID = E2M1_VALUES


def _f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _naive_block(xs: list[float]) -> tuple[list[int], int]:
    """One block of 32 floats -> (codes, E8M0 byte), written from the rule, element by element."""
    finite = [abs(v) for v in xs if not math.isnan(v)]
    amax = max(finite) if finite else 0.0
    bits = (_f32_bits(amax) + 0x200000) & 0xFF800000
    e = max(-127, min(127, ((bits >> 23) & 0xFF) - 127 - 2))
    codes = []
    for v in xs:
        sign = 8 if math.copysign(1.0, v) < 0 else 0
        if math.isnan(v):
            codes.append(sign)
            continue
        q = abs(v) * 2.0**-e
        if q >= 6:
            codes.append(sign | 7)
            continue
        # nearest grid point; at a tie the even code (even index) wins
        dists = [abs(q - g) for g in GRID]
        best = min(dists)
        ties = [i for i, d in enumerate(dists) if d == best]
        codes.append(sign | (ties[0] if len(ties) == 1 else next(i for i in ties if i % 2 == 0)))
    byte = 0xFF if any(math.isnan(v) for v in xs) else e + 127
    return codes, byte


def _codes(x: torch.Tensor) -> tuple[list[int], list[int]]:
    packed, scales = quantize_mxfp4(x)
    return unpack_codes(packed).flatten().tolist(), scales.flatten().tolist()


def _block(*values: float, fill: float = 0.0, dtype=torch.float32) -> torch.Tensor:
    vals = list(values) + [fill] * (32 - len(values))
    return torch.tensor([vals], dtype=dtype)


# With 6.0 in the block, amax rounds to 4 (fraction 0.5 < 0.75), so e = 0 and q = x: the values
# below are exactly the grid's midpoints. Each tie must go to the even code.
TIES = [
    (0.25, 0),  # 0 | 0.5  -> 0   (code 0 is even)
    (0.75, 2),  # 0.5 | 1  -> 1   (code 2)
    (1.25, 2),  # 1 | 1.5  -> 1   (code 2)
    (1.75, 4),  # 1.5 | 2  -> 2   (code 4)
    (2.5, 4),  # 2 | 3     -> 2   (code 4)
    (3.5, 6),  # 3 | 4     -> 4   (code 6)
    (5.0, 6),  # 4 | 6     -> 4   (code 6)
]


@pytest.mark.parametrize(("value", "code"), TIES)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_every_tie_rounds_to_even(value, code, sign):
    codes, scales = _codes(_block(6.0, sign * value))
    assert scales == [127]
    assert codes[1] == code | (8 if sign < 0 else 0)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (0.2499999, 0),  # just below a tie: nearest is 0
        (0.2500001, 1),  # just above: nearest is 0.5
        (0.7499999, 1),
        (5.0000005, 7),  # just above the 4|6 tie: 6
        (4.9999995, 6),
    ],
)
def test_values_next_to_ties_round_to_nearest(value, code):
    assert _codes(_block(6.0, value))[0][1] == code


def test_saturation_at_six_and_above():
    # amax 6.99 has mantissa fraction 0.7475 < 0.75: it truncates to 4, e = 0, and q = 6.99
    # lies beyond the grid: it saturates to 6 (code 7) instead of overflowing.
    codes, scales = _codes(_block(6.99, 6.0, -6.5))
    assert scales == [127]
    assert codes[:3] == [7, 7, 15]
    # 7.0 has fraction 0.75: amax rounds up to 8, e = 1, q = 3.5 -> 4 (code 6)
    codes, scales = _codes(_block(7.0))
    assert (codes[0], scales) == (6, [128])


def test_signed_zeros_and_all_zero_block():
    codes, scales = _codes(_block(0.0, -0.0, fill=0.0))
    assert codes[:2] == [0, 8]  # -0 keeps its sign bit
    assert scales == [0]  # all-zero block: e = -127, byte 0
    assert _codes(_block(fill=-0.0))[0] == [8] * 32


def test_bf16_subnormals_use_the_clamped_scale():
    # Subnormal amax: exponent field 0 -> e = -129, clamped to -127 (byte 0). q = x * 2**127.
    largest = (
        torch.tensor([0x007F], dtype=torch.int16).view(torch.bfloat16).item()
    )  # (127/128)*2**-126
    smallest = torch.tensor([0x0001], dtype=torch.int16).view(torch.bfloat16).item()  # 2**-133
    codes, scales = _codes(_block(largest, smallest, -largest, dtype=torch.bfloat16))
    assert scales == [0]
    assert codes[:3] == [4, 0, 12]  # 1.984 -> 2 (code 4); 2**-6 -> 0


def test_largest_finite_bf16():
    big = torch.tensor([0x7F7F], dtype=torch.int16).view(torch.bfloat16).item()  # 3.3895e38
    codes, scales = _codes(_block(big, -big, dtype=torch.bfloat16))
    # amax bits + 0x200000 carries into exponent field 255 -> e = 126 (byte 253); q = 3.98 -> 4
    assert scales == [253]
    assert codes[:2] == [6, 14]


def test_scale_clamp_at_minus_127():
    # 2**-124 rounds to exponent field 3 -> e = -126; 2**-125 -> field 2 -> e = -127 (the clamp
    # is reached exactly); anything smaller clamps to -127 as well.
    assert _codes(_block(2.0**-124))[1] == [1]
    assert _codes(_block(2.0**-125))[1] == [0]
    assert _codes(_block(2.0**-126))[1] == [0]


def test_infinity_saturates_against_the_largest_scale():
    codes, scales = _codes(_block(float("inf"), float("-inf"), 1.0))
    assert scales == [253]  # inf's exponent field 255 -> e = 126
    assert codes[:3] == [7, 15, 0]


def test_nan_poisons_its_block_only():
    x = torch.cat([_block(float("nan"), -float("nan"), 6.0, 3.0), _block(6.0, 3.0)], dim=1)
    codes, scales = _codes(x)
    assert scales == [0xFF, 127]  # E8M0 NaN for the NaN block, the normal scale elsewhere
    assert codes[:4] == [0, 8, 7, 5]  # NaN -> magnitude 0 with its sign; others as usual
    assert codes[32:34] == [7, 5]
    packed, s = quantize_mxfp4(x)
    deq = dequantize_mxfp4(packed, s)
    assert torch.isnan(deq[0, :32]).all()
    assert_bits_equal(deq[0, 32:34], torch.tensor([6.0, 3.0]))


def test_every_e8m0_byte_dequantizes_exactly():
    scales = torch.arange(256, dtype=torch.uint8).reshape(256, 1)
    packed = torch.full((256, 16), 0x22, dtype=torch.uint8)  # every element 1.0 (code 2)
    got = dequantize_mxfp4(packed, scales, torch.float64)
    for byte in range(255):
        assert_bits_equal(
            got[byte], torch.full((32,), math.ldexp(1.0, byte - 127), dtype=torch.float64)
        )
    assert torch.isnan(got[255]).all()  # 0xFF is E8M0's NaN
    # fp32 keeps every scale but the top of the range finite: 2**(254-127) = 2**127 is fp32's
    # largest power of two, so 1.0 * that is finite while 6 * that overflows to inf.
    f32 = e8m0_to_float(scales.flatten(), torch.float32)
    want = torch.tensor([math.ldexp(1.0, b - 127) for b in range(255)], dtype=torch.float32)
    assert_bits_equal(f32[:255], want)


def test_every_code_dequantizes_exactly():
    packed = torch.arange(256, dtype=torch.uint8).reshape(1, 256)[:, :256]
    packed = torch.cat([packed, packed[:, :0]], dim=1).reshape(8, 32)  # 8 rows of K/2 = 32
    scales = torch.full((8, 2), 127, dtype=torch.uint8)
    got = dequantize_mxfp4(packed, scales)
    values = list(GRID) + [-v for v in GRID]
    expected = torch.tensor([[values[b & 0xF], values[b >> 4]] for b in range(256)]).reshape(8, 64)
    assert_bits_equal(got, expected)


def _f32_neighbour(v: float, step: int) -> float:
    """The fp32 value ``step`` (-1, 0, 1) ulps away from ``v`` in magnitude (v itself for 0,
    inf, NaN): the values next to a tie that bf16 cannot hold."""
    bits = _f32_bits(v)
    if step == 0 or not math.isfinite(v) or bits & 0x7FFFFFFF == 0:
        return v
    return struct.unpack("<f", struct.pack("<I", bits + step))[0]


# Blocks built around their scale (tests/blocks.py: ties of both signs, -0, subnormals, inf,
# a NaN in one block of eight), each element perhaps moved one fp32 ulp, the whole block
# scaled by 2**shift: fp32's finer grid around every tie, at every scale fp32 reaches.
@CHEAP
@given(blocks.quant_block(), st.integers(min_value=-40, max_value=40), st.randoms())
def test_matches_naive_rule(block, shift, rnd):
    xs = [_f32_neighbour(blocks.value(p), rnd.choice((-1, 0, 0, 1))) for p in block]
    xs = [math.ldexp(v, shift) if math.isfinite(v) else v for v in xs]
    x = torch.tensor([xs], dtype=torch.float32)
    xs = x.flatten().tolist()  # after fp32 rounding of the shifted values
    codes, scales = _codes(x)
    exp_codes, exp_byte = _naive_block(xs)
    assert scales == [exp_byte]
    assert codes == exp_codes


@CHEAP
@given(st.lists(blocks.quant_block(), min_size=2, max_size=2))
def test_bf16_bit_patterns_match_naive_rule(two_blocks):
    blocks.report(two_blocks)
    patterns = two_blocks[0] + two_blocks[1]
    x = (
        torch.tensor(patterns, dtype=torch.int32)
        .to(torch.int16)
        .view(torch.bfloat16)
        .reshape(1, 64)
    )
    codes, scales = _codes(x)
    xs = x.float().flatten().tolist()
    for b in range(2):
        exp_codes, exp_byte = _naive_block(xs[32 * b : 32 * b + 32])
        assert scales[b] == exp_byte
        assert codes[32 * b : 32 * b + 32] == exp_codes


@CHEAP
@given(st.lists(st.integers(min_value=0, max_value=0xFFFF), min_size=64, max_size=64))
def test_any_bf16_bit_patterns_match_naive_rule(patterns):
    x = torch.tensor(patterns, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    codes, scales = _codes(x.reshape(1, 64))
    xs = x.float().tolist()
    for b in range(2):
        exp_codes, exp_byte = _naive_block(xs[32 * b : 32 * b + 32])
        assert scales[b] == exp_byte
        assert codes[32 * b : 32 * b + 32] == exp_codes


def test_every_bf16_pattern_as_a_whole_block_matches_naive_rule():
    # the oracle on all 65536 blocks of one repeated pattern, against the naive rule (of one
    # element: a block of copies has that element's maximum)
    x = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    packed, scales = quantize_mxfp4(x.repeat_interleave(32).reshape(-1, 32))
    got = zip((packed[:, 0] & 0xF).tolist(), scales[:, 0].tolist(), strict=True)
    for p, (v, (code, byte)) in enumerate(zip(x.float().tolist(), got, strict=True)):
        want_codes, want_byte = _naive_block([v])
        assert (code, byte) == (want_codes[0], want_byte), hex(p)
    assert bool((packed == packed[:, :1]).all())  # every byte of a block alike


@CHEAP
@given(
    st.lists(
        st.floats(min_value=-(2.0**100), max_value=2.0**100, width=32), min_size=64, max_size=64
    )
)
def test_error_is_at_most_half_a_grid_step_or_saturated(values):
    x = torch.tensor([values], dtype=torch.float32)
    packed, scales = quantize_mxfp4(x)
    deq = dequantize_mxfp4(packed, scales, torch.float64)
    scale = e8m0_to_float(scales, torch.float64).repeat_interleave(32, dim=-1)
    q = x.double() / scale
    # the grid step around |q|: 0.5 below 2, 1 below 4, 2 above
    step = torch.where(q.abs() < 2, 0.5, torch.where(q.abs() < 4, 1.0, 2.0))
    saturated = q.abs() >= 6
    err = (deq - x.double()).abs()
    assert bool(((err <= step / 2 * scale) | saturated).all())
    assert bool((deq[saturated].abs() == 6 * scale[saturated]).all())


def test_bf16_and_fp32_inputs_agree():
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    a, b = quantize_mxfp4(x), quantize_mxfp4(x.float())
    assert_bits_equal(a[0], b[0])
    assert_bits_equal(a[1], b[1])


def test_batched_leading_dimensions():
    x = torch.randn(2, 3, 64, generator=torch.Generator().manual_seed(1))
    packed, scales = quantize_mxfp4(x)
    assert packed.shape == (2, 3, 32) and scales.shape == (2, 3, 2)
    flat_p, flat_s = quantize_mxfp4(x.reshape(6, 64))
    assert_bits_equal(packed.reshape(6, 32), flat_p)
    assert_bits_equal(scales.reshape(6, 2), flat_s)


def test_dequantize_accepts_torch_fp4_and_e8m0_views():
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(2))
    packed, scales = quantize_mxfp4(x)
    got = dequantize_mxfp4(packed.view(torch.float4_e2m1fn_x2), scales.view(torch.float8_e8m0fnu))
    assert_bits_equal(got, dequantize_mxfp4(packed, scales))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: quantize_mxfp4(torch.zeros(2, 32, dtype=torch.float16)),
            TypeError,
            "x must be bfloat16 or float32",
        ),
        (lambda: quantize_mxfp4(torch.zeros(2, 48)), ValueError, r"K\) must be a multiple of 32"),
        (lambda: quantize_mxfp4(torch.tensor(1.0)), ValueError, "at least one dimension"),
        (lambda: quantize_mxfp4([1.0] * 32), TypeError, "x must be a torch.Tensor"),
        (
            lambda: dequantize_mxfp4(
                torch.zeros(2, 16, dtype=torch.uint8), torch.zeros(2, 2, dtype=torch.uint8)
            ),
            ValueError,
            r"scales must have shape \(2, 1\)",
        ),
        (
            lambda: dequantize_mxfp4(
                torch.zeros(2, 16, dtype=torch.int8), torch.zeros(2, 1, dtype=torch.uint8)
            ),
            TypeError,
            "packed must have dtype",
        ),
        (
            lambda: dequantize_mxfp4(
                torch.zeros(2, 16, dtype=torch.uint8),
                torch.zeros(2, 1, dtype=torch.uint8),
                torch.int32,
            ),
            TypeError,
            "dtype must be a floating-point",
        ),
    ],
)
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
