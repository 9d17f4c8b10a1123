"""The strict tier: the suite's exact semantics, judged through ``custom_kernel(data)`` alone.

GPU MODE checks none of this (tests/submission/test_leaderboard_tier.py is what it checks); a failure
here is a departure from the reference's exact semantics (:class:`perfgate.submission.tiers.
Departure`: its class, the first differing element, the got/want bits), which ``submission test``
lists and, with ``--strict``, fails on:

- every output passes the leaderboard's rule **and** lies within one bf16 ulp plus an fp32
  accumulation bound of the exact product of the quantized operands, on odd shapes (M 1..40,
  N 64/128, K 64..512, a long K that the package splits);
- inputs on the fp4 grid make every sum exact: there the output equals the reference bit for bit;
- NaN in A poisons exactly its rows; +-inf and blocks whose scale reaches 2**126 give the
  reference's inf/NaN pattern bit for bit (README, "What right means");
- the scale padding is never read, the inputs are never written, the output is a bf16 (M, N)
  tensor of its own on A's device, the same input gives the same bits, and the upstream dtypes
  (``float4_e2m1fn_x2``, ``float8_e8m0fnu``) give the bits of their uint8 views;
- on a GPU, the task's test and ranked shapes within the bound; on a CPU, small shapes in
  Triton's interpreter.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.layout import shuffle_scales, shuffle_weight
from kernels.mxfp4 import quantize_mxfp4
from kernels.reference import generate_input, lossless_input, reference_gemm
from kernels.shapes import LEADERBOARD, TEST_SHAPES
from perfgate.submission.tiers import Departure, bf16_bits, require_same_bits, rule_mismatches
from tests.test_gemm import _exact_and_bound

pytestmark = pytest.mark.strict


def _on(data, device) -> tuple:
    return tuple(t.to(device) for t in data)


def _run(custom_kernel, data, device) -> torch.Tensor:
    out = custom_kernel(data)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out


def _form(cls: str, out, m: int, n: int) -> None:
    """A bf16 (M, N) tensor, or a departure saying what came back instead."""
    if not isinstance(out, torch.Tensor) or out.dtype != torch.bfloat16 or out.shape != (m, n):
        got = f"{out.dtype} {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out)
        raise Departure(cls, detail=f"output is {got}, want torch.bfloat16 {(m, n)}")


def _within_rule_and_bound(cls: str, out, a, b_shuffle, b_scale_sh) -> None:
    """The leaderboard's rule against the reference and one bf16 ulp plus an fp32 accumulation
    bound around the exact product (tests/test_gemm.py), on every element; a departure at the
    first element that breaks either."""
    _form(cls, out, a.shape[0], b_shuffle.shape[0])
    ref = reference_gemm(a.cpu(), b_shuffle.cpu(), b_scale_sh.cpu())
    exact, bound = _exact_and_bound(a, b_shuffle, b_scale_sh)
    err = (out.cpu().double() - exact).abs()
    bad = rule_mismatches(out.cpu(), ref) | ~(err <= bound)  # NaN breaks the bound
    if bool(bad.any()):
        first = tuple(bad.nonzero()[0].tolist())
        raise Departure(
            cls, element=first, got=int(bf16_bits(out)[first]), want=int(bf16_bits(ref)[first]),
            count=int(bad.sum()), total=bad.numel(),
            detail=f"|out - exact| = {float(err[first]):.6g}, bound {float(bound[first]):.6g}",
        )  # fmt: skip


# -- the leaderboard rule and the one-ulp bound on odd shapes -------------------------------------
@given(
    m=st.integers(1, 40),
    n=st.sampled_from([64, 128]),  # the task's N are multiples of 64
    k=st.sampled_from([64, 128, 192, 320, 512]),  # 192, 320: K not a multiple of 128 or 256
    seed=st.integers(0, 2**16),
)
def test_leaderboard_rule_and_one_ulp_bound(custom_kernel, device, m, n, k, seed):
    data = generate_input(m, n, k, seed, device=device)
    out = _run(custom_kernel, data, device)
    _within_rule_and_bound(f"odd shape {m}x{n}x{k} seed {seed}", out, data[0], data[3], data[4])


def test_long_k_passes_the_rule_and_the_bound(custom_kernel, device, long_k_shape):
    data = generate_input(*long_k_shape, seed=3, device=device)
    out = _run(custom_kernel, data, device)
    _within_rule_and_bound("long K (split)", out, data[0], data[3], data[4])


@pytest.mark.parametrize(
    "shape",
    [(1, 64, 64), (7, 64, 384), (33, 128, 256)],
    ids=lambda s: "-".join(map(str, s)),
)
def test_fp4_grid_inputs_match_exactly(custom_kernel, device, shape):
    data = lossless_input(*shape, seed=5, device=device)
    out = _run(custom_kernel, data, device)
    want = reference_gemm(data[0].cpu(), data[3].cpu(), data[4].cpu())
    require_same_bits("fp4-grid inputs (exact sums)", out, want)


# -- NaN and inf ----------------------------------------------------------------------------------
def test_nan_poisons_exactly_its_rows(custom_kernel, device):
    a, *rest = generate_input(6, 64, 512, 21)
    a = a.clone()
    a[0, 0] = math.nan  # first element of the first block
    a[2, 300] = -math.nan  # a middle block, negative NaN
    a[4, 511] = math.nan  # last element of the last block
    data = _on((a, *rest), device)
    out = _run(custom_kernel, data, device)
    _form("NaN rows", out, 6, 64)
    want_nan = torch.tensor([True, False, True, False, True, False])[:, None].expand(6, 64)
    wrong = torch.isnan(out.cpu()) != want_nan
    if bool(wrong.any()):
        ref = reference_gemm(data[0].cpu(), data[3].cpu(), data[4].cpu())
        first = tuple(wrong.nonzero()[0].tolist())
        raise Departure(
            "NaN rows", element=first, got=int(bf16_bits(out)[first]),
            want=int(bf16_bits(ref)[first]), count=int(wrong.sum()), total=wrong.numel(),
            detail="NaN in A must make exactly its rows NaN",
        )  # fmt: skip
    rows = [1, 3, 5]
    _within_rule_and_bound("NaN rows (the finite rows)", out[rows], data[0][rows], *data[3:])


# A entries (row, column) -> value on lossless weights, some of them zero where the inf meets
# them: every finite output is exact, so the comparison is bit for bit (NaN by position).
INF_CASES = {
    "+inf": {(0, 3): math.inf},
    "-inf": {(1, 70): -math.inf},
    "opposite-infs": {(0, 3): math.inf, (0, 100): -math.inf},
    "scale-2^126": {(0, 3): 3.2e38, (1, 5): -3.3e38},  # finite bf16, amax rounds to 2**128
    "largest-finite-block": {(1, 0): 2.9e38},
}


def _with_a(m: int, n: int, k: int, values: dict) -> tuple:
    a, b, *_ = lossless_input(m, n, k, seed=11)
    a, b = a.clone(), b.clone()
    b[2:, 3] = 0  # zero weights meet the inf: NaN
    for (r, c), v in values.items():
        a[r, c] = v
    b_q, b_scale = quantize_mxfp4(b)
    return a, b, b_q, shuffle_weight(b_q), shuffle_scales(b_scale)


@pytest.mark.parametrize("name", INF_CASES)
def test_inf_classes_match_the_reference(custom_kernel, device, name):
    data = _with_a(4, 64, 128, INF_CASES[name])
    want = reference_gemm(data[0], data[3], data[4])
    assert not bool(torch.isfinite(want).all())  # the case reaches the non-finite semantics
    out = _run(custom_kernel, _on(data, device), device)
    require_same_bits(f"inf class {name}", out, want)


def test_nan_and_inf_rows_with_long_k(custom_kernel, device, long_k_shape):
    # one call, four rows: NaN in the last K block (with split-K, in the last split only), +inf,
    # opposite infs, and a row of finite fp4-grid values (exact sums: the split-K reduction must
    # give the reference's bits); bit for bit, NaN by position
    m, n, k = long_k_shape
    data = _with_a(
        m, n, k, {(0, k - 1): math.nan, (1, 3): math.inf, (2, 3): math.inf, (2, 100): -math.inf}
    )
    want = reference_gemm(data[0], data[3], data[4])
    out = _run(custom_kernel, _on(data, device), device)
    assert torch.isnan(want).all(dim=1).tolist()[:2] == [True, False]
    require_same_bits("NaN and inf rows, long K", out, want)


# -- what a call may and may not do ---------------------------------------------------------------
@pytest.mark.parametrize("pad", [0x00, 0x7F, 0xFE, 0xFF])
def test_scale_padding_is_never_read(custom_kernel, device, pad):
    # N=64 pads the scales to 256 rows, K=320 its 10 columns to 16: whatever the padding holds
    # (upstream it is uninitialised memory), the output bits are the same
    a, b, b_q, b_shuffle, _ = generate_input(5, 64, 320, 11)
    _, scales = quantize_mxfp4(b)
    clean = _run(
        custom_kernel,
        _on((a, b, b_q, b_shuffle, shuffle_scales(scales, pad_value=0)), device),
        device,
    )
    poisoned = shuffle_scales(scales, pad_value=pad)
    out = _run(custom_kernel, _on((a, b, b_q, b_shuffle, poisoned), device), device)
    require_same_bits(f"scale padding 0x{pad:02X}", out, clean, "want: the bits with padding 0x00")


NAMES = ("A", "B", "B_q", "B_shuffle", "B_scale_sh")


def test_inputs_are_never_written(custom_kernel, device):
    data = generate_input(9, 64, 256, 4, device=device)
    before = [t.clone() for t in data]
    _run(custom_kernel, data, device)
    for name, t, b in zip(NAMES, data, before, strict=True):
        now, was = t.view(torch.uint8).cpu().flatten(), b.view(torch.uint8).cpu().flatten()
        changed = now != was
        if bool(changed.any()):
            first = int(changed.nonzero()[0])
            raise Departure(
                f"input {name} written", element=(first,), got=int(now[first]),
                want=int(was[first]), count=int(changed.sum()), total=changed.numel(),
                detail="element = byte offset; got/want = the byte after/before the call",
            )  # fmt: skip


def test_output_is_its_own_bf16_tensor(custom_kernel, device):
    first = generate_input(3, 128, 128, 1, device=device)
    out = _run(custom_kernel, first, device)
    _form("output form", out, 3, 128)
    if out.device != first[0].device:
        raise Departure("output form", detail=f"output on {out.device}, A on {first[0].device}")
    kept = out.clone()
    _run(custom_kernel, generate_input(3, 128, 128, 2, device=device), device)
    require_same_bits("output aliasing", out, kept, "a later call overwrote an earlier output")


def test_the_same_input_gives_the_same_bits(custom_kernel, device):
    data = generate_input(17, 64, 512, 8, device=device)
    first = _run(custom_kernel, data, device)
    require_same_bits("determinism", _run(custom_kernel, data, device), first, "want: 1st call")


@pytest.mark.skipif(
    not (hasattr(torch, "float4_e2m1fn_x2") and hasattr(torch, "float8_e8m0fnu")),
    reason="this torch has no float4_e2m1fn_x2 / float8_e8m0fnu (torch < 2.8)",
)
def test_upstream_dtypes_give_the_bits_of_uint8(custom_kernel, device):
    a, b, b_q, b_shuffle, b_scale_sh = generate_input(4, 64, 256, 9, device=device)
    want = _run(custom_kernel, (a, b, b_q, b_shuffle, b_scale_sh), device)
    typed = (
        a,
        b,
        b_q.view(torch.float4_e2m1fn_x2),
        b_shuffle.view(torch.float4_e2m1fn_x2),
        b_scale_sh.view(torch.float8_e8m0fnu),
    )
    out = _run(custom_kernel, typed, device)
    require_same_bits("upstream dtypes", out, want, "want: the bits of the uint8 operands")


# -- the task's shapes, on a GPU --------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("shape", TEST_SHAPES + LEADERBOARD, ids=lambda s: s.id)
def test_task_shapes(custom_kernel, shape):
    device = torch.device("cuda")
    for seed in (shape.m * 7 + 1, shape.n + shape.k):
        data = generate_input(*shape, seed=seed, device=device)
        out = _run(custom_kernel, data, device)
        _within_rule_and_bound(f"task shape {shape.id} seed {seed}", out, *data[:1], *data[3:])
