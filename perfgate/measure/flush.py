"""The cache flush every timed round starts with, and how many input copies rotate.

- device mode (and the A/B workers, the tools): :func:`gate_flush`, twice the last-level cache
  (L2, plus the Infinity Cache on MI355X) and a device-side hold (:data:`HOLD_CYCLES`);
- leaderboard mode: :func:`leaderboard_flush`, at least :data:`LEADERBOARD_FLUSH_BYTES`, long
  enough to hide the host path as the task's harness does;
- host mode never flushes (its samples are host time).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def flush_bytes(last_level_cache_bytes: int, factor: int = 2) -> int:
    """Size of the buffer overwritten between rounds: ``factor`` x the last-level cache.

    Twice the cache, because caches are not perfectly LRU: writing exactly the cache size leaves
    lines of the previous round behind (nvbench flushes exactly L2; do_bench writes 256 MB).
    """
    for name, v in (("last_level_cache_bytes", last_level_cache_bytes), ("factor", factor)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if last_level_cache_bytes <= 0:
        raise ValueError(
            f"last_level_cache_bytes must be > 0, got {last_level_cache_bytes} "
            "(the interpreter has no cache to flush; benchmarks need a GPU)"
        )
    if factor < 2:
        raise ValueError(f"factor must be >= 2 so the flush exceeds the cache, got {factor}")
    return factor * last_level_cache_bytes


def rotation_count(set_bytes: int, cache_bytes: int, *, minimum: int = 4, maximum: int = 16) -> int:
    """How many input copies to rotate through: enough to exceed the cache, within limits.

    The flush already makes every round cold; rotation adds distinct addresses (and, in the
    leaderboard mode, distinct data) per call. ``minimum`` keeps several calls per graph replay
    so that event resolution (~0.5 us) is spread over them; ``maximum`` bounds memory and
    capture time for tiny shapes, whose copies could never fill a 256 MB cache.
    """
    for name, v in (("set_bytes", set_bytes), ("cache_bytes", cache_bytes)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
        if v <= 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if not 1 <= minimum <= maximum:
        raise ValueError(f"need 1 <= minimum <= maximum, got minimum={minimum} maximum={maximum}")
    return max(minimum, min(maximum, -(-cache_bytes // set_bytes)))


# GPU cycles the gate's flush holds the device for after its write (torch.cuda._sleep, CUDA and
# ROCm): ~250 us at the H200's 1.98 GHz, ~210 us at the MI355X's 2.4 GHz. The events around a
# timed replay measure from the moment the GPU reaches the start event; if the GPU has already
# finished the flush (2x L2: ~40 us on the H200) before the CPU has queued the start event and
# the graph launch, the GPU idles inside the timed region and the CPU's speed leaks into device
# time. On the lent H200 the guest's CPU speed moves up to 1.8x for seconds at a time (docs/
# views.md), and one worker of an A/B pair ran 2-3% slower for such stretches (docs/
# perfgate-compare.md); a hold far longer than the CPU's submission keeps the queue ahead.
HOLD_CYCLES = 500_000


def gate_flush(last_level_cache_bytes: int, device: Any) -> CacheFlush:
    """The flush every timed round starts with, in the gate and in the tools alike: the cache
    write, then (on a GPU) a device-side hold of :data:`HOLD_CYCLES` so that the timed work is
    queued before the GPU reaches it."""
    import torch

    hold = None
    if torch.device(device).type == "cuda":
        hold = functools.partial(torch.cuda._sleep, HOLD_CYCLES)
    return CacheFlush(flush_bytes(last_level_cache_bytes), device, hold=hold)


# Leaderboard mode's flush. The task's harness fills ~62.5 GiB before each timed call, so the GPU
# is still busy when the host has queued the whole call: its events then measure the call's
# device time (kernels and the gaps between them) and none of the host path. What matters is
# that the flush outlasts the host path by a wide margin, not its size: 2 GiB is ~0.5 ms of GPU
# work on an H200 (~0.4 ms on an MI355X) against a 10-90 us host path, and on the H200 it
# matched the harness's own fill within 1.2% on every ranked shape (0.0-0.6% spread). 2x the
# last-level cache (125 MB on the H200, ~40 us) is shorter than the host path: host latency
# leaked into every sample (0.4-21% spread).
LEADERBOARD_FLUSH_BYTES = 2 << 30


def leaderboard_flush(last_level_cache_bytes: int, device: Any) -> CacheFlush:
    """The flush before each leaderboard-mode call: long enough to hide the host path, and at
    least the gate's cache flush."""
    nbytes = max(LEADERBOARD_FLUSH_BYTES, flush_bytes(last_level_cache_bytes))
    return CacheFlush(nbytes, device)


def for_mode(mode: Any, last_level_cache_bytes: int, device: Any) -> CacheFlush:
    """The flush before each timed round of ``mode`` (a :class:`perfgate.modes.Mode`), by its
    ``flush_kind``."""
    makers = {"gate": gate_flush, "leaderboard": leaderboard_flush}
    try:
        make = makers[mode.flush_kind]
    except KeyError:
        raise ValueError(f"mode {mode.name}: flush_kind must be one of {', '.join(makers)}, got "
                         f"{mode.flush_kind!r}") from None  # fmt: skip
    return make(last_level_cache_bytes, device)


class CacheFlush:
    """Overwrites ``nbytes`` of device memory; called in pytest-benchmark's untimed ``setup``."""

    def __init__(self, nbytes: int, device: Any, *, hold: Callable[[], None] | None = None) -> None:
        import torch

        if nbytes <= 0 or nbytes % 4:
            raise ValueError(f"nbytes must be a positive multiple of 4, got {nbytes}")
        if hold is not None and not callable(hold):
            raise TypeError(f"hold must be callable or None, got {type(hold).__name__}")
        self.nbytes = nbytes
        self.hold = hold
        self._buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self._count = 0

    def __call__(self) -> None:
        # A new value each time: a write the hardware cannot skip as unchanged.
        self._count = (self._count + 1) % (2**31 - 1)
        self._buffer.fill_(self._count)
        if self.hold is not None:
            self.hold()
