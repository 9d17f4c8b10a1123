"""Find and load a prebuilt native reducer. Never compiles: building is ``nox -s build``.

The library is a plain shared object with a C ABI, called through ctypes (see docs/reducer.md
for why not a torch extension). A build is used only when its manifest names this device's
architecture and its source digest matches the sources in this checkout; anything else is
reported as "not available" with the reason, so that a stale build is never run silently.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from pathlib import Path

from kernels.reducer.cache import read_manifest, reducer_dir, sources_digest

ABI_VERSION = 2
# Split counts with a compile-time kernel in splitk_reduce.cu (every other S takes its generic
# loop); tests/test_derived.py keeps this equal to the source and to the shipped configs.
SPECIALISED_SPLITS: tuple[int, ...] = (2, 3, 4, 7, 8, 14, 16)


class NativeUnavailable(RuntimeError):
    """No usable native reducer for this device; the message says why."""


class _Plan(ctypes.Structure):
    """``struct mxfp4_splitk_plan`` of splitk_reduce.cu, field for field."""

    _fields_ = [
        ("partials", ctypes.c_void_p),
        ("m", ctypes.c_longlong),
        ("n", ctypes.c_longlong),
        ("ldo", ctypes.c_longlong),
        ("stream", ctypes.c_void_p),
        ("s", ctypes.c_int),
    ]


class NativeReducer:
    """The loaded library: ``reducer(partials_ptr, out_ptr, s, m, n, ldo, stream)``, or
    ``reducer.plan(...)`` for a launch whose only per-call argument is the output."""

    def __init__(self, path: Path):
        self.path = path
        lib = ctypes.CDLL(str(path))
        lib.mxfp4_splitk_abi_version.restype = ctypes.c_int
        abi = lib.mxfp4_splitk_abi_version()
        if abi != ABI_VERSION:
            raise NativeUnavailable(f"{path} has ABI {abi}, this checkout expects {ABI_VERSION}")
        lib.mxfp4_splitk_error_string.restype = ctypes.c_char_p
        lib.mxfp4_splitk_error_string.argtypes = [ctypes.c_int]
        fn = lib.mxfp4_splitk_reduce
        fn.restype = ctypes.c_int
        fn.argtypes = [
            ctypes.c_void_p,  # partials
            ctypes.c_void_p,  # out
            ctypes.c_int,  # S
            ctypes.c_longlong,  # M
            ctypes.c_longlong,  # N
            ctypes.c_longlong,  # out row stride
            ctypes.c_void_p,  # stream
        ]
        planned = lib.mxfp4_splitk_reduce_planned
        planned.restype = ctypes.c_int
        planned.argtypes = [ctypes.POINTER(_Plan), ctypes.c_void_p]
        self._lib = lib
        self._fn = fn
        self._planned = planned

    def __call__(
        self, partials_ptr: int, out_ptr: int, s: int, m: int, n: int, ldo: int, stream: int
    ):
        self.check(self._fn(partials_ptr, out_ptr, s, m, n, ldo, stream))

    def plan(
        self, partials_ptr: int, s: int, m: int, n: int, ldo: int, stream: int
    ) -> Callable[[int], int]:
        """``launch(out_ptr) -> code``: this reduction with everything but the output fixed.

        A C-level partial over the library function, so a call costs ctypes two argument
        conversions and no Python frame (the GEMM launcher's hot path); the caller passes a
        nonzero code to :meth:`check`. The plan holds ``partials_ptr``, not its tensor: the
        caller keeps the partials alive as long as the plan."""
        fixed = _Plan(partials_ptr, m, n, ldo, stream, s)
        return functools.partial(self._planned, ctypes.byref(fixed))  # byref keeps `fixed`

    def check(self, rc: int) -> None:
        """RuntimeError with the library's reason for a nonzero launch code."""
        if rc != 0:
            reason = self._lib.mxfp4_splitk_error_string(rc).decode(errors="replace")
            raise RuntimeError(f"native split-K reducer failed (code {rc}): {reason}")


def locate(arch: str, directory: Path | None = None) -> Path:
    """Path of the prebuilt library for ``arch``; raises NativeUnavailable with the reason."""
    directory = directory if directory is not None else reducer_dir()
    try:
        manifest = read_manifest(directory, arch)
    except (FileNotFoundError, ValueError) as exc:
        raise NativeUnavailable(str(exc)) from None
    if arch not in manifest["archs"]:
        raise NativeUnavailable(f"the build in {directory} is for {manifest['archs']}, not {arch}")
    if manifest["sources_digest"] != sources_digest():
        raise NativeUnavailable(
            f"the build in {directory} was made from other sources than this checkout's (stale)"
        )
    path = Path(manifest["library"])
    if not path.is_file():
        raise NativeUnavailable(f"the manifest names {path}, which does not exist")
    return path


def load(arch: str, directory: Path | None = None) -> NativeReducer:
    """Load the prebuilt library for ``arch``; raises NativeUnavailable with the reason."""
    path = locate(arch, directory)
    try:
        return NativeReducer(path)
    except OSError as exc:
        raise NativeUnavailable(f"cannot load {path}: {exc}") from None
