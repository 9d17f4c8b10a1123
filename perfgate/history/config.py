"""The history's settings: the ``[tool.perfgate-history]`` table of the repository's pyproject.toml.

```toml
[tool.perfgate-history]
db = ".perfgate/history.sqlite"  # the store, relative to the repository root (--db overrides)
min_effect = 0.015     # detect: smallest change of level that counts
...
```

Every key is required and checked here, as ``[tool.perfgate]``'s are by perfgate.gate.settings: the
table is the only copy of the values. It is a table of its own rather than
``[tool.perfgate.history]`` because perfgate.gate.settings refuses any key of ``[tool.perfgate]`` it
does not know; moving it there takes that reader's consent (docs/history.md).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from perfgate.checkout import read_toml
from perfgate.gate import settings
from perfgate.history.steps import StepSettings
from perfgate.history.store_base import is_server
from perfgate.refusal import Refusal

TABLE = ("tool", "perfgate-history")
TABLE_NAME = "[tool.perfgate-history]"


class HistoryConfigError(Refusal, ValueError):
    """A history table that cannot be used; the message is one line naming the key."""


def _fraction(v: Any) -> bool:
    return 0 < v < 1


# name -> (type, check, expected); the order is the table's
_KEYS: dict[str, tuple[type, Callable[[Any], bool], str]] = {
    "db": (str, lambda v: bool(v.strip()), "a non-empty path or postgresql:// URL"),
    "branch": (str, lambda v: bool(v.strip()), "a non-empty branch name"),
    "min_effect": (float, _fraction, "a fraction in (0, 1)"),
    "min_size": (int, lambda v: 2 <= v <= 100, "an int in [2, 100]"),
    "penalty": (float, lambda v: 0 < v < math.inf, "finite and > 0"),
    "significance": (float, lambda v: 0 < v < 0.5, "in (0, 0.5)"),
    "baseline_runs": (int, lambda v: 2 <= v <= 50, "an int in [2, 50]"),
    "min_runs": (int, lambda v: v >= 2, "an int >= 2"),
    "gate_min_effect": (float, _fraction, "a fraction in (0, 1)"),  # 0: never met
    "gate_drift_factor": (float, lambda v: 0 <= v < math.inf, "finite and >= 0"),
    "samples_kept": (int, lambda v: v >= 2, "an int >= 2"),
}


@dataclass(frozen=True)
class HistoryConfig:
    """The checked table; ``db`` is absolute (resolved against the pyproject's directory), or a
    server's URL (``postgresql://``), which holds no password: this file is committed."""

    db: Path | str
    branch: str  # the branch whose runs are the history of record (main)
    steps: StepSettings  # detect's settings
    baseline_runs: int  # against history: the last K runs of `branch` in this segment
    min_runs: int  # ... fewer than this in the segment: the stored baseline, with a warning
    gate_min_effect: float  # ... threshold = max(gate_min_effect, gate_drift_factor x drift)
    gate_drift_factor: float
    samples_kept: int  # per-round samples are kept for each benchmark's newest N runs
    source: str  # the file read, for messages


def default_pyproject() -> Path:
    return settings.PYPROJECT


def load(path: str | os.PathLike[str] | None = None) -> HistoryConfig:
    """Read and check the table from ``path`` (default: the repository's pyproject.toml)."""
    path = Path(default_pyproject() if path is None else path)
    doc = read_toml(path, HistoryConfigError, f"the history's settings from {TABLE_NAME}")
    table = doc.get(TABLE[0], {}).get(TABLE[1])
    if not isinstance(table, dict):
        raise HistoryConfigError(f"{path}: no {TABLE_NAME} table (the history's settings)")
    where = f"{path}: {TABLE_NAME}"
    unknown = [k for k in table if k not in _KEYS]
    if unknown:
        raise HistoryConfigError(f"{where} has unknown key {unknown[0]}; known: {', '.join(_KEYS)}")
    values = {name: _checked(where, name, table) for name in _KEYS}
    if values["min_runs"] > values["baseline_runs"]:
        raise HistoryConfigError(
            f"{where} min_runs must be <= baseline_runs ({values['baseline_runs']}), "
            f"got {values['min_runs']}"
        )
    if values["samples_kept"] < values["baseline_runs"]:
        raise HistoryConfigError(
            f"{where} samples_kept must be >= baseline_runs ({values['baseline_runs']}): the "
            f"push gate pools the samples of that many runs, got {values['samples_kept']}"
        )
    db = _db(where, values["db"])
    try:
        steps = StepSettings(
            values["min_effect"], values["min_size"], values["penalty"], values["significance"]
        )
    except (TypeError, ValueError) as exc:  # pragma: no cover - the checks above are stricter
        raise HistoryConfigError(f"{where} {exc}") from None
    return HistoryConfig(
        db=db if isinstance(db, str) or db.is_absolute() else path.parent / db,
        branch=values["branch"],
        steps=steps,
        baseline_runs=values["baseline_runs"],
        min_runs=values["min_runs"],
        gate_min_effect=values["gate_min_effect"],
        gate_drift_factor=values["gate_drift_factor"],
        samples_kept=values["samples_kept"],
        source=str(path),
    )


def _db(where: str, text: str) -> Path | str:
    """A path, or a server's URL without a password (the password is a secret: the URL's
    environment variable, PGPASSWORD or ~/.pgpass give it, never this committed file)."""
    if not is_server(text):
        return Path(text).expanduser()
    try:
        parts = urlsplit(text)
        password = parts.password is not None or "password" in parse_qs(parts.query)
    except ValueError:
        raise HistoryConfigError(f"{where} db must be a path or a postgresql:// URL") from None
    if password:
        raise HistoryConfigError(
            f"{where} db holds a password, in a committed file; give the URL with it in "
            "PERFGATE_HISTORY_URL (a CI secret), or the password in PGPASSWORD or ~/.pgpass"
        )
    return text


def _checked(where: str, name: str, table: dict[str, Any]) -> Any:
    kind, valid, expected = _KEYS[name]
    if name not in table:
        raise HistoryConfigError(f"{where} lacks {name} ({kind.__name__}, {expected})")
    value = table[name]
    ok = (int,) if kind is int else (int, float) if kind is float else (str,)
    if isinstance(value, bool) or not isinstance(value, ok):
        raise HistoryConfigError(f"{where} {name} must be {expected}, got {value!r}")
    value = kind(value)
    if not valid(value):  # NaN fails every comparison
        raise HistoryConfigError(f"{where} {name} must be {expected}, got {value!r}")
    return value
