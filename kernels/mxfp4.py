"""The MXFP4 format oracle: quantize and dequantize, pure torch, bit-exact, CPU or GPU.

Quantization follows aiter's corrected ``dynamic_mxfp4_quant`` (torchao's EVEN mode), per row and
per block of 32 consecutive K elements, in fp32:

1. ``amax = max |x|`` over the block.
2. ``bits = (float_bits(amax) + 0x200000) & 0xFF800000`` rounds amax to a power of two (up when
   the mantissa fraction is >= 0.75).
3. ``e = exponent_field(bits) - 127 - 2`` clamped to [-127, 127]; the E8M0 byte is ``e + 127``.
4. ``q = x * 2**-e`` (exact: a power-of-two scaling), ``|q|`` rounded to the e2m1 grid
   {0, .5, 1, 1.5, 2, 3, 4, 6} with round-to-nearest-even, saturating at 6 (+inf included).
5. The sign goes to bit 3 (``-0`` keeps it); element ``2j`` is the low nibble of byte ``j``.

Non-finite inputs (the project's definition; upstream leaves NaN unspecified):

- ``+-inf`` follows the rule literally: it rounds amax to exponent field 255, so ``e = 126``
  (byte 253), the infinity saturates to code ``+-6`` and the block's finite values round
  against that huge scale (to 0 unless they are within a few binades of 2**126).
- A block that contains a NaN gets the E8M0 NaN byte ``0xFF``, so every element of the block
  dequantizes to NaN and NaN propagates through a GEMM instead of vanishing. Its element codes
  are computed against the block's finite values, as if the NaN elements were absent; a NaN
  element itself gets magnitude code 0 with the NaN's sign bit.

Dequantization is exact: ``value(code) * 2**(byte - 127)`` computed in float64 and rounded once to
``dtype`` (so fp32 overflows to inf for the largest scales, as IEEE says); byte 255 is NaN.
"""

from __future__ import annotations

import torch

BLOCK = 32  # elements per E8M0 scale
E8M0_BIAS = 127
E8M0_NAN = 0xFF
SIGN_BIT = 0x8

# e2m1 code -> magnitude, for codes 0..7 (bit 3 is the sign)
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

# Round-to-nearest-even on the e2m1 grid as thresholds on |q|: the magnitude code is the number of
# thresholds passed. At a tie the even code wins, so ties going up use ">=" and ties going down
# use ">": 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4.
_UP_AT_TIE = (0.75, 1.75, 3.5)  # |q| >= t rounds up
_DOWN_AT_TIE = (0.25, 1.25, 2.5, 5.0)  # |q| > t rounds up


def _check_blocked(x: torch.Tensor, name: str) -> None:
    if x.dim() < 1:
        raise ValueError(f"{name} must have at least one dimension (..., K), got a scalar")
    if x.shape[-1] % BLOCK:
        raise ValueError(f"{name}.shape[-1] (K) must be a multiple of {BLOCK}, got {x.shape[-1]}")


def e8m0_scale_exponent(amax: torch.Tensor) -> torch.Tensor:
    """Unbiased scale exponent ``e`` (int32) for fp32 block maxima ``amax`` (steps 2-3)."""
    bits = amax.to(torch.float32).view(torch.int32)
    rounded = (bits + 0x200000) & 0x7F800000  # amax >= 0, so the sign bit is clear
    exponent_field = rounded >> 23
    return (exponent_field - E8M0_BIAS - 2).clamp(-127, 127)


def e2m1_magnitude_code(q_abs: torch.Tensor) -> torch.Tensor:
    """e2m1 magnitude code (0..7, uint8) of ``|q|`` with RNE and saturation (NaN gives 0)."""
    code = torch.zeros(q_abs.shape, dtype=torch.uint8, device=q_abs.device)
    for t in _UP_AT_TIE:
        code += (q_abs >= t).to(torch.uint8)
    for t in _DOWN_AT_TIE:
        code += (q_abs > t).to(torch.uint8)
    return code


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize bf16/fp32 ``x`` (..., K) to ``(packed uint8 (..., K/2), scales uint8 (..., K/32))``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in (torch.bfloat16, torch.float32):
        raise TypeError(f"x must be bfloat16 or float32, got {x.dtype}")
    _check_blocked(x, "x")
    lead, k = x.shape[:-1], x.shape[-1]
    blocks = x.to(torch.float32).reshape(*lead, k // BLOCK, BLOCK)

    nan = torch.isnan(blocks)
    amax = torch.where(nan, 0.0, blocks.abs()).amax(dim=-1, keepdim=True)
    e = e8m0_scale_exponent(amax)
    q = blocks * torch.exp2(-e.to(torch.float32))
    code = e2m1_magnitude_code(q.abs())
    code |= torch.signbit(blocks).to(torch.uint8) << 3  # -0 and negative NaN keep their sign

    scales = (e + E8M0_BIAS).to(torch.uint8)
    scales = torch.where(nan.any(dim=-1, keepdim=True), E8M0_NAN, scales)
    code = code.reshape(*lead, k // 2, 2)
    packed = code[..., 0] | (code[..., 1] << 4)
    return packed.contiguous(), scales.reshape(*lead, k // BLOCK).contiguous()


def unpack_codes(packed: torch.Tensor) -> torch.Tensor:
    """Split packed fp4x2 bytes (..., K/2) into nibble codes (..., K): low nibble first."""
    return torch.stack((packed & 0xF, packed >> 4), dim=-1).flatten(-2)


def e2m1_to_float(codes: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Exact values of e2m1 codes (0..15)."""
    table = torch.tensor(E2M1_VALUES + tuple(-v for v in E2M1_VALUES), dtype=dtype)
    return table.to(codes.device)[codes.long()]


def e8m0_to_float(scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Exact values ``2**(byte - 127)`` of E8M0 bytes, NaN for 0xFF, rounded once to ``dtype``."""
    exact = torch.exp2(scales.to(torch.float64) - E8M0_BIAS)
    exact = torch.where(scales == E8M0_NAN, float("nan"), exact)
    return exact.to(dtype)


def as_uint8(t: torch.Tensor, name: str) -> torch.Tensor:
    """View packed fp4x2 / E8M0 tensors as uint8 (torch's float4/float8 dtypes are views)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype == torch.uint8:
        return t
    if t.dtype in _BYTE_VIEW_DTYPES:
        return t.view(torch.uint8)
    expected = ", ".join(str(d) for d in (torch.uint8, *_BYTE_VIEW_DTYPES))
    raise TypeError(f"{name} must have dtype {expected}; got {t.dtype}")


# torch's byte-sized views of packed fp4 and E8M0 (every supported torch, 2.10+, has both)
_BYTE_VIEW_DTYPES = (torch.float4_e2m1fn_x2, torch.float8_e8m0fnu)


def dequantize_mxfp4(
    packed: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Dequantize ``packed`` (..., K/2) with ``scales`` (..., K/32) to ``dtype`` (..., K)."""
    packed = as_uint8(packed, "packed")
    scales = as_uint8(scales, "scales")
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype, got {dtype}")
    if packed.dim() < 1 or scales.dim() < 1:
        raise ValueError("packed and scales must have at least one dimension")
    k = packed.shape[-1] * 2
    if k % BLOCK or scales.shape != (*packed.shape[:-1], k // BLOCK):
        raise ValueError(
            f"scales must have shape {(*packed.shape[:-1], k // BLOCK)} for packed of shape "
            f"{tuple(packed.shape)} (one scale per {BLOCK} elements, K a multiple of {BLOCK}); "
            f"got {tuple(scales.shape)}"
        )
    if packed.device != scales.device:
        raise ValueError(f"packed is on {packed.device} but scales is on {scales.device}")
    values = e2m1_to_float(unpack_codes(packed), torch.float64)
    factor = e8m0_to_float(scales, torch.float64).repeat_interleave(BLOCK, dim=-1)
    return (values * factor).to(dtype)
