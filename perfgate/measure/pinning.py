"""One GPU, and one share of the cores, per pytest-xdist worker.

**Cores.** ``share_cores()`` gives each worker ``cores // workers`` threads (``OMP_NUM_THREADS``,
which torch's OpenMP pool reads, and numpy's OpenBLAS where ``OPENBLAS_NUM_THREADS`` is unset).
Left alone, every worker starts one thread per core in both, and OpenBLAS's idle threads spin:
two workers on a 2-core machine ran Triton's interpreter (whose ``tl.dot`` is numpy's) at half
speed each, no faster than one (docs/measurements.md). It must run before numpy or torch is
imported in the worker; the processes a test starts inherit the worker's share.

**GPUs.** ``nox -s test -- -n auto`` on a multi-GPU box.

``pin_xdist_worker()`` must run before anything initialises the GPU runtime in the worker (the
first ``torch.cuda.*`` call: ``is_available()`` and ``device_count()`` included), because CUDA and
HIP read ``*_VISIBLE_DEVICES`` once, at initialisation. It is called at the top of
``tests/conftest.py``.

GPUs are counted without initialising CUDA/HIP in this process, in this order:

1. an existing ``HIP_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` list: the worker gets one of
   its entries, so a restriction made by the user (or by a CI runner) is kept;
2. ``ROCR_VISIBLE_DEVICES``: HIP numbers its devices 0..n-1 inside that set;
3. the AMD KFD topology in sysfs: GPU nodes (``gpu_id`` != 0) whose render node exists under
   ``/dev/dri`` (so a container given only some render nodes counts only those);
4. ``nvidia-smi -L`` (NVML, which also sees only the devices a container was given).

``torch.cuda.device_count()`` is deliberately not used: on CUDA it calls cuInit in the calling
process, after which a changed ``CUDA_VISIBLE_DEVICES`` is ignored.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Callable, MutableMapping
from pathlib import Path

from perfgate.cores import usable

VISIBLE_VARS = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_WORKER_RE = re.compile(r"gw(\d+)")
_RENDER_MINOR_RE = re.compile(r"^drm_render_minor\s+(\d+)\s*$", re.MULTILINE)


def worker_index(worker: str) -> int:
    """``"gw3"`` -> 3: the number pytest-xdist gives its workers in ``PYTEST_XDIST_WORKER``."""
    match = _WORKER_RE.fullmatch(worker)
    if match is None:
        raise ValueError(f"PYTEST_XDIST_WORKER={worker!r}: expected 'gw<N>' (e.g. 'gw0')")
    return int(match.group(1))


def _split_list(value: str) -> list[str]:
    # An empty variable hides every GPU (CUDA and HIP agree on that): zero entries.
    return [item.strip() for item in value.split(",") if item.strip()]


def visible_list(environ: MutableMapping[str, str]) -> list[str] | None:
    """The explicit device list from ``HIP_/CUDA_VISIBLE_DEVICES``, or None if neither is set.

    Both set to different lists is ambiguous (HIP reads both) and is an error.
    """
    present = {name: environ[name] for name in VISIBLE_VARS if name in environ}
    lists = {name: _split_list(value) for name, value in present.items()}
    if len(lists) == 2 and lists["HIP_VISIBLE_DEVICES"] != lists["CUDA_VISIBLE_DEVICES"]:
        raise ValueError(
            "HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES are both set and differ "
            f"({present['HIP_VISIBLE_DEVICES']!r} vs {present['CUDA_VISIBLE_DEVICES']!r}); "
            "set one of them, or both to the same list"
        )
    return next(iter(lists.values()), None)


def amd_gpu_count(root: Path = Path("/")) -> int:
    """GPUs in the KFD topology whose render node is present under ``root/dev/dri``."""
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    if not nodes.is_dir():
        return 0
    count = 0
    for node in nodes.iterdir():
        gpu_id = node / "gpu_id"
        if not gpu_id.is_file() or gpu_id.read_text().strip() in ("", "0"):
            continue  # CPU nodes have gpu_id 0
        props = node / "properties"
        match = _RENDER_MINOR_RE.search(props.read_text()) if props.is_file() else None
        if match and (root / "dev/dri" / f"renderD{match.group(1)}").exists():
            count += 1
    return count


def nvidia_gpu_count(
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> int:
    """GPUs listed by ``nvidia-smi -L``; 0 without nvidia-smi or when it fails.

    A failing nvidia-smi (installed, but no driver reachable) counts as no GPU, with a warning:
    torch will not see a GPU either, and ``PERFGATE_REQUIRE_GPU`` is what turns that into an
    error in a GPU job.
    """
    exe = which("nvidia-smi")
    if exe is None:
        return 0
    proc = run([exe, "-L"], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        warnings.warn(
            f"'nvidia-smi -L' failed with exit code {proc.returncode} "
            f"({proc.stderr.strip() or proc.stdout.strip()}); not pinning xdist workers to GPUs",
            RuntimeWarning,
            stacklevel=2,
        )
        return 0
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))


def pin_xdist_worker(
    environ: MutableMapping[str, str] = os.environ,
    *,
    root: Path = Path("/"),
    nvidia_count: Callable[[], int] = nvidia_gpu_count,
) -> str | None:
    """Give this pytest-xdist worker one GPU (worker N gets GPU N mod count).

    Sets ``HIP_VISIBLE_DEVICES`` and ``CUDA_VISIBLE_DEVICES`` to the same single entry and returns
    it. Returns None (and changes nothing) outside xdist or on a machine without a GPU. Idempotent:
    a second call sees a one-entry list and keeps it.
    """
    worker = environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return None
    index = worker_index(worker)
    devices = visible_list(environ)
    if devices is None:
        rocr = environ.get("ROCR_VISIBLE_DEVICES")
        if rocr is not None:
            count = len(_split_list(rocr))
        else:
            count = amd_gpu_count(root) or nvidia_count()
        devices = [str(i) for i in range(count)]
    if not devices:
        return None
    chosen = devices[index % len(devices)]
    for name in VISIBLE_VARS:
        environ[name] = chosen
    return chosen


def share_cores(
    environ: MutableMapping[str, str] = os.environ, *, cores: Callable[[], int] = usable
) -> int | None:
    """Set ``OMP_NUM_THREADS`` to this pytest-xdist worker's share of the cores (at least one)
    and return it. None, changing nothing, outside xdist or where the user set the thread count
    already (``OMP_NUM_THREADS`` or ``OPENBLAS_NUM_THREADS``): theirs is kept."""
    count = environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not environ.get("PYTEST_XDIST_WORKER") or not count:
        return None
    if any(name in environ for name in THREAD_VARS):
        return None
    try:
        workers = int(count)
    except ValueError:
        raise ValueError(
            f"PYTEST_XDIST_WORKER_COUNT={count!r}: expected a positive integer"
        ) from None
    threads = max(1, cores() // max(1, workers))
    environ["OMP_NUM_THREADS"] = str(threads)
    return threads
