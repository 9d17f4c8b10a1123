"""Task-faithful inputs, the reference GEMM, and the leaderboard's pass rule.

``reference_gemm`` is the suite's single source of truth for the GEMM: it quantizes A with the
oracle (:mod:`kernels.mxfp4`), dequantizes both operands to fp32 values (see
:func:`fp32_operand`), multiplies and accumulates in float64, and rounds once to bf16
(round-to-nearest-even from float64, not through fp32, so the only error is the float64
accumulation: relative 2**-53 per add, far below half a bf16 ulp).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.layout import shuffle_scales, shuffle_weight, unshuffle_scales, unshuffle_weight
from kernels.mxfp4 import as_uint8, dequantize_mxfp4, quantize_mxfp4

LEADERBOARD_ATOL = 1e-2
LEADERBOARD_RTOL = 1e-2


def generate_input(m: int, n: int, k: int, seed: int, device: str | torch.device | None = None):
    """The leaderboard tuple ``(A, B, B_q, B_shuffle, B_scale_sh)``, built as the task builds it.

    A (M, K) and then B (N, K) are drawn as bf16 ``randn`` from one generator seeded with
    ``seed`` on ``device``; B is quantized with the oracle, its bytes shuffled (16,16) and its
    scales padded and shuffled. Packed fp4 and E8M0 tensors are returned as uint8 (Triton rejects
    torch's float4/float8 views; every function here accepts both). The scale padding, left
    uninitialised upstream, is the E8M0 NaN (see :mod:`kernels.layout`).
    """
    _check_problem(m, n, k, seed)
    device = torch.device(device if device is not None else "cpu")
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    a = torch.randn((m, k), dtype=torch.bfloat16, device=device, generator=gen)
    b = torch.randn((n, k), dtype=torch.bfloat16, device=device, generator=gen)
    return _leaderboard_tuple(a, b)


# e2m1 values, +0 once: what grid-valued inputs are drawn from
_GRID_VALUES = (0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6)


def lossless_input(m: int, n: int, k: int, seed: int, device: str | torch.device | None = None):
    """A leaderboard tuple whose A and B already lie on the fp4 grid with scale 2**0.

    Every 32-element block holds a +-6, so its amax rounds to scale 2**0 and quantization loses
    nothing; products are small multiples of 1/4, so fp32 and fp64 sums are both exact and a
    correct kernel must equal :func:`reference_gemm` bit for bit. Drawn on the CPU (A, then B)
    from a generator seeded with ``seed``, then moved to ``device``.
    """
    _check_problem(m, n, k, seed)
    gen = torch.Generator().manual_seed(seed)
    grid = torch.tensor(_GRID_VALUES)
    a = grid[torch.randint(0, len(_GRID_VALUES), (m, k), generator=gen)]
    b = grid[torch.randint(0, len(_GRID_VALUES), (n, k), generator=gen)]
    a[:, ::32] = 6.0
    b[:, ::32] = -6.0
    device = torch.device(device if device is not None else "cpu")
    return _leaderboard_tuple(a.to(torch.bfloat16).to(device), b.to(torch.bfloat16).to(device))


def _leaderboard_tuple(a: torch.Tensor, b: torch.Tensor):
    b_q, b_scale = quantize_mxfp4(b)
    return a, b, b_q, shuffle_weight(b_q), shuffle_scales(b_scale)


def _check_problem(m: int, n: int, k: int, seed: int) -> None:
    for name, v in (("m", m), ("n", n), ("k", k), ("seed", seed)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if m < 1 or n < 1 or k < 1:
        raise ValueError(f"m, n, k must be >= 1, got m={m}, n={n}, k={k}")
    if k % 64:
        raise ValueError(f"k must be a multiple of 64 (the task asserts K % 64 == 0), got {k}")
    if n % 16:
        raise ValueError(f"n must be a multiple of 16 (the (16,16) weight shuffle), got {n}")


def round_to_bf16(x: torch.Tensor) -> torch.Tensor:
    """Round float64 ``x`` to bf16 once, with round-to-nearest-even.

    torch converts float64 to bf16 through fp32, which rounds twice. Rounding to fp32 with
    round-to-odd first keeps enough sticky information (29 spare bits) that the second rounding
    is exactly the single RNE rounding of the float64 value.
    """
    f = x.to(torch.float32)
    inexact = (f.to(torch.float64) != x) & torch.isfinite(f)
    # truncate toward zero: step back one ulp where RNE rounded away from zero
    away = inexact & (f.to(torch.float64).abs() > x.abs())
    bits = f.view(torch.int32)
    bits = torch.where(away, bits - 1, bits)  # same sign, magnitude one ulp smaller
    bits = torch.where(inexact, bits | 1, bits)  # round-to-odd: set the sticky bit
    return bits.view(torch.float32).to(torch.bfloat16)


def fp32_operand(x: torch.Tensor) -> torch.Tensor:
    """Dequantized float64 operand values as an fp32 GEMM sees them: unchanged, except that a
    value of magnitude 2**128 or more (E8M0 byte 253 with code 4 or 6: a block holding +-inf, or
    whose amax rounds up to 2**128, i.e. |x| >= 0x7F600000 ~ 2.98e38) becomes +-inf.

    Every MXFP4 value with a smaller magnitude is exactly representable in fp32 (subnormals
    included: the smallest is 0.5 * 2**-127), so this cast rounds nothing else. It is the
    semantics of ``tl.dot_scaled``, which upcasts each operand by its scale before the product
    (the interpreter in fp32, Hopper's emulation in bf16): 6 * 2**126 times any weight is then
    +-inf, or NaN against a zero weight, never the finite 2.55e38 * b an fp64 product would give.
    """
    return x.to(torch.float32).to(torch.float64)


def dequantized_weight(b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor, k: int) -> torch.Tensor:
    """The float64 (N, K) weight that the shuffled operands encode, as fp32 values
    (:func:`fp32_operand`)."""
    n = b_shuffle.shape[0]
    b_q = unshuffle_weight(as_uint8(b_shuffle, "B_shuffle"))
    b_scale = unshuffle_scales(as_uint8(b_scale_sh, "B_scale_sh"), n, k)
    return fp32_operand(dequantize_mxfp4(b_q, b_scale, torch.float64))


def reference_gemm(
    a: torch.Tensor, b_shuffle: torch.Tensor, b_scale_sh: torch.Tensor
) -> torch.Tensor:
    """bf16 (M, N) = quantize(A) @ B^T: operands as fp32 values (:func:`fp32_operand`: +-inf in A
    gives +-inf, or NaN where it meets a zero weight or an opposite inf), float64 products and
    accumulation, one rounding to bf16."""
    if not isinstance(a, torch.Tensor) or a.dtype != torch.bfloat16 or a.dim() != 2:
        got = (
            f"{a.dim()}-D {a.dtype} of shape {tuple(a.shape)}"
            if isinstance(a, torch.Tensor)
            else type(a).__name__
        )
        raise TypeError(f"A must be a 2-D bfloat16 tensor (M, K), got {got}")
    k = a.shape[1]
    if b_shuffle.dim() != 2 or b_shuffle.shape[1] * 2 != k:
        raise ValueError(
            f"B_shuffle must be (N, K/2) = (N, {k // 2}) for A of shape {tuple(a.shape)}, "
            f"got {tuple(b_shuffle.shape)}"
        )
    a_q, a_scale = quantize_mxfp4(a)
    a64 = fp32_operand(dequantize_mxfp4(a_q, a_scale, torch.float64))
    b64 = dequantized_weight(b_shuffle, b_scale_sh, k)
    return round_to_bf16(a64 @ b64.T)


@dataclass(frozen=True)
class LeaderboardReport:
    """Outcome of the leaderboard's check, with enough detail to debug a failure."""

    passed: bool
    total: int
    mismatches: int
    nonfinite_mismatches: int  # NaN/Inf where the reference has none, or the other way round
    worst_index: tuple[int, ...] | None  # where |out - ref| most exceeds its tolerance
    worst_out: float | None
    worst_ref: float | None
    worst_excess: float | None  # |out - ref| - tolerance at worst_index

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        if self.passed:
            return f"leaderboard check passed: {self.total} elements within 1e-2 + 1e-2*|ref|"
        return (
            f"leaderboard check FAILED: {self.mismatches}/{self.total} elements out of tolerance "
            f"({self.nonfinite_mismatches} NaN/Inf mismatches); worst at {self.worst_index}: "
            f"out={self.worst_out!r} ref={self.worst_ref!r} exceeds tolerance by {self.worst_excess!r}"
        )


def check_leaderboard(out: torch.Tensor, ref: torch.Tensor) -> LeaderboardReport:
    """The task's pass rule: every element within ``1e-2 + 1e-2*|ref|``; NaN and Inf must match.

    Computed in float64 on ``out``'s device (elementwise IEEE operations: the same bits as on
    the CPU), so a check costs one synchronisation, not a copy to the host and the host's
    threads (an A/B worker checks every output of every input copy)."""
    if out.shape != ref.shape:
        raise ValueError(f"out has shape {tuple(out.shape)} but ref has {tuple(ref.shape)}")
    o = out.detach().to(torch.float64)
    r = ref.detach().to(device=o.device, dtype=torch.float64)
    tol = LEADERBOARD_ATOL + LEADERBOARD_RTOL * r.abs()
    same_nonfinite = (torch.isnan(o) & torch.isnan(r)) | (torch.isinf(o) & (o == r))
    finite_both = torch.isfinite(o) & torch.isfinite(r)
    excess = torch.where(finite_both, (o - r).abs() - tol, torch.inf)
    excess = torch.where(same_nonfinite, -torch.inf, excess)
    bad = excess > 0
    mismatches = int(bad.sum())
    if mismatches == 0:
        return LeaderboardReport(True, o.numel(), 0, 0, None, None, None, None)
    o, r, excess, bad, finite_both = (t.cpu() for t in (o, r, excess, bad, finite_both))
    flat = int(torch.argmax(excess).item())
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), o.shape))
    return LeaderboardReport(
        passed=False,
        total=o.numel(),
        mismatches=mismatches,
        nonfinite_mismatches=int((bad & ~finite_both).sum()),
        worst_index=idx,
        worst_out=float(o[idx]),
        worst_ref=float(r[idx]),
        worst_excess=float(excess[idx]),
    )
