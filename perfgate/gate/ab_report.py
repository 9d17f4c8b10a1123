"""The report of a process-level A/B (``perfgate ab``): compare's report, with the worker process
as the unit.

Rows are :class:`perfgate.gate.report.Row`\\ s made by :meth:`ProcessResult.row_fields` (``n`` is
processes a side, ``noise`` the spread of the per-process levels) and the exit code is
:func:`perfgate.gate.compare.make_report`'s. What the stored-baseline report lacks is added in
three places, so that every rendering shows the per-process figures:

- each row's reason ends with ``P+P processes x R rounds, process SD x%``;
- one note per benchmark gives each process's level against the base's level (``base
  -0.02 +0.01 +0.03%, head +0.95 +1.02 +0.99%``), the trimmed mean of its rounds;
- the JSON's benchmarks carry ``processes`` (every process's level in seconds, its rounds,
  the look that decided), and the settings block names the design (``unit = process``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from perfgate.gate import compare
from perfgate.gate.report import Report, Row


@dataclasses.dataclass(frozen=True)
class ProcessReport(Report):
    """A :class:`Report` whose JSON benchmarks carry their per-process figures."""

    processes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        for bench in out["benchmarks"]:
            if bench["name"] in self.processes:
                bench["processes"] = self.processes[bench["name"]]
        return out


def settings_block(design, mode: str, inconclusive_exit: int) -> dict[str, Any]:
    """What the verdicts used, under the names the report renderers read (``unit = process``
    selects the process-level description); ``section`` is the pyproject table the design's
    keys come from, ``[tool.perfgate.ab_<mode>]``."""
    return {
        "alpha": design.alpha,
        "confidence": 1 - 2 * design.look_alpha,
        "unit": "process",
        "section": f"ab_{mode}",
        "min_effect": design.min_effect,
        "floor": design.floor,
        "processes": "/".join(str(p) for p in design.processes),
        "rounds_per_process": design.rounds,
        "trim": design.trim,
        "looks": design.looks,
        "inconclusive_exit": inconclusive_exit,
        "allow_missing": False,
    }


def row(name: str, decision) -> Any:
    """One benchmark's row: the process-level numbers, its reason with the processes."""
    r = decision.result
    per = r.rounds_base // max(r.n_base, 1)
    sd = "" if r.noise is None else f", process SD {r.noise:.2%}"
    fields = r.row_fields()
    fields["reason"] = f"{r.reason}; {r.n_base}+{r.n_cur} processes x {per} rounds{sd}"
    return Row(name=name, **fields)


def process_figures(name: str, decision, base: list, head: list, trim: float) -> dict[str, Any]:
    """Each process's level (seconds) and rounds, as judged (the processes up to its look)."""
    import numpy as np

    from perfgate.gate.process_ab import process_levels

    n = decision.result.n_base
    figures: dict[str, Any] = {"look": decision.look, "trim": trim}
    for label, procs in (("base", base[:n]), ("head", head[:n])):
        figures[label] = [float(np.exp(process_levels(p, trim))) for p in procs]
        figures[f"{label}_rounds"] = [len(p) for p in procs]
    return figures


def note(name: str, figures: dict[str, Any], reference: float) -> str:
    """``NAME: per-process levels against the base's level R: base ... , head ...``."""

    def pct(levels: list[float]) -> str:
        return " ".join(f"{(x / reference - 1) * 100:+.2f}" for x in levels) + "%"

    return (
        f"{name}: per-process levels against the base's {_time(reference)}: "
        f"base {pct(figures['base'])}; head {pct(figures['head'])}"
    )


def make(decisions: dict, store: dict, design, mode: str, gate, **where) -> ProcessReport:
    """The report of ``decisions`` (perfgate.gate.process_ab.decide) on the samples in
    ``store`` (perfgate.measure.ab.Store); ``where``: baseline_path, current_path, device_key,
    notes (the context lines that go first)."""
    rows, figures, notes = [], {}, list(where.pop("notes", []))
    for name, decision in decisions.items():
        base = store.get("base", {}).get(name, {}).get("plain", [])
        head = store.get("head", {}).get(name, {}).get("plain", [])
        rows.append(row(name, decision))
        figures[name] = process_figures(name, decision, base, head, design.trim)
    for name in decisions:
        notes.append(note(name, figures[name], decisions[name].result.baseline_median))
    report = compare.make_report(
        rows, gate.stats, mode=mode, allow_missing=False, notes=notes, looks=design.looks,
        **where,
    )  # fmt: skip
    fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(Report)}
    fields["settings"] = settings_block(design, mode, gate.stats.inconclusive_exit)
    return ProcessReport(**fields, processes=figures)


def samples_record(store: dict, decisions: dict) -> dict[str, Any]:
    """Every process's rounds by side and benchmark (``ab.samples.json``), in look order."""
    return {
        label: {name: store.get(label, {}).get(name, {}).get("plain", []) for name in decisions}
        for label in ("base", "head")
    }


def _time(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds <= 0:
        return f"{seconds!r} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"
