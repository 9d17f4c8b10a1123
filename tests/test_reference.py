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
    generate_input,
    lossless_input,
    reference_gemm,
    round_to_bf16,
)


def test_generate_input_is_deterministic_and_seed_dependent():
    a = generate_input(4, 32, 128, seed=7)
    b = generate_input(4, 32, 128, seed=7)
    c = generate_input(4, 32, 128, seed=8)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_generate_input_draws_a_then_b_from_one_generator():
    gen = torch.Generator().manual_seed(3)
    a = torch.randn((4, 128), dtype=torch.bfloat16, generator=gen)
    b = torch.randn((32, 128), dtype=torch.bfloat16, generator=gen)
    got = generate_input(4, 32, 128, seed=3)
    assert torch.equal(got[0], a) and torch.equal(got[1], b)


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
    assert torch.equal(b_q, q)
    assert torch.equal(b_shuffle, shuffle_weight(q))
    assert torch.equal(b_scale_sh, shuffle_scales(s))
    assert torch.equal(unshuffle_weight(b_shuffle), b_q)
    assert torch.equal(unshuffle_scales(b_scale_sh, n, k), s)


@given(
    st.integers(1, 8), st.sampled_from([16, 32]), st.sampled_from([64, 128]), st.integers(0, 1000)
)
def test_reference_is_exact_on_lossless_inputs(m, n, k, seed):
    a, b, _, b_shuffle, b_scale_sh = lossless_input(m, n, k, seed)
    got = reference_gemm(a, b_shuffle, b_scale_sh)
    exact = a.double() @ b.double().T  # small integers and halves: exact in fp64
    assert torch.equal(got, round_to_bf16(exact))


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
