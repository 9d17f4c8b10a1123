"""The Triton split-K reducer: the twin of the native reducer in ``kernels/reducer/``.

Sums fp32 partials (S, M, N) over S in order 0..S-1 in fp32 and rounds to bf16 RNE. The
rounding is written in integer ops (the same formula as ``splitk_reduce.cu``) rather than as
``.to(tl.bfloat16)``: Triton's interpreter truncates in that cast (checked with triton 3.9:
1 + 3 * 2**-8 gives 0x3F81, RNE gives 0x3F82), and NaN bits differ between vendors' cast
instructions. The integer form gives the same bits everywhere, NaN included: every NaN is written
as the canonical quiet NaN 0x7FC0, because the sign and payload of an fp32 sum that meets a NaN
are the hardware's (compiled for an NVIDIA GPU the add returns 0x7FFFFFFF; the interpreter and
x86 keep a quieted operand).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _bf16_rne_bits(x):
    """fp32 -> bf16 bits (in a uint32), round to nearest even; every NaN becomes 0x7FC0."""
    u = x.to(tl.uint32, bitcast=True)
    is_nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return tl.where(is_nan, 0x7FC0, rounded)


@triton.jit
def splitk_reduce_kernel(
    partials_ptr,  # fp32 (S, M, N), contiguous
    out_ptr,  # bf16 (M, N), unit column stride
    M,
    N,
    stride_om,  # out row stride, in elements
    stride_ps,  # distance between partial planes, in elements (M * N)
    S,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    # int64 row offsets; the planes are reached by stepping the pointers, so S * M * N may pass
    # 2**31 without an int32 product.
    ptrs = partials_ptr + (rows[:, None].to(tl.int64) * N + cols[None, :])
    # Start from partial 0 itself (not 0.0 + p0) so that a -0 partial stays -0 when S == 1.
    acc = tl.load(ptrs, mask=mask, other=0.0)
    for _ in range(1, S):
        ptrs += stride_ps
        acc += tl.load(ptrs, mask=mask, other=0.0)
    bits = _bf16_rne_bits(acc).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    out_offs = rows[:, None].to(tl.int64) * stride_om + cols[None, :]
    tl.store(out_ptr + out_offs, bits, mask=mask)
