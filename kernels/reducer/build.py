"""Ahead-of-time build of the native split-K reducer: ``python -m kernels.reducer.build``.

Run by ``nox -s build``. Compiles ``splitk_reduce.cu`` with one compiler command (nvcc for NVIDIA,
hipcc for ROCm) into a shared library with a C ABI, under ``<cache>/reducer/<key>/`` (see
:mod:`kernels.reducer.cache`), and records it in ``manifest-<arch>.json`` for the loader.

- Architectures: ``--arch`` (e.g. ``sm90``, ``gfx950``, or ``"gfx950;gfx942"``); otherwise
  ``PYTORCH_ROCM_ARCH`` (default ``gfx950``) under ROCm torch, the local GPU's under CUDA torch.
- The key hashes the sources, the compiler's path and ``--version``, the architectures, the
  compile flags and the torch version: a build is redone only when one of them changed
  (``--force`` rebuilds anyway).
- Concurrent builds serialise on an ``fcntl`` lock, which the kernel drops when its holder dies:
  a killed build can never leave a lock that hangs the next one, and its half-written output
  (a ``.tmp-*`` directory) is removed by the next build.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernels.reducer.cache import (
    LIBRARY_NAME,
    MANIFEST_SCHEMA,
    SOURCE_DIR,
    manifest_path,
    reducer_dir,
    sources_digest,
    write_json_atomic,
)
from kernels.targets import default_for, get_target

SOURCE = SOURCE_DIR / "splitk_reduce.cu"
# Where each vendor's toolkit lives when no environment variable says otherwise.
DEFAULT_PREFIX = {"nvidia": Path("/usr/local/cuda"), "amd": Path("/opt/rocm")}
_ARCH_PATTERN = {"nvidia": re.compile(r"^sm\d{2,3}a?$"), "amd": re.compile(r"^gfx[0-9a-f]{3,4}$")}


class BuildError(RuntimeError):
    """The build cannot run or failed; the message names what is missing or what went wrong."""


@dataclass(frozen=True)
class Toolchain:
    vendor: str  # "nvidia" or "amd"
    compiler: Path
    version: str  # the compiler's --version output


# ---- toolchain and architectures -------------------------------------------------------------


def vendor_of(arch: str) -> str:
    for vendor, pattern in _ARCH_PATTERN.items():
        if pattern.match(arch):
            return vendor
    raise BuildError(f"unknown architecture {arch!r}: expected e.g. 'sm90' or 'gfx950'")


def torch_vendor() -> str:
    """The vendor this torch is built for."""
    import torch

    if torch.version.hip:
        return "amd"
    if torch.version.cuda:
        return "nvidia"
    raise BuildError(
        f"torch {torch.__version__} is built for neither CUDA nor ROCm, so no architecture can be "
        "chosen for the native reducer; pass --arch sm90 or --arch gfx950 to build anyway"
    )


def _compiler_candidates(vendor: str) -> list[tuple[str, Path | None]]:
    """(description, path) in search order; path is None where the variable is unset."""
    if vendor == "nvidia":
        env_vars, name = ("CUDA_HOME", "CUDA_PATH"), "nvcc"
    else:
        env_vars, name = ("ROCM_PATH", "HIP_PATH"), "hipcc"
    default = DEFAULT_PREFIX[vendor]
    found: list[tuple[str, Path | None]] = []
    for var in env_vars:
        value = os.environ.get(var)
        found.append((f"${var}/bin", Path(value) / "bin" / name if value else None))
    found.append((str(default / "bin"), default / "bin" / name))
    on_path = shutil.which(name)
    found.append(("PATH", Path(on_path) if on_path else None))
    return found


def _compiler_env(vendor: str) -> dict[str, str] | None:
    # A hipcc that also sees nvcc (HIP_PLATFORM unset) would compile for NVIDIA.
    return {**os.environ, "HIP_PLATFORM": "amd"} if vendor == "amd" else None


def find_toolchain(vendor: str) -> Toolchain:
    """The compiler for ``vendor`` and its version; BuildError naming what is missing."""
    name = "nvcc" if vendor == "nvidia" else "hipcc"
    candidates = _compiler_candidates(vendor)
    for _, path in candidates:
        if path is not None and path.is_file() and os.access(path, os.X_OK):
            try:
                proc = subprocess.run(
                    [str(path), "--version"],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env=_compiler_env(vendor),
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise BuildError(f"{path} --version failed: {exc}") from None
            if proc.returncode != 0:
                raise BuildError(
                    f"{path} --version exited {proc.returncode}: {proc.stderr.strip()}"
                )
            return Toolchain(vendor, path, proc.stdout.strip())
    looked = ", ".join(
        desc + (" (not found)" if desc == "PATH" else " (unset)" if path is None else "")
        for desc, path in candidates
    )
    hint = (
        "install the CUDA toolkit or set CUDA_HOME"
        if vendor == "nvidia"
        else "install ROCm's HIP SDK or set ROCM_PATH"
    )
    raise BuildError(f"{name} not found (looked in {looked}); {hint}")


def parse_archs(spec: str) -> tuple[str, ...]:
    archs = tuple(a.strip() for a in re.split(r"[;,\s]+", spec) if a.strip())
    if not archs:
        raise BuildError(f"no architecture in {spec!r}")
    vendors = {vendor_of(a) for a in archs}
    if len(vendors) > 1:
        raise BuildError(f"architectures {archs} mix NVIDIA and AMD; build them separately")
    return archs


def default_archs(vendor: str) -> tuple[str, ...]:
    """``PYTORCH_ROCM_ARCH`` (else gfx950) on AMD, the local GPU's architecture on NVIDIA."""
    if vendor == "amd":
        return parse_archs(os.environ.get("PYTORCH_ROCM_ARCH") or default_for("amd").name)
    from kernels.device import device_info, gpu_available

    if not gpu_available():
        raise BuildError("no NVIDIA GPU is visible to detect its architecture; pass --arch sm90")
    return (device_info().arch,)


# ---- compile command and key -----------------------------------------------------------------


def compile_command(tc: Toolchain, archs: tuple[str, ...], output: Path) -> list[str]:
    """One compiler call: the .cu (device code + C launcher) straight to a shared library."""
    cmd = [str(tc.compiler), "-O3", "-std=c++17", "-shared"]
    if tc.vendor == "nvidia":
        cmd += ["-Xcompiler", "-fPIC"]
        for arch in archs:
            num = arch[2:]  # "90" or "90a"
            cmd.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        cmd.append(str(SOURCE))
    else:
        cmd += ["-fPIC", *(f"--offload-arch={arch}" for arch in archs), "-x", "hip", str(SOURCE)]
    return [*cmd, "-o", str(output)]


def build_key(digest: str, tc: Toolchain, archs: tuple[str, ...], torch_version: str) -> str:
    """Hash of everything that shapes the library; a change in any part means a rebuild."""
    flags = compile_command(tc, archs, Path("OUT"))
    parts = {
        "schema": MANIFEST_SCHEMA,
        "sources": digest,
        "compiler": str(tc.compiler),
        "compiler_version": tc.version,
        "archs": list(archs),
        "flags": [f for f in flags if f not in (str(tc.compiler), str(SOURCE))],
        "torch": torch_version,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


# ---- lock --------------------------------------------------------------------------------------


@contextlib.contextmanager
def build_lock(path: Path, timeout_s: float = 600.0, poll_s: float = 0.1) -> Iterator[None]:
    """Exclusive ``flock`` on ``path``, waiting up to ``timeout_s`` for a live holder.

    The kernel releases an flock when its holder exits for any reason (SIGKILL included), so a
    lock file left behind by a killed build is just a file, never a held lock. The holder's pid
    is written into the file only to name it in the timeout message.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with open(path, "a+") as f:
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    f.seek(0)
                    holder = f.read().strip() or "unknown"
                    raise BuildError(
                        f"another build (pid {holder}) has held {path} for over {timeout_s:.0f} s; "
                        "wait for it or end that process"
                    ) from None
                time.sleep(poll_s)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


# ---- build -------------------------------------------------------------------------------------


def _remove_partial_builds(directory: Path) -> None:
    """Leftovers of killed builds (only called while holding the lock, so none is in progress)."""
    for leftover in directory.glob(".tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def build(
    archs: tuple[str, ...] | None = None,
    *,
    force: bool = False,
    directory: Path | None = None,
    lock_timeout_s: float = 600.0,
    log=print,
) -> Path:
    """Build (or find up to date) the library for ``archs``; returns its path."""
    import torch

    archs = archs or default_archs(torch_vendor())
    vendor = vendor_of(archs[0])
    tc = find_toolchain(vendor)
    directory = directory if directory is not None else reducer_dir()
    digest = sources_digest()
    key = build_key(digest, tc, archs, torch.__version__)
    final = directory / key
    library = final / LIBRARY_NAME
    with build_lock(directory / "build.lock", timeout_s=lock_timeout_s):
        _remove_partial_builds(directory)
        if library.is_file() and not force:
            log(f"native reducer up to date for {','.join(archs)}: {library}")
        else:
            staging = Path(tempfile.mkdtemp(dir=directory, prefix=".tmp-"))
            cmd = compile_command(tc, archs, staging / LIBRARY_NAME)
            log("building native reducer: " + " ".join(cmd))
            proc = subprocess.run(cmd, capture_output=True, text=True, env=_compiler_env(vendor))
            if proc.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise BuildError(
                    f"{tc.compiler.name} exited {proc.returncode}:\n{proc.stderr.strip() or proc.stdout.strip()}"
                )
            if final.exists():
                shutil.rmtree(final)
            os.replace(staging, final)
            log(f"built {library}")
        for arch in archs:
            write_json_atomic(
                manifest_path(directory, arch),
                {
                    "schema": MANIFEST_SCHEMA,
                    "key": key,
                    "library": str(library),
                    "archs": list(archs),
                    "sources_digest": digest,
                    "compiler": str(tc.compiler),
                    "compiler_version": tc.version.splitlines()[-1] if tc.version else "",
                    "torch": torch.__version__,
                },
            )
    return library


# ---- device assembly for the static ISA gate ---------------------------------------------------


def device_asm(target: str = "gfx950") -> str:
    """Assembly text of the reducer's device code for ``target``, without a GPU or ROCm.

    AMD targets: AMDGPU assembly from the clang inside the ``ziglang`` wheel (the ``isa`` extra),
    with ``bare_amdgcn.h`` standing in for the HIP runtime headers. NVIDIA targets: PTX from
    nvcc. ``target`` is a name in :data:`kernels.targets.TARGETS`.
    """
    tgt = get_target(target)
    if tgt.is_amd:
        if importlib.util.find_spec("ziglang") is None:
            raise BuildError(
                f"device_asm({target!r}) needs the ziglang package for its clang: "
                "pip install 'ziglang>=0.17,<0.18' (the suite's `isa` extra)"
            )
        cmd = [sys.executable, "-m", "ziglang", "clang", "-x", "hip", f"--offload-arch={tgt.arch}"]
        cmd += ["--cuda-device-only", "-nogpulib", "-nogpuinc", "-DMXFP4_BARE_DEVICE", "-S"]
    else:
        cmd = [str(find_toolchain("nvidia").compiler), "--ptx", f"-arch=sm_{tgt.arch}"]
    cmd += ["-O3", "-std=c++17", "-o", "-", str(SOURCE)]
    proc = subprocess.run([c for c in cmd if c], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(
            f"device compile for {target} failed ({' '.join(cmd)}):\n{proc.stderr.strip()}"
        )
    return proc.stdout


# ---- command line ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kernels.reducer.build", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--arch", help="target architectures, e.g. sm90 or 'gfx950;gfx942' (default: see above)"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    parser.add_argument(
        "--cache-dir", type=Path, help="reducer cache directory (default: <cache>/reducer)"
    )
    parser.add_argument(
        "--lock-timeout", type=float, default=600.0, help="seconds to wait for a live build"
    )
    args = parser.parse_args(argv)
    try:
        build(
            parse_archs(args.arch) if args.arch else None,
            force=args.force,
            directory=args.cache_dir,
            lock_timeout_s=args.lock_timeout,
        )
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
