"""The timing modes, defined once: what one benchmark sample means.

A mode names a results file (``.perfgate/results/<mode>.json``), a baseline
(``perf_baselines/<device>/<mode>.json``) and the ``machine_info["perfgate"]["mode"]`` a file
records; two files of different modes are never compared. A mode with ``groups`` times only those
benchmark groups (``host``: the host path), and the other modes never time them. Adding a mode is one entry in
:data:`MODES` here, its rounds in ``[tool.perfgate.rounds]`` (pyproject.toml), and its timing path
in :mod:`perfgate.plugin`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mode:
    name: str
    description: str  # one line, for --help and reports
    # benchmark groups only this mode times; empty: every group that no mode claims
    groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"mode name must be a plain identifier, got {self.name!r}")

    @property
    def default_rounds(self) -> int:
        """Measured rounds per benchmark when ``--perfgate-rounds`` is not given: the mode's
        ``[tool.perfgate.rounds]`` entry in pyproject.toml, the one home of gate settings."""
        from perfgate import settings

        return settings.defaults().rounds[self.name]


MODES: tuple[Mode, ...] = (
    Mode("device", "kernel time: graph replay over rotated input copies"),
    Mode(
        "leaderboard",
        "events around one custom_kernel call after a flush the host path cannot outlast",
    ),
    Mode(
        "host",
        "host time per custom_kernel call over an interleaved reference path (x 10 us): back-to-back batches, the GPU never the bound",
        groups=("host",),
    ),
)
MODE_NAMES: tuple[str, ...] = tuple(m.name for m in MODES)
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
