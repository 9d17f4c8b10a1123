"""@triton.jit fused quantize + MXFP4 GEMM: C[M, N] = quant(A)[M, K] @ B[N, K]^T.

One program computes a BLOCK_M x BLOCK_N tile of C over its split's K range:

- A (bf16, any strides) is loaded BLOCK_K at a time and quantized in registers by
  :func:`kernels._quant.quantize_tile`;
- B is read in its (16,16) shuffled layout as the (N/16, K*8) byte matrix the layout defines:
  the tile's 16-row groups are contiguous runs of BLOCK_K*8 bytes, loaded whole and un-permuted
  in registers (reshape + permute), so the global loads stay wide;
- B's scales likewise: with BLOCK_K a multiple of 256, a 32-row group's scales for the step are
  one contiguous run of BLOCK_K bytes, un-permuted in registers; otherwise they are gathered with
  the shuffle's offset formula, masked to the K/32 real columns, so padding is never read for a
  valid row;
- ``tl.dot_scaled`` (e2m1 x e2m1, fp32 accumulation) does the math.

``EVEN_K`` (BLOCK_K divides K, so it divides every split too) drops every K mask: the loads are
unconditional. Rows past M or N are clamped to a valid row rather than masked, so no load needs
a row mask; only the store is masked.

With SPLIT_K == 1 the program rounds to bf16 (RNE) and stores C; otherwise it stores its fp32
partial at ``c_ptr[pid_k]`` and :mod:`kernels.splitk` reduces the partials.

**NaN rows.** A block of A holding a NaN gets the E8M0 NaN scale 0xFF from its block maximum
(:mod:`kernels._quant`), and ``tl.dot_scaled`` makes the whole block NaN, so every output of
the row is NaN through the product itself: the kernel has no separate row flag or select.
Where that holds, checked (issue 13, item 2; docs/kernel-performance.md):

- the CPU interpreter: ``tests/test_gemm.py::test_nan_in_a_makes_its_row_nan``;
- sm90: Triton emulates ``dot_scaled`` (``fast_math=False``, the default) and maps a 0xFF scale
  to NaN before the bf16 MMA; the same test on the H200;
- gfx950: the 0xFF byte reaches ``v_mfma_scale_*``'s scale operand unchanged, and an E8M0 0xFF
  is NaN in the OCP MX format that instruction implements; the same test in the MI355X GPU job.

Before, the kernel also forced NaN rows explicitly; with the 0xFF scale that forcing was
redundant on all three, and removing it left every test green, so it cost VALU work for nothing.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels._quant import quantize_tile
from kernels._reduce_kernel import _bf16_rne_bits


@triton.jit
def _load_b_tile(
    b_ptr,
    offs_g,
    k0,
    K,
    stride_bn,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """(BLOCK_N, BLOCK_K/2) packed B bytes of the 16-row groups ``offs_g``, K from k0, unshuffled.

    Each group's BLOCK_K/2 bytes per row are one contiguous run of BLOCK_K*8 bytes in the (16,16)
    layout: loaded whole (16-byte loads), un-permuted in registers."""
    offs_c = k0 * 8 + tl.arange(0, BLOCK_K * 8)  # 16 rows x BLOCK_K/2 bytes per group
    ptrs = b_ptr + offs_g[:, None] * stride_bn + offs_c[None, :]
    if EVEN_K:
        raw = tl.load(ptrs)
    else:
        k_mask = (offs_c < K * 8)[None, :]
        raw = tl.load(ptrs, mask=k_mask, other=0)
    # [group][k32 block][half][row][16 bytes] -> [group][row][k32 block][half][16 bytes]
    tiles = tl.reshape(raw, (BLOCK_N // 16, BLOCK_K // 64, 2, 16, 16))
    return tl.reshape(tl.permute(tiles, (0, 3, 1, 2, 4)), (BLOCK_N, BLOCK_K // 2))


@triton.jit
def _load_b_scales(
    s_ptr, offs_s, offs_r, k0, K, stride_sn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    RUNS: tl.constexpr,
):  # fmt: skip
    """(BLOCK_N, BLOCK_K/32) E8M0 bytes of B from the shuffled scale layout.

    ``RUNS`` (BLOCK_K a multiple of 256 and dividing K): a 32-row group's scales for K columns
    [k0, k0 + BLOCK_K) are one contiguous run of BLOCK_K bytes at ``group * stride + k0``
    (8 columns x 32 rows per 256-byte chunk), loaded whole and un-permuted in registers like B.
    Otherwise each byte is gathered with the layout's formula, masked to the K/32 real columns so
    the padding is never read."""
    if RUNS:
        offs_b = k0 + tl.arange(0, BLOCK_K)
        raw = tl.load(s_ptr + offs_s[:, None] * stride_sn + offs_b[None, :])
        # byte in a chunk: (c%4)*64 + (r%16)*4 + ((c%8)//4)*2 + (r%32)//16
        raw = tl.reshape(raw, (BLOCK_N // 32, BLOCK_K // 256, 4, 16, 2, 2))
        # -> [group][(r%32)//16][r%16][chunk][(c%8)//4][c%4] = (row, column) order
        return tl.reshape(tl.permute(raw, (0, 5, 3, 1, 4, 2)), (BLOCK_N, BLOCK_K // 32))
    else:
        c = k0 // 32 + tl.arange(0, BLOCK_K // 32)
        r = offs_r
        row_off = (r // 32) * stride_sn + (r % 16) * 4 + (r % 32) // 16
        col_off = (c // 8) * 256 + (c % 4) * 64 + ((c % 8) // 4) * 2
        return tl.load(
            s_ptr + row_off[:, None] + col_off[None, :], mask=(c < K // 32)[None, :], other=0
        )


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
    EVEN_K: tl.constexpr = False,
    HW_BF16: tl.constexpr = False,
    CAST_A: tl.constexpr = False,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    # Rows past M and N are clamped to the last valid one instead of masked: the loads stay
    # unconditional, and those rows' results are never stored. N is a multiple of 32, so whole
    # 16-row B groups and 32-row scale groups are valid.
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rows_a = tl.minimum(offs_m, M - 1)
    offs_g = tl.minimum(pid_n * (BLOCK_N // 16) + tl.arange(0, BLOCK_N // 16), N // 16 - 1)
    offs_s = tl.minimum(pid_n * (BLOCK_N // 32) + tl.arange(0, BLOCK_N // 32), N // 32 - 1)
    offs_r = tl.minimum(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), N - 1)
    k_begin = pid_k * K_PER_SPLIT
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_begin, k_end, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + rows_a[:, None] * stride_am + offs_k[None, :] * stride_ak
        if EVEN_K:
            a = tl.load(a_ptrs)
        else:
            a = tl.load(a_ptrs, mask=(offs_k < k_end)[None, :], other=0.0)
        # a block holding a NaN gets the E8M0 NaN scale 0xFF: the product makes its row NaN
        a_q, a_s = quantize_tile(a, BLOCK_M, BLOCK_K, QUANT_PATH, CAST_A=CAST_A)
        b = _load_b_tile(b_ptr, offs_g, k0, k_end, stride_bn, BLOCK_N, BLOCK_K, EVEN_K)
        b_s = _load_b_scales(
            bs_ptr, offs_s, offs_r, k0, k_end, stride_bsn, BLOCK_N, BLOCK_K,
            EVEN_K and BLOCK_K % 256 == 0,
        )  # fmt: skip
        acc = tl.dot_scaled(a_q, a_s, "e2m1", tl.trans(b), b_s, "e2m1", acc)

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    c_ptrs = c_ptr + pid_k * stride_cs + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    if SPLIT_K == 1:
        if HW_BF16:
            # compiled: the cast is the device's RNE conversion (v_cvt_pk_bf16_f32 on gfx950,
            # denormals preserved; cvt.rn.bf16.f32 on sm90), two values per instruction, equal
            # to the integer RNE below on every non-NaN value
            out = acc.to(tl.bfloat16, fp_downcast_rounding="rtne")
        else:
            # the interpreter's bf16 cast truncates: integer RNE, the reducers' formula
            out = _bf16_rne_bits(acc).to(tl.uint16).to(tl.bfloat16, bitcast=True)
        tl.store(c_ptrs, out, mask=mask)
    else:
        tl.store(c_ptrs, acc, mask=mask)
