"""A run's gate verdict, read from the comparison report written beside its results.

``bench`` writes each mode's run as ``<mode>.json`` and its comparison with the baseline as
``<mode>.compare.json`` in one directory (:func:`perfgate.gate.paths.result_paths`);
``history add --verdicts`` keeps each run with the verdict of the report beside it: ``pass``
when the comparison exited 0, ``fail`` when it exited 1 (:data:`perfgate.history.records.VERDICTS`).

The report must be that run's, or the file is refused (one line, nothing added): its summary
names a results file of the same name (a CI artifact moves the directory, not the names), the
same device key and timing mode, and it judged exactly the run's benchmarks (a row, not
``missing``, for each).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from perfgate.history.records import FAIL, PASS, RecordError, Run

_BY_EXIT = {0: PASS, 1: FAIL}


def from_exit_code(code: int) -> str | None:
    """The verdict of a comparison that exited ``code``; None for any other code (2: no
    comparison could be made)."""
    return _BY_EXIT.get(code) if type(code) is int else None


def report_path(results: str | Path) -> Path:
    """Where the comparison of the results file ``results`` is: ``<stem>.compare.json``."""
    return Path(results).with_suffix(".compare.json")


def with_verdict(run: Run) -> Run:
    """``run`` with the verdict of the comparison report beside its source file."""
    path = report_path(run.source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        summary = data["summary"]
        rows = {b["name"]: b["verdict"] for b in data["benchmarks"]}
        fields = (summary["exit_code"], summary["current"], summary["device_key"], summary["mode"])
    except OSError as exc:
        raise RecordError(
            f"--verdicts: {run.source}: no comparison report {path} ({exc.strerror or exc}); "
            "bench writes it beside the results"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise RecordError(f"--verdicts: {path}: not a perfgate comparison report") from None
    exit_code, current, device_key, mode = fields
    problem = None
    if Path(str(current)).name != Path(run.source).name:
        problem = f"it compared {current}, not {Path(run.source).name}"
    elif (device_key, mode) != (run.device_key, run.mode):
        problem = f"it is of {device_key} in {mode} mode, the run of {run.device_key} in {run.mode}"
    elif {n for n, v in rows.items() if v != "missing"} != {r.benchmark for r in run.results}:
        problem = "it judged other benchmarks than the run holds"
    if problem:
        raise RecordError(f"--verdicts: {path}: not the comparison of {run.source}: {problem}")
    verdict = from_exit_code(exit_code)
    if verdict is None:
        raise RecordError(f"--verdicts: {path}: exit_code {exit_code!r} is no verdict (0 or 1)")
    return dataclasses.replace(run, verdict=verdict)
