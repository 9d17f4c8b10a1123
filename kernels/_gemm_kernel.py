"""@triton.jit fused quantize + MXFP4 GEMM: C[M, N] = quant(A)[M, K] @ B[N, K]^T.

One program computes a BLOCK_M x BLOCK_N tile of C over its split's K range:

- A (bf16, any strides) is loaded BLOCK_K at a time and quantized in registers by
  :func:`kernels._quant.quantize_tile`;
- B is read in its (16,16) shuffled layout as the (N/16, K*8) byte matrix the layout defines:
  the tile's 16-row groups are contiguous runs of BLOCK_K*8 bytes, loaded whole and un-permuted
  in registers (reshape + permute), so the global loads stay wide;
- B's scales are gathered with the shuffle's offset formula, masked to valid rows and to the
  K/32 real columns, so padding is never read for a valid row;
- ``tl.dot_scaled`` (e2m1 x e2m1, fp32 accumulation) does the math.

With SPLIT_K == 1 the program rounds to bf16 (RNE, in integer ops) and stores C; otherwise it stores its fp32 partial
at ``c_ptr[pid_k]`` and :mod:`kernels.splitk` reduces the partials. A row of A that holds a NaN
makes its output row NaN explicitly, independent of how a device treats the E8M0 NaN scale.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels._quant import quantize_tile
from kernels._reduce_kernel import _bf16_rne_bits


@triton.jit
def _load_b_tile(b_ptr, pid_n, k0, N, K, stride_bn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """(BLOCK_N, BLOCK_K/2) packed B bytes for rows pid_n*BLOCK_N.. and K from k0, unshuffled."""
    offs_g = pid_n * (BLOCK_N // 16) + tl.arange(0, BLOCK_N // 16)  # 16-row groups
    offs_c = k0 * 8 + tl.arange(0, BLOCK_K * 8)  # 16 rows x BLOCK_K/2 bytes per group
    mask = (offs_g < N // 16)[:, None] & (offs_c < K * 8)[None, :]
    raw = tl.load(b_ptr + offs_g[:, None] * stride_bn + offs_c[None, :], mask=mask, other=0)
    # [group][k32 block][half][row][16 bytes] -> [group][row][k32 block][half][16 bytes]
    tiles = tl.reshape(raw, (BLOCK_N // 16, BLOCK_K // 64, 2, 16, 16))
    return tl.reshape(tl.permute(tiles, (0, 3, 1, 2, 4)), (BLOCK_N, BLOCK_K // 2))


@triton.jit
def _load_b_scales(s_ptr, pid_n, k0, N, K, stride_sn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """(BLOCK_N, BLOCK_K/32) E8M0 bytes of B, gathered from the shuffled scale layout."""
    r = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c = k0 // 32 + tl.arange(0, BLOCK_K // 32)
    row_off = (r // 32) * stride_sn + (r % 16) * 4 + (r % 32) // 16
    col_off = (c // 8) * 256 + (c % 4) * 64 + ((c % 8) // 4) * 2
    mask = (r < N)[:, None] & (c < K // 32)[None, :]
    return tl.load(s_ptr + row_off[:, None] + col_off[None, :], mask=mask, other=0)


@triton.jit
def gemm_a16wfp4_kernel(
    a_ptr,
    b_ptr,
    bs_ptr,
    c_ptr,
    M,
    N,
    K,
    K_PER_SPLIT,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bsn,
    stride_cs,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    QUANT_PATH: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = offs_m < M
    k_begin = pid_k * K_PER_SPLIT
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    row_nan = tl.zeros((BLOCK_M,), dtype=tl.int32)
    for k0 in range(k_begin, k_end, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
            mask=mask_m[:, None] & (offs_k < k_end)[None, :],
            other=0.0,
        )
        a_q, a_s = quantize_tile(a, BLOCK_M, BLOCK_K, QUANT_PATH)
        row_nan = tl.maximum(row_nan, tl.max((a_s == 255).to(tl.int32), axis=1))
        b = _load_b_tile(b_ptr, pid_n, k0, N, k_end, stride_bn, BLOCK_N, BLOCK_K)
        b_s = _load_b_scales(bs_ptr, pid_n, k0, N, k_end, stride_bsn, BLOCK_N, BLOCK_K)
        acc = tl.dot_scaled(a_q, a_s, "e2m1", tl.trans(b), b_s, "e2m1", acc)

    acc = tl.where(row_nan[:, None] > 0, float("nan"), acc)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = mask_m[:, None] & (offs_n < N)[None, :]
    c_ptrs = c_ptr + pid_k * stride_cs + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    if SPLIT_K == 1:
        # integer RNE, bit-identical to the reducer's; the interpreter's bf16 cast truncates
        out = _bf16_rne_bits(acc).to(tl.uint16).to(tl.bfloat16, bitcast=True)
        tl.store(c_ptrs, out, mask=mask)
    else:
        tl.store(c_ptrs, acc, mask=mask)
