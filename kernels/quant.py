"""In-kernel MXFP4 quantization, launched on its own: the Triton twin of the oracle.

The GEMM quantizes A inside its main loop with :func:`kernels._quant.quantize_tile`;
:func:`quantize_mxfp4_triton` runs that same ``@triton.jit`` function through a small kernel so
tests can compare it with :func:`kernels.mxfp4.quantize_mxfp4` bit for bit, in the interpreter on
a CPU and compiled on a GPU.

The implementation is chosen by the compile target, never by trial
(:func:`kernels.targets.quant_path_for`): gfx950 uses its conversion instruction, every other
target (and the interpreter) the portable code. Asking for the gfx950 path anywhere else is an
error, not a fallback.
"""

from __future__ import annotations

import torch

from kernels.device import DeviceInfo, check_kernel_device, device_info
from kernels.interpreter import interpret_mode
from kernels.targets import QuantPath, quant_path_for


def quant_impl(info: DeviceInfo | None = None) -> QuantPath:
    """The quantizer path of the device the kernels run on (the interpreter: portable)."""
    return quant_path_for((info or device_info()).arch, interpreted=interpret_mode())


def check_impl(impl: QuantPath | None, info: DeviceInfo | None = None) -> QuantPath:
    """Validate an explicit path request against the device (``None``: the device's path).

    The portable path and the emulation of the gfx950 instruction (plain ``tl``) run everywhere;
    the inline-asm path only where it is the device's own."""
    own = quant_impl(info)
    if impl is None:
        return own
    if not isinstance(impl, QuantPath):
        raise ValueError(f"impl must be a kernels.targets.QuantPath or None, got {impl!r}")
    anywhere = (QuantPath.PORTABLE, QuantPath.GFX950_EMULATED)
    if impl not in anywhere and impl is not own:
        raise ValueError(
            f"impl={impl.name} cannot run on this device ({(info or device_info()).arch!r}, "
            f"whose path is {own.name})"
            + (": TRITON_INTERPRET=1 cannot run inline asm" if interpret_mode() else "")
        )
    return impl


def quantize_mxfp4_triton(
    x: torch.Tensor,
    *,
    impl: QuantPath | None = None,
    block_m: int = 16,
    block_k: int = 256,
    nan_block_codes: bool = True,
    widen: str = "shift",
):
    """Quantize bf16 ``x`` (M, K) with the GEMM's in-kernel quantizer; same contract as the oracle.

    ``nan_block_codes=False`` runs the GEMM's own mode, in which a block holding a NaN gets a
    finite stand-in scale and codes (the GEMM poisons the row instead): only blocks without NaN
    then match the oracle (:mod:`kernels._quant`). ``widen`` is the portable path's fp32
    conversion of a GEMM config (:attr:`kernels.gemm_config.GemmConfig.quant_widen`):
    ``"cast"`` is exact compiled; in the interpreter it misconverts bf16 subnormals (Triton's
    bug; the GEMM never casts there), which only the tests that pin that bug ask for."""
    from kernels._quant import quantize_kernel
    from kernels.gemm_config import QUANT_WIDENINGS

    if not isinstance(x, torch.Tensor) or x.dtype != torch.bfloat16 or x.dim() != 2:
        raise TypeError(f"x must be a 2-D bfloat16 tensor, got {getattr(x, 'dtype', type(x))}")
    m, k = x.shape
    if k % 64:
        raise ValueError(f"x.shape[1] (K) must be a multiple of 64, got {k}")
    if x.stride(1) != 1:
        raise ValueError(f"x must have unit column stride, got strides {x.stride()}")
    if widen not in QUANT_WIDENINGS:
        raise ValueError(f"widen must be one of {', '.join(QUANT_WIDENINGS)}, got {widen!r}")
    check_kernel_device(x, "x")
    path = check_impl(impl)
    packed = torch.empty((m, k // 2), dtype=torch.uint8, device=x.device)
    scales = torch.empty((m, k // 32), dtype=torch.uint8, device=x.device)
    if m == 0:
        return packed, scales
    grid = (-(-m // block_m), -(-k // block_k))
    quantize_kernel[grid](
        x, packed, scales, m, k, x.stride(0), packed.stride(0), scales.stride(0),
        BLOCK_M=block_m, BLOCK_K=block_k, QUANT_PATH=int(path),
        NAN_BLOCK_CODES=bool(nan_block_codes), CAST_A=widen == "cast",
    )  # fmt: skip
    return packed, scales
