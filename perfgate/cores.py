"""The CPU cores this process may use: what the worker counts (xdist's shares, the ISA gate's
compile pool, explain's children) are sized from."""

from __future__ import annotations

import os


def usable() -> int:
    """The cores this process may run on: its affinity mask where the OS has one (a container or
    ``taskset`` may allow fewer than the machine has), else the machine's count, at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
