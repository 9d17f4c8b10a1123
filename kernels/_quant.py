"""@triton.jit MXFP4 quantizer used inside the GEMM (and by the standalone quantize kernel).

Two implementations of the e2m1 conversion sit behind ``quantize_tile``; the compile target
picks one through the ``QUANT_PATH`` constexpr, a :class:`kernels.targets.QuantPath` (see
:func:`kernels.quant.quant_impl`):

- gfx950: ``v_cvt_scalef32_pk_fp4_bf16`` converts two bf16 values to two e2m1 nibbles, dividing
  by a float scale whose bits are ``e8m0 << 23`` and rounding to nearest-even with saturation;
- everywhere else (NVIDIA, the CPU interpreter, which cannot run inline asm): the same rounding
  as seven threshold comparisons on ``|q|``, written in plain ``tl``.

The block maximum, the scale and the NaN rule are shared code, so the two paths differ only in
the rounding step, and both must equal :func:`kernels.mxfp4.quantize_mxfp4` bit for bit.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.targets import QuantPath

_GFX950_CVT: tl.constexpr = tl.constexpr(int(QuantPath.GFX950_CVT))


@triton.jit
def _abs_bits_max(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """Per 32-element block: max |x| as fp32 bits (int32), NaN counted as 0, and a NaN flag.

    Done on integer bits: for non-negative floats integer order is float order, and integers
    have no NaN propagation or denormal flushing to differ between devices.
    """
    bits = x.to(tl.float32).to(tl.int32, bitcast=True)
    abs_bits = bits & 0x7FFFFFFF
    is_nan = abs_bits > 0x7F800000
    abs_bits = tl.where(is_nan, 0, abs_bits)
    amax = tl.max(tl.reshape(abs_bits, (BLOCK_M, BLOCK_K // 32, 32)), axis=2)
    has_nan = tl.max(tl.reshape(is_nan.to(tl.int32), (BLOCK_M, BLOCK_K // 32, 32)), axis=2)
    return amax, has_nan


@triton.jit
def _e2m1_code_portable(x, e, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """Magnitude codes 0..7 of ``x * 2**-e`` with RNE and saturation (NaN -> 0)."""
    # 2**-e built from its exponent bits: exact for every e in [-127, 126]
    inv_scale = ((127 - e) << 23).to(tl.float32, bitcast=True)
    q = tl.reshape(x.to(tl.float32), (BLOCK_M, BLOCK_K // 32, 32)) * inv_scale[:, :, None]
    qa = tl.abs(q)
    # ties: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4 (">=" where the tie goes up)
    code = (qa > 0.25).to(tl.int32) + (qa >= 0.75).to(tl.int32) + (qa > 1.25).to(tl.int32)
    code += (qa >= 1.75).to(tl.int32) + (qa > 2.5).to(tl.int32) + (qa >= 3.5).to(tl.int32)
    code += (qa > 5.0).to(tl.int32)
    return tl.reshape(code, (BLOCK_M, BLOCK_K))


@triton.jit
def _e2m1_code_gfx950(x, e, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """Magnitude codes 0..7 through the gfx950 conversion instruction (NaN -> 0, as portable)."""
    scale = ((e + 127) << 23).to(tl.float32, bitcast=True)  # the instruction divides by this
    scale = tl.reshape(
        tl.broadcast_to(scale[:, :, None], (BLOCK_M, BLOCK_K // 32, 16)), (BLOCK_M, BLOCK_K // 2)
    )
    pairs = tl.reshape(x.to(tl.bfloat16).to(tl.uint16, bitcast=True), (BLOCK_M, BLOCK_K // 2, 2))
    lo, hi = tl.split(pairs)
    packed_in = lo.to(tl.uint32) | (hi.to(tl.uint32) << 16)
    out = tl.inline_asm_elementwise(
        "v_cvt_scalef32_pk_fp4_bf16 $0, $1, $2",
        "=v,v,v",
        [packed_in, scale],
        dtype=tl.uint32,
        is_pure=True,
        pack=1,
    )
    # byte 0 holds the pair; keep magnitudes only (the sign is set from the input bits below)
    code = tl.join((out & 0x7).to(tl.int32), ((out >> 4) & 0x7).to(tl.int32))
    code = tl.reshape(code, (BLOCK_M, BLOCK_K))
    abs_bits = x.to(tl.float32).to(tl.int32, bitcast=True) & 0x7FFFFFFF
    return tl.where(abs_bits > 0x7F800000, 0, code)


@triton.jit
def quantize_tile(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, QUANT_PATH: tl.constexpr):
    """bf16/fp32 tile (BLOCK_M, BLOCK_K) -> (packed uint8 (BLOCK_M, BLOCK_K/2), scales uint8
    (BLOCK_M, BLOCK_K/32)), the rule of :mod:`kernels.mxfp4` bit for bit."""
    amax, has_nan = _abs_bits_max(x, BLOCK_M, BLOCK_K)
    exponent_field = ((amax + 0x200000) & 0x7F800000) >> 23
    e = tl.minimum(tl.maximum(exponent_field - 129, -127), 127)
    if QUANT_PATH == _GFX950_CVT:
        code = _e2m1_code_gfx950(x, e, BLOCK_M, BLOCK_K)
    else:
        code = _e2m1_code_portable(x, e, BLOCK_M, BLOCK_K)
    sign = (x.to(tl.float32).to(tl.int32, bitcast=True) >> 28) & 0x8
    code = code | sign
    lo, hi = tl.split(tl.reshape(code, (BLOCK_M, BLOCK_K // 2, 2)))
    packed = (lo | (hi << 4)).to(tl.uint8)
    scales = tl.where(has_nan > 0, 255, e + 127).to(tl.uint8)
    return packed, scales


@triton.jit
def quantize_kernel(
    x_ptr,
    q_ptr,
    s_ptr,
    M,
    K,
    stride_xm,
    stride_qm,
    stride_sm,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    QUANT_PATH: tl.constexpr,
):
    """Standalone quantize: the exact ``quantize_tile`` the GEMM runs, exposed for testing."""
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    x = tl.load(
        x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :],
        mask=mask_m[:, None] & (offs_k < K)[None, :],
        other=0.0,
    )
    packed, scales = quantize_tile(x, BLOCK_M, BLOCK_K, QUANT_PATH)
    offs_q = pid_k * (BLOCK_K // 2) + tl.arange(0, BLOCK_K // 2)
    tl.store(
        q_ptr + offs_m[:, None] * stride_qm + offs_q[None, :],
        packed,
        mask=mask_m[:, None] & (offs_q < K // 2)[None, :],
    )
    offs_s = pid_k * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)
    tl.store(
        s_ptr + offs_m[:, None] * stride_sm + offs_s[None, :],
        scales,
        mask=mask_m[:, None] & (offs_s < K // 32)[None, :],
    )
