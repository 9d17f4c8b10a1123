"""In-kernel MXFP4 quantization, launched on its own: the Triton twin of the oracle.

The GEMM quantizes A inside its main loop with :func:`kernels._quant.quantize_tile`;
:func:`quantize_mxfp4_triton` runs that same ``@triton.jit`` function through a small kernel so
tests can compare it with :func:`kernels.mxfp4.quantize_mxfp4` bit for bit, in the interpreter on
a CPU and compiled on a GPU.

The implementation is chosen by the compile target, never by trial: gfx950 uses its conversion
instruction, every other target (and the interpreter) the portable code. Asking for the gfx950
path anywhere else is an error, not a fallback.
"""

from __future__ import annotations

import torch

from kernels.device import DeviceInfo, check_kernel_device, device_info, interpret_mode

IMPLS = ("gfx950", "portable")


def quant_impl(info: DeviceInfo | None = None) -> str:
    """The quantizer implementation the compile target uses: ``gfx950`` or ``portable``."""
    info = info or device_info()
    return "gfx950" if info.arch == "gfx950" and not interpret_mode() else "portable"


def check_impl(impl: str | None, info: DeviceInfo | None = None) -> str:
    """Validate an explicit implementation request against the target (``None``: the default)."""
    target = quant_impl(info)
    if impl is None:
        return target
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS} or None, got {impl!r}")
    if impl == "gfx950" and target != "gfx950":
        raise ValueError(
            "impl='gfx950' needs an AMD gfx950 GPU (v_cvt_scalef32_pk_fp4_bf16); this target "
            f"is {(info or device_info()).arch!r}"
            + (" under TRITON_INTERPRET=1, which cannot run inline asm" if interpret_mode() else "")
        )
    return impl


def quantize_mxfp4_triton(
    x: torch.Tensor, *, impl: str | None = None, block_m: int = 16, block_k: int = 256
):
    """Quantize bf16 ``x`` (M, K) with the GEMM's in-kernel quantizer; same contract as the oracle."""
    from kernels._quant import quantize_kernel

    if not isinstance(x, torch.Tensor) or x.dtype != torch.bfloat16 or x.dim() != 2:
        raise TypeError(f"x must be a 2-D bfloat16 tensor, got {getattr(x, 'dtype', type(x))}")
    m, k = x.shape
    if k % 64:
        raise ValueError(f"x.shape[1] (K) must be a multiple of 64, got {k}")
    if x.stride(1) != 1:
        raise ValueError(f"x must have unit column stride, got strides {x.stride()}")
    check_kernel_device(x, "x")
    use_asm = check_impl(impl) == "gfx950"
    packed = torch.empty((m, k // 2), dtype=torch.uint8, device=x.device)
    scales = torch.empty((m, k // 32), dtype=torch.uint8, device=x.device)
    if m == 0:
        return packed, scales
    grid = (-(-m // block_m), -(-k // block_k))
    quantize_kernel[grid](
        x, packed, scales, m, k, x.stride(0), packed.stride(0), scales.stride(0),
        BLOCK_M=block_m, BLOCK_K=block_k, USE_ASM=use_asm,
    )  # fmt: skip
    return packed, scales
