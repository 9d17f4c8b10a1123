"""The code under test: a fused bf16 -> MXFP4 quantize + FP4 GEMM and everything it is judged by.

Public modules:
- :mod:`kernels.mxfp4` - the MXFP4 format oracle (quantize / dequantize), pure torch.
- :mod:`kernels.layout` - the (16,16) weight shuffle and the E8M0 scale shuffle.
- :mod:`kernels.reference` - task-faithful inputs, the reference GEMM, the leaderboard check.
- :mod:`kernels.gemm` - the Triton kernel's launcher (``gemm_a16wfp4``, ``custom_kernel``).
- :mod:`kernels.configs` - tile configs: tuned table, occupancy model, per-shape cache.
- :mod:`kernels.splitk` - split-K reduction (native reducer or Triton twin).
- :mod:`kernels.device` - device facts from one place.
- :mod:`kernels.interpreter` - Triton's CPU interpreter: on or off, usable or not (no torch).
"""

from __future__ import annotations


def __getattr__(name: str):
    # Lazy: importing kernels must not import triton (TRITON_INTERPRET has to be set first).
    if name in ("gemm_a16wfp4", "custom_kernel"):
        from kernels import gemm

        return getattr(gemm, name)
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")


__all__ = ["custom_kernel", "gemm_a16wfp4"]
