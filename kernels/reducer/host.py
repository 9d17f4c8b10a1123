"""A host (CPU) build of ``splitk_reduce.cu``: the native reducer's own kernels and C launcher,
compiled by a plain C++ compiler with ``host_grid.h`` standing in for the GPU runtime.

It exists so that the CPU test suite runs the native reducer's arithmetic (fp32 sum in split
order, integer bf16 RNE, NaN handling) and its path choice (16-byte vs scalar, each specialised S,
the generic loop) bit for bit; a GPU runs the same source through nvcc/hipcc. Not used by
:func:`kernels.splitk.reduce_partials`: it is a test instrument, about a million times slower than
the GPU.

Compiler: ``$CXX``, else ``c++``/``g++``/``clang++`` on PATH, else the clang of the ``ziglang``
wheel (the suite's ``isa`` extra). ``-ffp-contract=off`` keeps the host from fusing anything; the
kernels only add, so FMA could not apply anyway.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from kernels.reducer.cache import SOURCE_DIR, sources_digest
from kernels.reducer.native import NativeReducer

SOURCE = SOURCE_DIR / "splitk_reduce.cu"
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing")


class HostBuildError(RuntimeError):
    """No host C++ compiler, or the host build failed; the message says which."""


def host_compiler() -> list[str]:
    """The command prefix of the host C++ compiler; HostBuildError naming where it looked."""
    explicit = os.environ.get("CXX")
    if explicit:
        return shlex.split(explicit)
    for name in ("c++", "g++", "clang++"):
        path = shutil.which(name)
        if path:
            return [path]
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "c++"]
    raise HostBuildError(
        "no host C++ compiler: set CXX, install c++/g++/clang++, "
        "or pip install 'ziglang>=0.17,<0.18' (the suite's `isa` extra)"
    )


def host_command(output: Path, compiler: list[str] | None = None) -> list[str]:
    """One compiler call: the .cu as C++ with MXFP4_HOST_GRID, straight to a shared library."""
    cmd = compiler if compiler is not None else host_compiler()
    return [*cmd, *FLAGS, "-DMXFP4_HOST_GRID", "-x", "c++", str(SOURCE), "-o", str(output)]


def build_host(directory: Path) -> Path:
    """Compile the host library into ``directory`` (named by the source digest); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / f"libmxfp4_splitk_host-{sources_digest()[:16]}.so"
    if library.is_file():
        return library
    cmd = host_command(library)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HostBuildError(
            f"host build failed ({shlex.join(cmd)}):\n{proc.stderr.strip() or proc.stdout.strip()}"
        )
    return library


def load_host(directory: Path) -> NativeReducer:
    """The host library behind the native reducer's ctypes interface (pointers are CPU memory,
    the stream argument is ignored)."""
    return NativeReducer(build_host(directory))
