"""Triton's CPU interpreter: whether the kernels run in it, and whether this triton's can.

Read without importing torch or triton: a command that only needs to know whether it may run
the kernels here (``perfgate submission test``, ``perfgate isa``) answers at once, and triton's
mode is never fixed before ``TRITON_INTERPRET`` is decided.
"""

from __future__ import annotations

import os


def interpret_mode() -> bool:
    """True when Triton kernels run in the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# The first triton whose interpreter runs the kernels: tl.dot_scaled on CPU tensors (under 3.6
# every kernel call fails there with "only 0-dimensional arrays can be converted to Python
# scalars"). Compiled kernels need no such version: the supported range is 3.5 to 3.9.
INTERPRETER_MIN_TRITON = (3, 8)
# The distributions that install the `triton` module: upstream's, and the ROCm and CUDA builds
# that torch's own wheels depend on.
_TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton-rocm", "pytorch-triton", "triton-rocm")


def triton_version() -> str:
    """The installed triton's version, read from its metadata: importing triton here would fix
    its mode before TRITON_INTERPRET is decided."""
    from importlib import metadata

    for name in _TRITON_DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    import triton

    return triton.__version__


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def interpreter_problem() -> str | None:
    """Why this machine's Triton interpreter cannot run the kernels, or None when it can."""
    version = triton_version()
    if _release(version) >= INTERPRETER_MIN_TRITON:
        return None
    need = ".".join(map(str, INTERPRETER_MIN_TRITON))
    return (
        f"triton {version}'s interpreter cannot run the kernels (tl.dot_scaled on the CPU needs "
        f"triton >= {need}); run on a GPU, or install triton>={need}"
    )
