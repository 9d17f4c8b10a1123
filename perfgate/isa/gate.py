"""Compare an ISA report with a baseline: which differences are regressions, and the table of them.

Rules (docs/isa.md explains why):
- regression: an entry missing from the current report; more spills; more scratch; lower
  occupancy; VGPR growth above ``max(vgpr_tolerance_abs, vgpr_tolerance_rel * baseline)`` (both
  in ``[tool.perfgate.isa]`` of pyproject.toml, :mod:`perfgate.gate.settings`); a wanted instruction
  family (:data:`perfgate.isa.metrics.WANTED_FAMILIES`) whose count fell from > 0 to 0;
  ``valu_per_wave`` (the static cost, docs/isa.md) growing by more than ``valu_tolerance_rel`` x
  baseline, where both reports have it.
- improvement: the opposite moves. Everything else that changed (SGPRs, LDS bytes, single
  mnemonic counts, new entries) is reported and does not fail.
- unusable input (missing or corrupt file, wrong schema or target) raises :class:`IsaReportError`.
  A different triton (or native compiler) version only warns: compiler updates change code, and
  the report says so loudly instead of refusing to compare.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.gate import settings, verdict
from perfgate.gate.settings import IsaTolerances
from perfgate.isa import metrics
from perfgate.isa.collect import SCHEMA, TARGETS, TOOL
from perfgate.refusal import Refusal

# The ISA table's labels of the gates' verdicts (perfgate.gate.verdict)
REGRESSION = verdict.ISA_LABELS[verdict.REGRESSION]
IMPROVED = verdict.ISA_LABELS[verdict.IMPROVEMENT]
CHANGED = verdict.ISA_LABELS[verdict.CHANGED]
NEW = verdict.ISA_LABELS[verdict.NEW]
SKIPPED = verdict.ISA_LABELS[verdict.NOT_CHECKED]

_INT_FIELDS = ("vgpr", "spills", "lds_bytes", "scratch_bytes", "occupancy")
_OPTIONAL_INT_FIELDS = (
    "agpr",
    "sgpr",
    "num_warps",
    "num_stages",
    # the static cost (perfgate.isa.collect.COST_FIELDS): null where unknown
    "valu_per_wave",
    "instrs_per_wave",
    "mfma_per_wave",
    "workgroups",
)


class IsaReportError(Refusal, ValueError):
    """An ISA report or baseline that cannot be used (one-line message)."""


@dataclass(frozen=True)
class Row:
    key: str
    metric: str
    baseline: str
    current: str
    verdict: str


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    warnings: list[str]
    tolerances: IsaTolerances | None = None  # what the verdicts used, echoed by render

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == REGRESSION]

    @property
    def improvements(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == IMPROVED]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def validate(report: Any, *, where: str = "report", target: str | None = None) -> dict[str, Any]:
    """Check the shape of a report; returns it. Raises IsaReportError naming the first problem."""
    if not isinstance(report, dict):
        raise IsaReportError(f"{where}: expected a JSON object, got {type(report).__name__}")
    if report.get("tool") != TOOL:
        raise IsaReportError(
            f"{where}: 'tool' is {report.get('tool')!r}, expected {TOOL!r} (not an ISA report)"
        )
    if report.get("schema") != SCHEMA:
        raise IsaReportError(
            f"{where}: schema {report.get('schema')!r} is not the supported {SCHEMA}"
        )
    if report.get("target") not in TARGETS:
        raise IsaReportError(f"{where}: target {report.get('target')!r} is not one of {TARGETS}")
    if target is not None and report["target"] != target:
        raise IsaReportError(
            f"{where}: made for target {report['target']!r}, this run is for {target!r}"
        )
    if not isinstance(report.get("triton"), str):
        raise IsaReportError(f"{where}: 'triton' (the compiler version) is missing")
    entries = report.get("entries")
    if not isinstance(entries, dict) or not entries:
        raise IsaReportError(
            f"{where}: 'entries' must be a non-empty object keyed by kernel[config]"
        )
    for key, entry in entries.items():
        if not isinstance(entry, dict) or entry.get("key") != key:
            raise IsaReportError(f"{where}: entry {key!r} is not an object whose 'key' is {key!r}")
        if entry.get("target") != report["target"]:
            raise IsaReportError(f"{where}: entry {key!r} has target {entry.get('target')!r}")
        if entry.get("source") not in ("triton", "native"):
            raise IsaReportError(f"{where}: entry {key!r} has source {entry.get('source')!r}")
        for field in _INT_FIELDS:
            if not _is_int(entry.get(field)):
                raise IsaReportError(f"{where}: entry {key!r} field {field!r} must be an int >= 0")
        for field in _OPTIONAL_INT_FIELDS:
            if entry.get(field) is not None and not _is_int(entry[field]):
                raise IsaReportError(
                    f"{where}: entry {key!r} field {field!r} must be null or an int >= 0"
                )
        instructions = entry.get("instructions")
        if not isinstance(instructions, dict) or not all(_is_int(n) for n in instructions.values()):
            raise IsaReportError(
                f"{where}: entry {key!r} 'instructions' must map mnemonics to ints >= 0"
            )
    return report


def load(path: str | Path, *, target: str | None = None) -> dict[str, Any]:
    """Read and validate a report file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise IsaReportError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:  # a ValueError: without this it read as a regression
        raise IsaReportError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02X} at offset {exc.start}); "
            "expected a JSON report written by `perfgate isa --json`"
        ) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IsaReportError(f"{path}: not valid JSON ({exc})") from exc
    except RecursionError:
        raise IsaReportError(f"{path}: nested too deeply to be an ISA report") from None
    return validate(data, where=str(path), target=target)


def default_tolerances() -> IsaTolerances:
    """``[tool.perfgate.isa]`` of the repository's pyproject.toml."""
    return settings.defaults().isa


def vgpr_tolerance(baseline_vgpr: int, tolerances: IsaTolerances | None = None) -> float:
    """VGPRs an entry may grow by before it counts as a regression."""
    return (tolerances or default_tolerances()).vgpr(baseline_vgpr)


def _compare_entry(
    key: str, target: str, base: dict[str, Any], cur: dict[str, Any], tolerances: IsaTolerances
) -> list[Row]:
    rows = []

    def row(metric: str, verdict: str, b: Any = None, c: Any = None) -> None:
        rows.append(
            Row(
                key,
                metric,
                str(base.get(metric) if b is None else b),
                str(cur.get(metric) if c is None else c),
                verdict,
            )
        )

    # more is worse
    for field in ("spills", "scratch_bytes"):
        if cur[field] != base[field]:
            row(field, REGRESSION if cur[field] > base[field] else IMPROVED)
    if cur["occupancy"] != base["occupancy"]:
        row("occupancy", REGRESSION if cur["occupancy"] < base["occupancy"] else IMPROVED)
    grew = cur["vgpr"] - base["vgpr"]
    allowed = tolerances.vgpr(base["vgpr"])
    if grew > allowed:
        row("vgpr", REGRESSION)
    elif grew > 0:
        row("vgpr", f"{CHANGED} (within +{allowed:g})")
    elif grew < 0:
        row("vgpr", IMPROVED)
    # Vector instructions per wave (static cost): growth beyond the tolerance is extra work every
    # wave issues, e.g. a per-element operation added to the quantizer.
    base_valu, cur_valu = base.get("valu_per_wave"), cur.get("valu_per_wave")
    if base_valu is not None and cur_valu is not None and cur_valu != base_valu:
        allowed_valu = tolerances.valu(base_valu)
        if cur_valu - base_valu > allowed_valu:
            row("valu_per_wave", REGRESSION)
        elif cur_valu > base_valu:
            row("valu_per_wave", f"{CHANGED} (within +{allowed_valu:g})")
        else:
            row("valu_per_wave", IMPROVED)
    for field in ("agpr", "sgpr", "lds_bytes", "num_warps", "num_stages"):
        if cur.get(field) != base.get(field):
            row(field, CHANGED)
    for field in ("instrs_per_mfma", "workgroups", "grid_fill"):
        if cur.get(field) != base.get(field):
            row(field, CHANGED)
    base_fam = metrics.family_counts(target, base["instructions"])
    cur_fam = metrics.family_counts(target, cur["instructions"])
    for family, before in base_fam.items():
        after = cur_fam[family]
        if before > 0 and after == 0:
            row(f"{family}: lost", REGRESSION, before, after)
        elif before == 0 and after > 0:
            row(f"{family}: gained", IMPROVED, before, after)
    changes = [
        f"{m} {base['instructions'].get(m, 0)}->{cur['instructions'].get(m, 0)}"
        for m in sorted(set(base["instructions"]) | set(cur["instructions"]))
        if base["instructions"].get(m, 0) != cur["instructions"].get(m, 0)
    ]
    if changes:
        row("instructions", CHANGED, "", ", ".join(changes))
    return rows


def compare(
    baseline: dict[str, Any],
    current: dict[str, Any],
    *,
    skipped_sources: tuple[str, ...] = (),
    tolerances: IsaTolerances | None = None,
) -> Comparison:
    """Differences between two validated reports of one target.

    ``skipped_sources`` names entry sources the current run did not build on purpose (``native``
    under ``--skip-native``): their baseline entries are listed as not checked, not as missing.
    ``tolerances`` default to ``[tool.perfgate.isa]`` of pyproject.toml.
    """
    tolerances = default_tolerances() if tolerances is None else tolerances
    if not isinstance(tolerances, IsaTolerances):
        raise TypeError(
            f"tolerances must be a perfgate.gate.settings.IsaTolerances, got {type(tolerances).__name__}"
        )
    validate(baseline, where="baseline")
    validate(current, where="current report")
    if baseline["target"] != current["target"]:
        raise IsaReportError(
            f"baseline is for {baseline['target']!r}, current report for {current['target']!r}"
        )
    target = current["target"]
    warnings = []
    if baseline["triton"] != current["triton"]:
        warnings.append(
            f"baseline made with triton {baseline['triton']}, this run uses triton {current['triton']}: "
            "compiler changes alter code; if the differences below come from the upgrade, "
            "regenerate the baseline"
        )
    if (
        current.get("native_compiler")
        and baseline.get("native_compiler") != current["native_compiler"]
    ):
        warnings.append(
            f"native reducer baseline made with {baseline.get('native_compiler')}, "
            f"this run uses {current['native_compiler']}"
        )
    rows: list[Row] = []
    base_entries, cur_entries = baseline["entries"], current["entries"]
    for key in sorted(set(base_entries) | set(cur_entries)):
        if key not in cur_entries:
            if base_entries[key]["source"] in skipped_sources:
                rows.append(Row(key, "entry", "present", "not built", SKIPPED))
            else:
                rows.append(Row(key, "entry", "present", "missing", REGRESSION))
        elif key not in base_entries:
            rows.append(Row(key, "entry", "absent", "present", NEW))
        else:
            rows.extend(
                _compare_entry(key, target, base_entries[key], cur_entries[key], tolerances)
            )
    if any(r.verdict == NEW for r in rows):
        warnings.append(
            "entries without a baseline are not gated: regenerate the baseline to gate them"
        )
    return Comparison(rows, warnings, tolerances)


def render(comparison: Comparison, *, target: str, n_entries: int, console: Any) -> None:
    """Print the comparison as a rich table with a one-line summary."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    for warning in comparison.warnings:
        console.print(Panel(Text(warning), title="WARNING", style="bold yellow"))
    if comparison.rows:
        table = Table(title=f"ISA differences ({target})", show_lines=False)
        table.add_column(Text("kernel[config]"), overflow="fold", ratio=3)
        for column in ("metric", "baseline", "current", "verdict"):
            table.add_column(column, overflow="fold", ratio=1)
        styles = {REGRESSION: "bold red", IMPROVED: "green", NEW: "yellow", SKIPPED: "yellow"}
        for r in comparison.rows:
            # Text, not str: keys like "gemm[block_m=16]" would otherwise be read as rich markup.
            cells = (Text(c) for c in (r.key, r.metric, r.baseline, r.current, r.verdict))
            table.add_row(*cells, style=styles.get(r.verdict))
        console.print(table)
    n_reg, n_imp = len(comparison.regressions), len(comparison.improvements)
    verdict = "[bold red]FAIL[/]" if n_reg else "[bold green]PASS[/]"
    if comparison.tolerances is not None:
        console.print(
            Text(
                f"isa {target} gate settings: {comparison.tolerances.describe()} (VGPR growth "
                "allowed: max(abs, rel x baseline); VALU per wave: rel x baseline); any more "
                "spills or scratch, lower occupancy or a lost wanted family fails",
                style="dim",
            )
        )
    console.print(
        f"isa {target}: {verdict} - {n_entries} entries, {n_reg} regression(s), "
        f"{n_imp} improvement(s), {len(comparison.rows)} difference(s)"
    )
