"""Partials that exercise every rounding and special-value path of the split-K reduction.

Shared by the CPU tests of the Triton reducer, the GPU tests of the native reducer and the
benchmark's correctness check, so that all of them judge the same cases. Each special case is
one output element; the remaining elements are seeded random normals.
"""

from __future__ import annotations

import struct

import torch

INF = float("inf")
NAN = float("nan")
BF16_MAX_BITS = 0x7F7F  # largest finite bf16, 3.3895e38


def f32(bits: int) -> float:
    """The fp32 value with these bits."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def _split(total: float, hi_bits: int, s: int) -> list[float]:
    """``s`` partials whose in-order fp32 sum is exactly ``total``: the bf16-representable part
    first, the remainder second (both exact), then zeros."""
    if s == 1:
        return [total]
    hi = f32(hi_bits << 16)
    return [hi, total - hi] + [0.0] * (s - 2)


def special_columns(s: int, generator: torch.Generator) -> list[tuple[str, list[float]]]:
    """(why, the S partials of one element) for every boundary case at split count ``s``."""
    cases: list[tuple[str, list[float]]] = [
        ("-0 + -0 + ... stays -0 (and a lone -0 with S == 1)", [-0.0] * s),
        ("NaN in one split makes the sum NaN", [1.0] * (s // 2) + [NAN] + [1.0] * (s - s // 2 - 1)),
        ("+Inf in split 0 survives finite additions", [INF] + [1.0] * (s - 1)),
        ("-Inf in the last split", [1.0] * (s - 1) + [-INF]),
        ("a subnormal fp32 sum rounds to a subnormal bf16", [f32(0x00012345)] * s),
        ("smallest fp32 subnormal rounds to zero in bf16", [f32(0x00000001)] * s),
        # bf16 rounding of the largest values: 0x7F7F7FFF is below the midpoint to Inf (stays
        # max finite), 0x7F7F8000 is the midpoint with an odd lower neighbour (RNE goes to Inf).
        (
            "just below the bf16 overflow midpoint: max finite",
            _split(f32(0x7F7F7FFF), BF16_MAX_BITS, s),
        ),
        (
            "exactly the bf16 overflow midpoint: RNE rounds to Inf",
            _split(f32(0x7F7F8000), BF16_MAX_BITS, s),
        ),
        ("the negative overflow midpoint: -Inf", _split(f32(0xFF7F8000), 0xFF7F, s)),
    ]
    if s >= 2:
        cases += [
            ("-0 + +0 is +0", [-0.0] * (s - 1) + [0.0]),
            ("+Inf + -Inf is NaN", [INF] + [0.0] * (s - 2) + [-INF]),
            ("an fp32 sum that overflows to +Inf", [3e38] * s),
            ("an fp32 sum that overflows to -Inf", [-3e38] * s),
        ]
    if s >= 3:
        # Split order matters: (1e8 + 1) - 1e8 == 0 in fp32, whereas 1e8 - 1e8 + 1 == 1.
        cases.append(
            ("order 0..S-1: cancellation after absorption", [1e8, 1.0, -1e8] + [0.0] * (s - 3))
        )
    # bf16 ties built from two exact fp32 partials: bits 0xHHHH8000 are exactly halfway between
    # the bf16 values HHHH and HHHH+1; RNE picks the even one. Both parities, both signs.
    hi = torch.randint(0x0080, 0x7F00, (8,), generator=generator).tolist()
    for h in [*hi, 0x3F80, 0x3F81]:  # 1 + 2**-8 (to even: down), 1 + 3 * 2**-8 (to even: up)
        for sign in (0, 0x8000):
            bits = ((h | sign) << 16) | 0x8000
            cases.append((f"tie 0x{bits:08X}", _split(f32(bits), h | sign, s)))
    return cases


def boundary_partials(s: int, m: int, n: int, seed: int = 0) -> torch.Tensor:
    """fp32 (S, M, N) on the CPU: the special cases first (as many as fit in M * N, in order),
    random normals of mixed magnitude after them."""
    g = torch.Generator().manual_seed(seed)
    flat = torch.randn(s, m * n, generator=g) * torch.exp2(
        torch.randint(-20, 20, (1, m * n), generator=g).float()
    )
    specials = special_columns(s, g)
    for k, (_, column) in enumerate(specials[: m * n]):
        flat[:, k] = torch.tensor(column, dtype=torch.float32)
    return flat.reshape(s, m, n)


def bf16_mismatch(out: torch.Tensor, ref: torch.Tensor, *, nan_bits: bool = False) -> str | None:
    """None when ``out`` equals ``ref`` bit for bit; else a description of the first mismatches.

    NaN is matched by position unless ``nan_bits``: a GEMM's NaN bits are its device's conversion
    instruction's. The reducers specify theirs (0x7FC0, as ``reduce_partials_reference`` writes
    them), so their tests pass ``nan_bits=True`` and compare all 16 bits of every element."""
    if out.shape != ref.shape or out.dtype != torch.bfloat16 or ref.dtype != torch.bfloat16:
        return (
            f"shape/dtype differ: {tuple(out.shape)} {out.dtype} vs {tuple(ref.shape)} {ref.dtype}"
        )
    out, ref = out.cpu(), ref.cpu()
    out_nan, ref_nan = torch.isnan(out), torch.isnan(ref)
    out_bits = out.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    ref_bits = ref.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
    if nan_bits:
        bad = out_bits != ref_bits
    else:
        bad = (out_nan != ref_nan) | (~ref_nan & (out_bits != ref_bits))
    if not bad.any():
        return None
    idx = bad.nonzero()[:5].tolist()
    details = ", ".join(
        f"{tuple(i)}: got 0x{out_bits[tuple(i)].item():04X} want 0x{ref_bits[tuple(i)].item():04X}"
        for i in idx
    )
    return f"{int(bad.sum())} of {bad.numel()} elements differ; first: {details}"
