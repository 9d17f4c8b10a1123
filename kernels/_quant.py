"""@triton.jit MXFP4 quantizer used inside the GEMM (and by the standalone quantize kernel).

The block scale and the NaN flag come from one integer maximum per 32-element block, taken over
the bf16 bit patterns with the sign cleared: for non-negative floats integer order is float order,
and every NaN pattern (0x7F81..0x7FFF) sorts above +inf (0x7F80), so ``amax > 0x7F80`` is the
block's NaN flag. No per-element NaN test, no second reduction.

The e2m1 rounding has three implementations behind ``QUANT_PATH`` (a
:class:`kernels.targets.QuantPath`, chosen by the compile target, see
:func:`kernels.quant.quant_impl`):

- ``GFX950_CVT``: ``v_cvt_scalef32_pk_fp4_bf16`` divides a pair of bf16 values (one 32-bit
  register) by a float scale whose bits are ``e8m0 << 23`` and rounds to nearest-even with
  saturation; its output byte already holds both nibbles with their signs, so it is stored as
  it is;
- ``GFX950_EMULATED``: the same operand preparation as ``GFX950_CVT`` (the very
  :func:`_cvt_operands`), then a bit-level model of the instruction in plain ``tl``. The
  interpreter cannot run inline asm; this lets a CPU test see a wrong operand handed to the
  instruction (issue 13, item 5);
- ``PORTABLE``: the rounding in plain ``tl`` (NVIDIA, and the interpreter's default).

Triton's interpreter casts bf16 subnormals to the wrong fp32 values in ``x.to(tl.float32)``
(0x0003 becomes 2**-127), so what runs there never casts: the portable path shifts the bits into
an fp32 and multiplies by the inverse scale; the model builds the quotient with integer
exponent arithmetic (:func:`_e2m1_code`), so no subnormal is ever formed. Compiled, the
portable path may take the fp32 from the compiler's cast instead (``CAST_A``, the config's
``quant_widen``): both conversions are exact on a GPU (bf16 is the upper half of an fp32), so
the codes are the same, but the two schedule differently and each is faster on some tiles
(docs/kernel-performance.md). The tests enumerate both compiled; on a CPU the cast is checked on
every pattern but the subnormals, where the interpreter's own conversion is pinned as the one
thing that differs (tests/test_quant_kernel.py).

**NaN blocks.** A block whose maximum is a NaN gets the E8M0 NaN byte 0xFF (one select per
block, from the flag above); ``tl.dot_scaled`` turns a 0xFF scale into NaN for the whole block,
so the NaN reaches every output of its row through the product itself (kernels/_gemm_kernel.py
says where that was checked). The oracle (:mod:`kernels.mxfp4`) also defines a NaN block's
element codes: against its finite values, NaN elements as code 0 plus sign. Those need a second,
NaN-free maximum and a per-element fix that the GEMM does not need (a 0xFF scale makes every
code of the block irrelevant), so:

- ``NAN_BLOCK_CODES=False`` (the GEMM): a NaN block's codes are whatever the rounding gives
  against the scale of the maximum that includes the NaN;
- ``NAN_BLOCK_CODES=True`` (:func:`quantize_kernel`, the standalone quantizer): the oracle's
  bytes exactly.

Every block without a NaN is identical in both modes and on every path.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.targets import QuantPath

_GFX950_CVT: tl.constexpr = tl.constexpr(int(QuantPath.GFX950_CVT))
_GFX950_EMULATED: tl.constexpr = tl.constexpr(int(QuantPath.GFX950_EMULATED))
# |bits| of bf16 +inf; anything above it is a NaN
_BF16_INF: tl.constexpr = tl.constexpr(0x7F80)


@triton.jit
def block_abs_max(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """Per 32-element block of the bf16 tile: max of the bit patterns with the sign cleared
    (int32). ``> 0x7F80`` flags a NaN in the block."""
    # in 16 bits: one AND and one packed max per pair of elements on gfx950 (v_pk_max_u16)
    bits = x.to(tl.uint16, bitcast=True) & 0x7FFF
    return tl.max(tl.reshape(bits, (BLOCK_M, BLOCK_K // 32, 32)), axis=2).to(tl.int32)


@triton.jit
def scale_byte(amax):
    """E8M0 byte of a block from its bf16 ``|bits|`` maximum (the rule's steps 2-3).

    Rounding the fp32 amax, ``(bits32 + 0x200000) & 0x7F800000``, is ``(bits16 + 0x20) >> 7`` on
    the bf16 pattern (bf16 is fp32's top half, and the carry out of the mantissa is kept). The
    exponent field ``f`` gives ``e = f - 129`` clamped to [-127, 127], so the byte is
    ``max(f - 2, 0)``: ``f <= 0x100`` (0x7FFF + 0x20 >> 7), so the upper clamp never binds. A NaN
    maximum gives 253 or 254 here; :func:`quantize_tile` replaces it with 0xFF.
    """
    return tl.maximum(((amax + 0x20) >> 7) - 2, 0)


@triton.jit
def _cvt_operands(x, byte, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """The two operands of ``v_cvt_scalef32_pk_fp4_bf16`` per element pair: the bf16 pair in one
    32-bit word (element 2j low), and the scale as fp32 bits ``byte << 23`` (= 2**(byte - 127),
    what the instruction divides by), one per pair of the block.

    Both are built per element and split into pairs the same way, so they share x's layout
    (a scale broadcast straight to pairs would take another layout and a conversion)."""
    scale = tl.reshape(
        tl.broadcast_to((byte << 23)[:, :, None], (BLOCK_M, BLOCK_K // 32, 32)),
        (BLOCK_M, BLOCK_K),
    )
    lo, hi = tl.split(tl.reshape(x.to(tl.uint16, bitcast=True), (BLOCK_M, BLOCK_K // 2, 2)))
    word = lo.to(tl.uint32) | (hi.to(tl.uint32) << 16)
    scale, _ = tl.split(tl.reshape(scale, (BLOCK_M, BLOCK_K // 2, 2)))
    return word, scale


@triton.jit
def _e2m1_code(mag, byte):
    """Magnitude code 0..7 of the bf16 magnitude ``mag`` (int32 bits, sign cleared) divided by
    the E8M0 scale ``2**(byte - 127)``: nearest-even on the e2m1 grid, saturating at 6 (+-inf,
    and NaN, whose code no caller keeps: see the module docstring).

    Exact, and independent of how an evaluator treats subnormals (flushing them, or Triton's
    interpreter, whose bf16 -> fp32 cast misconverts them: 0x0003 becomes 2**-127): the
    quotient is built from the bits, and no subnormal is ever formed. A bf16 magnitude is
    ``sig * 2**(f' - 134)`` with exponent field ``f``, ``f' = max(f, 1)`` and ``sig = 128 +
    mantissa`` (``mantissa`` for a subnormal), so ``|x| / scale = sig * 2**e`` with ``e = f' -
    byte - 7``, an integer exponent clamped to [-20, 10]: below, ``sig < 256`` keeps the
    quotient under 2**-12 (code 0, as the true one is), above, any nonzero ``sig`` is past the
    saturation (code 7). ``sig`` (8 bits) times the normal power of two is exact in fp32.
    (Integer compares of ``sig << shift`` give the same codes but spill registers on sm90 for
    a 64 x 256 A tile.)"""
    field = mag >> 7
    sig = tl.where(field > 0, (mag & 0x7F) | 0x80, mag).to(tl.float32)
    e = tl.minimum(tl.maximum(tl.maximum(field, 1) - byte - 7, -20), 10)
    e = tl.where(field == 255, 10, e)  # +-inf saturates: its bits are not its value
    return _e2m1_rne(sig * ((e + 127) << 23).to(tl.float32, bitcast=True))


@triton.jit
def _e2m1_rne(qa):
    """Magnitude code 0..7 of fp32 ``qa >= 0``: nearest-even on the e2m1 grid, saturating at 6
    (+inf too); NaN gives 0. Ties: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4
    (">=" where the tie goes up)."""
    code = (qa > 0.25).to(tl.int32) + (qa >= 0.75).to(tl.int32) + (qa > 1.25).to(tl.int32)
    code += (qa >= 1.75).to(tl.int32) + (qa > 2.5).to(tl.int32) + (qa >= 3.5).to(tl.int32)
    code += (qa > 5.0).to(tl.int32)
    return code


@triton.jit
def _cvt_emulated(word, scale):
    """Bit-level model of ``v_cvt_scalef32_pk_fp4_bf16 dst, word, scale`` (byte 0 of dst): each
    bf16 half of ``word`` divided by the scale, rounded nearest-even with saturation, its sign
    in bit 3; the low half goes to the low nibble.

    The scale operand is read as task-facts section 6 states it: its exponent field ``f`` is an
    E8M0 scale, 2**(f - 127), so ``f == 0`` is 2**-127, not the 0.0 that the bits 0 spell as
    a float. The division and rounding are :func:`_e2m1_code`'s, exact on every evaluator, so
    the model rounds exactly once, as the instruction does.
    """
    f = ((scale >> 23) & 0xFF).to(tl.int32)
    lo_code = _e2m1_code((word & 0x7FFF).to(tl.int32), f) | ((word >> 12) & 0x8).to(tl.int32)
    hi_code = _e2m1_code(((word >> 16) & 0x7FFF).to(tl.int32), f)
    hi_code |= ((word >> 28) & 0x8).to(tl.int32)
    return (lo_code | (hi_code << 4)).to(tl.uint8)


@triton.jit
def _packed_gfx950(x, byte, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, EMULATE: tl.constexpr):
    """Packed e2m1 bytes (BLOCK_M, BLOCK_K/2) from the conversion instruction (or its model)."""
    word, scale = _cvt_operands(x, byte, BLOCK_M, BLOCK_K)
    if EMULATE:
        return _cvt_emulated(word, scale)
    else:
        out = tl.inline_asm_elementwise(
            "v_cvt_scalef32_pk_fp4_bf16 $0, $1, $2",
            "=v,v,v",
            [word, scale],
            dtype=tl.uint32,
            is_pure=True,
            pack=1,
        )
        return out.to(tl.uint8)  # byte 0: both nibbles with their signs, the stored byte


@triton.jit
def _packed_portable(x, byte, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, CAST: tl.constexpr):
    """Packed e2m1 bytes (BLOCK_M, BLOCK_K/2) by threshold comparisons in fp32.

    The fp32 value is made from the bf16 bits by a shift (exact everywhere), or, with ``CAST``
    (compiled only: see the module docstring), by the compiler's conversion, equally exact on a
    GPU. The scaling is one fp32 multiply by a power of two, exact for every bf16 input and
    byte in [0, 253]. (:func:`_e2m1_code`'s integer exponent arithmetic gives the same codes,
    but costs 12-41% of the GEMM's device time on the H200, where the quantizer is on the
    instruction-bound path.)"""
    # 2**-e from its exponent bits: 127 - e = 254 - byte, exact for every byte in [0, 253]
    inv_scale = ((254 - byte) << 23).to(tl.float32, bitcast=True)
    bits = x.to(tl.uint16, bitcast=True).to(tl.int32)
    xf = x.to(tl.float32) if CAST else (bits << 16).to(tl.float32, bitcast=True)
    q = tl.reshape(xf, (BLOCK_M, BLOCK_K // 32, 32)) * inv_scale[:, :, None]
    code = tl.reshape(_e2m1_rne(tl.abs(q)), (BLOCK_M, BLOCK_K)) | ((bits >> 12) & 0x8)
    lo, hi = tl.split(tl.reshape(code, (BLOCK_M, BLOCK_K // 2, 2)))
    return (lo | (hi << 4)).to(tl.uint8)


@triton.jit
def quantize_tile(
    x,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    QUANT_PATH: tl.constexpr,
    NAN_BLOCK_CODES: tl.constexpr = False,
    CAST_A: tl.constexpr = False,
):
    """bf16 tile (BLOCK_M, BLOCK_K) -> (packed uint8 (BLOCK_M, BLOCK_K/2), scales uint8
    (BLOCK_M, BLOCK_K/32)). ``CAST_A`` picks the portable path's fp32 conversion (compiled
    only; the other paths ignore it).

    The scales are the oracle's in both modes (0xFF for a block holding a NaN). With
    ``NAN_BLOCK_CODES`` the codes are too; without it a NaN block's codes are stand-ins (see
    the module docstring). Blocks without NaN are identical either way.
    """
    amax = block_abs_max(x, BLOCK_M, BLOCK_K)
    if NAN_BLOCK_CODES:
        # The oracle's NaN-block codes: the scale of the finite values (a NaN maximum is
        # replaced by the NaN-free one); the NaN elements are fixed to code 0 below.
        bits = x.to(tl.uint16, bitcast=True).to(tl.int32) & 0x7FFF
        finite = tl.where(bits > _BF16_INF, 0, bits)
        amax_finite = tl.max(tl.reshape(finite, (BLOCK_M, BLOCK_K // 32, 32)), axis=2)
        byte = scale_byte(amax_finite)
    else:
        byte = scale_byte(amax)
    if QUANT_PATH == _GFX950_CVT:
        packed = _packed_gfx950(x, byte, BLOCK_M, BLOCK_K, False)
    elif QUANT_PATH == _GFX950_EMULATED:
        packed = _packed_gfx950(x, byte, BLOCK_M, BLOCK_K, True)
    else:
        packed = _packed_portable(x, byte, BLOCK_M, BLOCK_K, CAST_A)
    if NAN_BLOCK_CODES:
        # NaN elements: magnitude 0, sign kept (the instruction's NaN output is unspecified)
        nan = tl.reshape(bits > _BF16_INF, (BLOCK_M, BLOCK_K // 2, 2))
        sign = tl.reshape((x.to(tl.uint16, bitcast=True) >> 12) & 0x8, (BLOCK_M, BLOCK_K // 2, 2))
        nan_lo, nan_hi = tl.split(nan)
        sign_lo, sign_hi = tl.split(sign)
        p = packed.to(tl.int32)
        lo = tl.where(nan_lo, sign_lo.to(tl.int32), p & 0xF)
        hi = tl.where(nan_hi, sign_hi.to(tl.int32), p >> 4)
        packed = (lo | (hi << 4)).to(tl.uint8)
    # the block's NaN flag, from its maximum: one select per block, none per element
    scales = tl.where(amax > _BF16_INF, 255, byte)
    return packed, scales.to(tl.uint8)


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
    NAN_BLOCK_CODES: tl.constexpr = True,
    CAST_A: tl.constexpr = False,
):
    """Standalone quantize: the ``quantize_tile`` the GEMM runs, exposed for testing.

    ``NAN_BLOCK_CODES=False`` is the GEMM's mode: a NaN block's codes are then stand-ins (its
    tests compare the codes of NaN-free blocks only, and every scale)."""
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
    packed, scales = quantize_tile(x, BLOCK_M, BLOCK_K, QUANT_PATH, NAN_BLOCK_CODES, CAST_A)
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
