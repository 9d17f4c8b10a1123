"""The in-kernel quantizer (``kernels._quant.quantize_tile``) against the oracle, bit for bit.

It runs through ``kernels.quant.quantize_mxfp4_triton``, a small kernel around the very
``@triton.jit`` function the GEMM calls: in the interpreter on a CPU, compiled on a GPU.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.device import device_info, interpret_mode
from kernels.mxfp4 import quantize_mxfp4
from kernels.quant import check_impl, quant_impl, quantize_mxfp4_triton
from kernels.targets import QuantPath, quant_path_for


def _bf16(patterns: list[int], m: int, k: int, device) -> torch.Tensor:
    x = torch.tensor(patterns, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    return x.reshape(m, k).to(device)


# The paths a test runs: the device's own, and the model of the gfx950 instruction fed by the
# asm path's own operand preparation (plain tl, so it runs in the interpreter and on any GPU):
# a wrong scale operand or nibble order for v_cvt_scalef32_pk_fp4_bf16 fails here on a CPU.
PATHS = [None, QuantPath.GFX950_EMULATED]
PATH_IDS = ["device", "gfx950-emulated"]


def _assert_same_as_oracle(x: torch.Tensor, impl: QuantPath | None = None) -> None:
    packed, scales = quantize_mxfp4_triton(x, impl=impl)
    want_p, want_s = quantize_mxfp4(x.cpu())
    assert torch.equal(scales.cpu(), want_s)
    assert torch.equal(packed.cpu(), want_p)
    # The GEMM's mode (no NaN-block code fix-up) must give every scale, the 0xFF of a NaN
    # block included, and the codes of every block without a NaN.
    gemm_p, gemm_s = quantize_mxfp4_triton(x, impl=impl, nan_block_codes=False)
    assert torch.equal(gemm_s.cpu(), want_s)
    nan_bytes = (want_s == 0xFF).repeat_interleave(16, dim=-1)
    assert torch.equal(gemm_p.cpu()[~nan_bytes], want_p[~nan_bytes])


# Any 16-bit pattern: NaNs of both signs, infinities, subnormals, zeros of both signs.
@pytest.mark.parametrize("impl", PATHS, ids=PATH_IDS)
@given(data=st.data())
def test_any_bf16_bit_pattern_quantizes_like_the_oracle(device, impl, data):
    m = data.draw(st.integers(1, 20), label="m")
    k = data.draw(st.sampled_from([64, 256, 320]), label="k")
    patterns = data.draw(st.lists(st.integers(0, 0xFFFF), min_size=m * k, max_size=m * k))
    _assert_same_as_oracle(_bf16(patterns, m, k, device), impl)


# Values packed around the rounding thresholds of one scale, where an off-by-one in the rounding
# would show: each block has its amax pinned so q = x exactly.
@given(
    st.lists(
        st.sampled_from([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 0.0, -0.0]),
        min_size=62,
        max_size=62,
    )
)
def test_ties_quantize_like_the_oracle(device, values):
    x = torch.tensor([[6.0, *values[:31], -6.0, *values[31:]]], dtype=torch.bfloat16, device=device)
    for impl in PATHS:
        _assert_same_as_oracle(x, impl)


@pytest.mark.parametrize("impl", PATHS, ids=PATH_IDS)
def test_edge_table_quantizes_like_the_oracle(device, impl):
    specials = [
        0x0000, 0x8000,  # +0, -0
        0x0001, 0x007F, 0x8001,  # subnormals: the clamped scale turns the largest into code 4
        0x7F7F, 0xFF7F,  # largest finite
        0x7F80, 0xFF80,  # +-inf: saturate against scale byte 253
        0x7FC0, 0xFFC1,  # NaNs: the block's scale becomes 0xFF
        0x3E80, 0x3F40, 0x3FA0, 0x3FE0, 0x4020, 0x4060, 0x40A0, 0x40C0,  # 0.25 .. 6 (ties)
    ]  # fmt: skip
    rows = []
    for i in range(len(specials)):
        row = [0x3C00 + 7 * j for j in range(64)]  # ordinary values
        row[i % 32] = specials[i]
        rows.append(row)
    flat = [v for r in rows for v in r]
    _assert_same_as_oracle(_bf16(flat, len(rows), 64, device), impl)


# Block maxima where the scale byte changes, and the NaN/inf boundary of the integer maximum:
# 0x7F80 (+inf) must not flag a NaN, 0x7F81 (the smallest NaN) must; 0x7FFF is the largest NaN
# (its rounded exponent field overflows to 0x100); 0x0000 gives byte 0; 0x3F5F/0x3F60 straddle
# the round-up of the mantissa (fraction 0.75 of a binade rounds up); 0x7F7F/0x7F60 are the
# largest finite values, whose rounding reaches exponent field 255 (byte 253).
@pytest.mark.parametrize("impl", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize(
    "top", [0x0000, 0x0001, 0x3F5F, 0x3F60, 0x7F5F, 0x7F60, 0x7F7F, 0x7F80, 0x7F81, 0x7FFF]
)
def test_block_maximum_boundaries(device, impl, top):
    for sign in (0x0000, 0x8000):
        row = [0x3C00 + 3 * j for j in range(64)]
        row[5] = top | sign  # the block maximum, either sign
        row[40] = (top | sign) ^ 0x8000  # the other block, opposite sign
        _assert_same_as_oracle(_bf16(row, 1, 64, device), impl)


def test_implementation_follows_the_target():
    on_gfx950 = device_info().arch == "gfx950" and not interpret_mode()
    expected = QuantPath.GFX950_CVT if on_gfx950 else QuantPath.PORTABLE
    assert quant_impl() is expected
    assert check_impl(QuantPath.PORTABLE) is QuantPath.PORTABLE  # runs everywhere
    assert check_impl(QuantPath.GFX950_EMULATED) is QuantPath.GFX950_EMULATED  # plain tl
    if not on_gfx950:
        with pytest.raises(ValueError, match="impl=GFX950_CVT cannot run on this device"):
            check_impl(QuantPath.GFX950_CVT)
    with pytest.raises(ValueError, match=r"impl must be a kernels\.targets\.QuantPath"):
        check_impl("fast")


def test_the_quantizer_rule_is_the_registry_s():
    # the interpreter cannot run inline asm, whatever the architecture
    assert quant_path_for("gfx950", interpreted=True) is QuantPath.PORTABLE
    assert quant_path_for("gfx950", interpreted=False) is QuantPath.GFX950_CVT
    assert quant_path_for("sm90", interpreted=False) is QuantPath.PORTABLE
    assert quant_path_for("gfx1100", interpreted=False) is QuantPath.PORTABLE  # unregistered


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (torch.zeros(2, 64), TypeError, "2-D bfloat16"),
        (torch.zeros(2, 96, dtype=torch.bfloat16), ValueError, "multiple of 64"),
        (torch.zeros(64, 2, dtype=torch.bfloat16).T, ValueError, "unit column stride"),
    ],
)
def test_bad_input_is_named(x, error, match):
    with pytest.raises(error, match=match):
        quantize_mxfp4_triton(x)
