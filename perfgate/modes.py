"""The timing modes, defined once: what one benchmark sample means and how a case is timed.

A mode names a results file (``.perfgate/results/<mode>.json``), a baseline
(``perf_baselines/<device>/<mode>.json``) and the ``machine_info["perfgate"]["mode"]`` a file
records; two files of different modes are never compared. A mode with ``groups`` times only those
benchmark groups (``host``: the host path), and the other modes never time them.

Each mode is an object that names its flush (``flush_kind``, made by
:func:`perfgate.measure.flush.for_mode`) and knows how it times a prepared case (:meth:`Mode.time`,
called by the plugin's harness). It imports nothing: every floor of perfgate may read it. Adding a mode is one class and one entry in
:data:`MODES` here (``ab=True`` puts it on the A/B path too: ab, experiment, bisect, triage and
their ``[tool.perfgate.ab_<mode>]`` section), and its rounds in ``[tool.perfgate.rounds]`` (pyproject.toml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mode:
    name: str
    description: str  # one line, for --help and reports
    # benchmark groups only this mode times; empty: every group that no mode claims
    groups: tuple[str, ...] = ()
    # the flush before each timed round: "gate" (the cache flush and a device hold) or
    # "leaderboard" (one long enough to hide the host path); perfgate.measure.flush.for_mode
    flush_kind: str = "gate"
    # perfgate ab (and experiment, bisect, triage) measures this mode, judged with
    # [tool.perfgate.ab_<name>]
    ab: bool = False
    # the A/B worker times the whole custom_kernel call (its host path too), not the kernels
    whole_call: bool = False

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"mode name must be a plain identifier, got {self.name!r}")

    def time(self, harness: Any, benchmark: Any, work: Any) -> None:
        """Time the prepared case ``work`` (perfgate.measure.harness.Work) under ``benchmark``."""
        raise NotImplementedError(f"mode {self.name} does not time {type(work).__name__}")


class Device(Mode):
    """All copies in one graph replay; a sample is per-call device time."""

    def time(self, harness: Any, benchmark: Any, work: Any) -> None:
        harness.batched(benchmark, work)


class Leaderboard(Mode):
    """Events around one call after a flush that outlasts the host path; inputs rotate."""

    def time(self, harness: Any, benchmark: Any, work: Any) -> None:
        harness.per_call(benchmark, work)


class Host(Mode):
    """Host time per ``custom_kernel`` call over a reference path (perfgate.measure.host_timer)."""

    def time(self, harness: Any, benchmark: Any, work: Any) -> None:
        harness.host_time(benchmark, work)


MODES: tuple[Mode, ...] = (
    Device("device", "kernel time: graph replay over rotated input copies", ab=True),
    Leaderboard(
        "leaderboard",
        "events around one custom_kernel call after a flush the host path cannot outlast",
        flush_kind="leaderboard",
        ab=True,
        whole_call=True,
    ),
    Host(
        "host",
        "host time per custom_kernel call over an interleaved reference path (x 10 us): back-to-back batches, the GPU never the bound",
        groups=("host",),
    ),
)
MODE_NAMES: tuple[str, ...] = tuple(m.name for m in MODES)
AB_MODE_NAMES: tuple[str, ...] = tuple(m.name for m in MODES if m.ab)  # what perfgate ab measures
WHOLE_CALL_MODE_NAMES: tuple[str, ...] = tuple(m.name for m in MODES if m.whole_call)
DEFAULT_MODE = "device"


_CLAIMED = frozenset(g for m in MODES for g in m.groups)


def times_group(mode: str, group: str | None) -> bool:
    """Whether ``mode`` times benchmarks of ``group``: host time and device time are different
    quantities, so a group is timed by the modes made for it."""
    chosen = get(mode)
    if chosen.groups:
        return group in chosen.groups
    return group not in _CLAIMED


def get(name: str) -> Mode:
    """The mode called ``name``; ValueError naming the known ones otherwise."""
    for mode in MODES:
        if mode.name == name:
            return mode
    raise ValueError(f"mode must be one of {', '.join(MODE_NAMES)}, got {name!r}")
