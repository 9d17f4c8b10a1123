"""Where the gates' files live, and the schema version they all carry.

- results of a run: ``.perfgate/results/<mode>[-<tag>].json`` (and ``.md``, ``.compare.json``);
- timing baselines: ``perf_baselines/<device-key>/<mode>[-<tag>].json``;
- host-count baselines: ``perf_baselines/<device-key>/host_counts.json``;
- ISA baselines: ``perf_baselines/isa/<target>.json``.

Every file the gates write (results' ``machine_info["perfgate"]``, baselines, host counts, ISA
reports) records :data:`SCHEMA`; a reader refuses another.
"""

from __future__ import annotations

from pathlib import Path

from perfgate.checkout import PYPROJECT as PYPROJECT  # the gates find the checkout here too
from perfgate.checkout import REPO
from perfgate.modes import MODE_NAMES
from perfgate.refusal import Refusal

SCHEMA = 1
DEFAULT_RESULTS = Path(".perfgate/results")
DEFAULT_BASELINES = REPO / "perf_baselines"
HOST_COUNTS_NAME = "host_counts.json"
ISA_DIR = "isa"


def baseline_path(baselines_dir: Path, device_key: str, mode: str, tag: str | None = None) -> Path:
    """``<baselines_dir>/<device_key>/<mode>.json``, or ``<mode>-<tag>.json`` for a tagged
    selection (``--tag grid``: the production grid has its own baseline, so that the default
    selection's baseline never lists benchmarks a default run leaves out)."""
    if mode not in MODE_NAMES:
        raise ValueError(f"mode must be one of {', '.join(MODE_NAMES)}, got {mode!r}")
    return device_dir(baselines_dir, device_key) / f"{stem(mode, tag)}.json"


def device_dir(baselines_dir: Path, device_key: str) -> Path:
    """``<baselines_dir>/<device_key>``: one device's baselines."""
    if not device_key or device_key in (".", "..") or any(c in device_key for c in "/\\"):
        raise ValueError(f"device_key must be a plain directory name, got {device_key!r}")
    return Path(baselines_dir) / device_key


def host_counts_path(baselines_dir: Path, device_key: str) -> Path:
    return Path(baselines_dir) / device_key / HOST_COUNTS_NAME


def isa_baseline_path(baselines_dir: Path, target: str) -> Path:
    return Path(baselines_dir) / ISA_DIR / f"{target}.json"


class TagError(Refusal, ValueError):
    """A ``--tag`` that cannot name a file."""


def stem(mode: str, tag: str | None) -> str:
    """A results or baseline file's name without ``.json``: the mode, and the tag if any."""
    if tag is None:
        return mode
    if not tag.replace("-", "").replace("_", "").isalnum():
        raise TagError(f"--tag must be letters, digits, - or _, got {tag!r}")
    return f"{mode}-{tag}"


def result_paths(results_dir: Path, mode: str, tag: str | None = None) -> dict[str, Path]:
    """Where one mode's results, markdown report and comparison JSON go."""
    results_dir, name = Path(results_dir), stem(mode, tag)
    return {
        "json": results_dir / f"{name}.json",
        "markdown": results_dir / f"{name}.md",
        "compare": results_dir / f"{name}.compare.json",
    }
