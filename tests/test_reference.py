"""generate_input, reference_gemm and check_leaderboard."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.layout import shuffle_scales, shuffle_weight, unshuffle_scales, unshuffle_weight
from kernels.mxfp4 import quantize_mxfp4
from kernels.reference import (
    check_leaderboard,
    fp32_operand,
    generate_input,
    lossless_input,
    reference_gemm,
    round_to_bf16,
)
from tests.bits import assert_bits_equal


def test_generate_input_is_deterministic_and_seed_dependent():
    a = generate_input(4, 32, 128, seed=7)
    b = generate_input(4, 32, 128, seed=7)
    c = generate_input(4, 32, 128, seed=8)
    for x, y in zip(a, b, strict=True):
        assert_bits_equal(x, y)
    assert not torch.equal(a[0], c[0])


def test_generate_input_draws_a_then_b_from_one_generator():
    gen = torch.Generator().manual_seed(3)
    a = torch.randn((4, 128), dtype=torch.bfloat16, generator=gen)
    b = torch.randn((32, 128), dtype=torch.bfloat16, generator=gen)
    got = generate_input(4, 32, 128, seed=3)
    assert_bits_equal(got[0], a)
    assert_bits_equal(got[1], b)


@given(
    st.integers(1, 9),
    st.sampled_from([16, 32, 48, 272]),
    st.sampled_from([64, 128, 320]),
    st.integers(0, 1000),
)
def test_generate_input_is_consistent_with_itself(m, n, k, seed):
    a, b, b_q, b_shuffle, b_scale_sh = generate_input(m, n, k, seed)
    assert a.shape == (m, k) and b.shape == (n, k) and a.dtype == b.dtype == torch.bfloat16
    q, s = quantize_mxfp4(b)
    assert_bits_equal(b_q, q)
    assert_bits_equal(b_shuffle, shuffle_weight(q))
    assert_bits_equal(b_scale_sh, shuffle_scales(s))
    assert_bits_equal(unshuffle_weight(b_shuffle), b_q)
    assert_bits_equal(unshuffle_scales(b_scale_sh, n, k), s)


@given(
    st.integers(1, 8), st.sampled_from([16, 32]), st.sampled_from([64, 128]), st.integers(0, 1000)
)
def test_reference_is_exact_on_lossless_inputs(m, n, k, seed):
    a, b, _, b_shuffle, b_scale_sh = lossless_input(m, n, k, seed)
    got = reference_gemm(a, b_shuffle, b_scale_sh)
    exact = a.double() @ b.double().T  # small integers and halves: exact in fp64
    assert_bits_equal(got, round_to_bf16(exact))


def _nearest_bf16(v: float) -> float:
    """RNE of a float64 to bf16 by brute force over the neighbouring bf16 values."""
    f = torch.tensor([v], dtype=torch.float64).to(torch.float32).to(torch.bfloat16)
    bits = int(f.view(torch.int16).item()) & 0xFFFF
    cands = [(bits + d) & 0xFFFF for d in (-2, -1, 0, 1, 2)]
    vals = [
        torch.tensor([c], dtype=torch.int32).to(torch.int16).view(torch.bfloat16).double().item()
        for c in cands
    ]
    pairs = [(abs(x - v), (c & 1), x) for c, x in zip(cands, vals, strict=True) if math.isfinite(x)]
    best = min(p[0] for p in pairs)
    return min((p for p in pairs if p[0] == best), key=lambda p: p[1])[2]


@given(st.floats(min_value=-1e30, max_value=1e30, allow_nan=False))
def test_round_to_bf16_rounds_once(v):
    got = round_to_bf16(torch.tensor([v], dtype=torch.float64)).double().item()
    assert got == _nearest_bf16(v)


def test_round_to_bf16_fixes_double_rounding():
    # 1 + 2**-8 + 2**-40 is just above the tie between 1 and 1 + 2**-7: the single rounding goes
    # up; rounding to fp32 first lands exactly on the tie and then goes down to 1 (torch's path).
    v = torch.tensor([1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-40)], dtype=torch.float64)
    assert round_to_bf16(v).tolist() == [1 + 2**-7, -(1 + 2**-7)]
    assert v.to(torch.bfloat16).tolist() == [1.0, -1.0]


def test_check_leaderboard_passes_within_tolerance_and_reports_the_worst():
    ref = torch.tensor([[1.0, 100.0], [0.0, -2.0]])
    ok = ref + torch.tensor([[0.019, 1.0], [0.01, -0.03]])  # each within 1e-2 + 1e-2*|ref|
    assert check_leaderboard(ok, ref)
    bad = ok.clone()
    bad[1, 1] = -2.5
    bad[0, 1] = 101.2
    report = check_leaderboard(bad, ref)
    assert not report and report.mismatches == 2 and report.total == 4
    assert report.worst_index == (1, 1) and report.worst_out == -2.5 and report.worst_ref == -2.0
    assert report.worst_excess == pytest.approx(0.5 - 0.03)
    assert "2/4" in str(report)


@pytest.mark.parametrize(
    ("out", "ref", "passed"),
    [
        (float("nan"), float("nan"), True),  # NaN must match NaN
        (float("inf"), float("inf"), True),
        (float("-inf"), float("inf"), False),  # the sign of an infinity matters
        (1.0, float("nan"), False),
        (float("nan"), 1.0, False),
        (float("inf"), 1e30, False),
    ],
)
def test_check_leaderboard_nonfinite_must_match(out, ref, passed):
    report = check_leaderboard(torch.tensor([out]), torch.tensor([ref]))
    assert report.passed is passed
    assert report.nonfinite_mismatches == (0 if passed else 1)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: generate_input(4, 32, 96, 0), ValueError, "multiple of 64"),
        (lambda: generate_input(4, 24, 128, 0), ValueError, "multiple of 16"),
        (lambda: generate_input(0, 32, 128, 0), ValueError, ">= 1"),
        (lambda: generate_input(4, 32, 128.0, 0), TypeError, "k must be an int"),
        (
            lambda: reference_gemm(
                torch.zeros(2, 64), torch.zeros(16, 32, dtype=torch.uint8), None
            ),
            TypeError,
            "bfloat16",
        ),
        (
            lambda: reference_gemm(
                torch.zeros(2, 64, dtype=torch.bfloat16),
                torch.zeros(16, 16, dtype=torch.uint8),
                None,
            ),
            ValueError,
            r"B_shuffle must be \(N, K/2\)",
        ),
        (lambda: check_leaderboard(torch.zeros(2), torch.zeros(3)), ValueError, "shape"),
    ],
)
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_reference_names_the_rank_of_a():
    with pytest.raises(TypeError, match=r"2-D bfloat16 tensor \(M, K\), got 3-D torch.bfloat16"):
        reference_gemm(torch.zeros(1, 2, 64, dtype=torch.bfloat16), None, None)


# ---- +-inf and values whose block scale reaches 2**126 ------------------------------------------
# Decision (README, "What right means"): operands are fp32 values, as tl.dot_scaled upcasts them;
# a dequantized magnitude >= 2**128 is +-inf, so +-inf in A gives +-inf outputs (NaN against a zero
# weight or an opposite inf), never the finite 2.55e38 * b of an fp64 product.

BIG = 2.0**126  # the scale of a block whose amax rounds up to 2**128


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (6 * BIG, math.inf),  # code 6 at byte 253: what +inf quantizes to
        (-6 * BIG, -math.inf),
        (4 * BIG, math.inf),  # exactly 2**128: the first magnitude past fp32
        (3 * BIG, 3 * BIG),  # 2.55e38: the largest MXFP4 value fp32 holds
        (6 * 2.0**125, 6 * 2.0**125),  # code 6 one scale lower: finite
        (0.5 * 2.0**-127, 0.5 * 2.0**-127),  # the smallest MXFP4 value: an fp32 subnormal, exact
        (-0.0, -0.0),
    ],
)
def test_fp32_operand_overflows_only_past_fp32(value, expected):
    got = fp32_operand(torch.tensor([value], dtype=torch.float64)).item()
    assert got == expected and math.copysign(1, got) == math.copysign(1, expected)


def test_fp32_operand_keeps_nan():
    assert math.isnan(fp32_operand(torch.tensor([math.nan], dtype=torch.float64)).item())


def _with_a(a_values: dict[tuple[int, int], float], zero_weight_col: int | None = None):
    """A lossless leaderboard tuple (exact products) with the given A entries overwritten, and
    optionally B[:, zero_weight_col] set to 0 for every row but the first."""
    a, b, *_ = lossless_input(2, 32, 64, seed=5)
    a = a.clone()
    for (r, c), v in a_values.items():
        a[r, c] = v
    if zero_weight_col is not None:
        b = b.clone()
        b[1:, zero_weight_col] = 0
    b_q, b_scale = quantize_mxfp4(b)
    return a, b, shuffle_weight(b_q), shuffle_scales(b_scale)


def _expected_inf_row(b: torch.Tensor, col: int, sign: float) -> list[float]:
    # The other 31 entries of A's block quantize to code 0 at scale 2**126: only the inf counts.
    return [sign * math.inf * (1 if w > 0 else -1) if w != 0 else math.nan for w in b[:, col]]


@pytest.mark.parametrize(
    ("value", "sign"),
    [
        (math.inf, 1.0),
        (-math.inf, -1.0),
        (3.2e38, 1.0),  # finite bf16, but its block amax rounds to 2**128: code 4 -> 2**128
    ],
)
def test_reference_inf_in_a_gives_inf_or_nan(value, sign):
    a, b, b_shuffle, b_scale_sh = _with_a({(0, 3): value}, zero_weight_col=3)
    ref = reference_gemm(a, b_shuffle, b_scale_sh).to(torch.float64)
    expected = _expected_inf_row(b.to(torch.float64), 3, sign)
    assert ref[0].tolist() == pytest.approx(expected, nan_ok=True)
    assert torch.isnan(ref[0, 1:]).all()  # the zero weights: inf * 0
    assert torch.isfinite(ref[1]).all()  # the other row is untouched


def test_reference_opposite_infs_in_one_row_give_nan():
    # +inf * b - inf * b' is NaN where b and b' share a sign (inf - inf) or either is zero
    # (inf * 0), and +-inf where their signs differ.
    a, b, b_shuffle, b_scale_sh = _with_a({(0, 3): math.inf, (0, 40): -math.inf})
    ref = reference_gemm(a, b_shuffle, b_scale_sh).to(torch.float64)
    same_sign = torch.sign(b[:, 3].double()) == torch.sign(b[:, 40].double())
    both_nonzero = (b[:, 3] != 0) & (b[:, 40] != 0)
    assert_bits_equal(torch.isnan(ref[0]), (same_sign & both_nonzero) | ~both_nonzero)


def test_reference_just_below_the_overflow_stays_finite():
    # 2.9e38: amax rounds down to 2**127, scale 2**125, code 6: 1.5 * 2**127, fp32-finite; the
    # product with the -6 weight of B's first block is still exact in fp64 and overflows bf16.
    a, b, b_shuffle, b_scale_sh = _with_a({(0, 7): 2.9e38})
    ref = reference_gemm(a, b_shuffle, b_scale_sh).to(torch.float64)
    w = b[:, 7].to(torch.float64)
    assert_bits_equal(torch.isinf(ref[0]), w.abs() >= 1.5)  # 2.55e38 * 1.5 > bf16 max
    assert torch.isfinite(ref[0][w.abs() < 1]).all()


@pytest.mark.parametrize(
    "a_values",
    [
        {(0, 3): math.inf},
        {(1, 70): -math.inf},
        {(0, 3): math.inf, (0, 100): -math.inf},  # opposite infs in one row: NaN or inf by sign
        {(0, 3): 3.2e38, (1, 5): -3.3e38},  # finite bf16 whose block scale reaches 2**126
        {(1, 0): 2.9e38},  # the largest block that stays fp32-finite
    ],
)
@pytest.mark.parametrize("split_k", [1, 2])
def test_kernel_matches_reference_on_inf_in_a(device, a_values, split_k):
    # Lossless weights: every finite output is exact, so the comparison is bit for bit (NaN by
    # position: the NaN bits are not specified); split_k=2 sends the inf/NaN partials through the split-K reducer too.
    from kernels.gemm import gemm_a16wfp4
    from kernels.gemm_config import GemmConfig

    a, b, *_ = lossless_input(4, 32, 128, seed=11)
    a = a.clone()
    b[2:, 3] = 0  # zero weights meet the inf: NaN
    for (r, c), v in a_values.items():
        a[r, c] = v
    b_q, b_scale = quantize_mxfp4(b)
    b_shuffle, b_scale_sh = shuffle_weight(b_q), shuffle_scales(b_scale)
    cfg = GemmConfig(block_m=16, block_n=32, block_k=64, split_k=split_k)
    out = gemm_a16wfp4(a.to(device), b_shuffle.to(device), b_scale_sh.to(device), config=cfg)
    ref = reference_gemm(a, b_shuffle, b_scale_sh)
    assert not torch.isfinite(ref).all()  # the case really reaches the non-finite semantics
    assert_bits_equal(out, ref, nan_by_position=True)
