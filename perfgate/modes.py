"""The timing modes, defined once: what one benchmark sample means.

A mode names a results file (``.perfgate/results/<mode>.json``), a baseline
(``perf_baselines/<device>/<mode>.json``) and the ``machine_info["perfgate"]["mode"]`` a file
records; two files of different modes are never compared. Adding a mode is one entry in
:data:`MODES` here plus its timing path in :mod:`perfgate.plugin`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mode:
    name: str
    description: str  # one line, for --help and reports
    default_rounds: int  # measured rounds per benchmark when --perfgate-rounds is not given

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"mode name must be a plain identifier, got {self.name!r}")
        if isinstance(self.default_rounds, bool) or not isinstance(self.default_rounds, int):
            raise TypeError(f"default_rounds must be an int, got {self.default_rounds!r}")
        if self.default_rounds < 2:
            raise ValueError(f"default_rounds must be >= 2, got {self.default_rounds}")


MODES: tuple[Mode, ...] = (
    Mode("device", "kernel time: graph replay over rotated input copies", 200),
    Mode("leaderboard", "events around one custom_kernel call after a flush", 100),
)
MODE_NAMES: tuple[str, ...] = tuple(m.name for m in MODES)
DEFAULT_MODE = "device"


def get(name: str) -> Mode:
    """The mode called ``name``; ValueError naming the known ones otherwise."""
    for mode in MODES:
        if mode.name == name:
            return mode
    raise ValueError(f"mode must be one of {', '.join(MODE_NAMES)}, got {name!r}")
