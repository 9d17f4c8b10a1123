"""The comparison report: its rows, and its three renderings (rich table, markdown, JSON).

``compare`` builds a :class:`Report`; this module only presents it. The markdown is written for a
PR comment or ``$GITHUB_STEP_SUMMARY``: a headline, the environment warnings, the rows that need a
look, and the unchanged rows folded away (a grid of thousands of benchmarks would otherwise
exceed GitHub's comment size).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from perfgate.gate.verdict import VERDICTS  # VERDICTS: the headline and table order

_PLURAL = {"regression": "regressions", "improvement": "improvements"}
_STYLE = {
    "regression": "bold red",
    "missing": "bold magenta",
    "inconclusive": "yellow",
    "improvement": "green",
    "new": "cyan",
    "unchanged": "dim",
}


@dataclass(frozen=True)
class Row:
    """One benchmark's line. Statistics are ``None`` for ``new``/``missing`` and where too few
    samples make them meaningless; ratios are current/baseline medians (> 1 is slower)."""

    name: str
    verdict: str
    reason: str
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    threshold: float | None = None
    noise: float | None = None
    baseline_median: float | None = None
    current_median: float | None = None
    n_baseline: int | None = None
    n_current: int | None = None
    looks: int | None = None  # adaptive rounds: the look that decided it (1 = the first rounds)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(frozen=True)
class Report:
    baseline_path: str
    current_path: str
    device_key: str
    mode: str
    rows: list[Row]
    exit_code: int
    settings: dict[str, Any]
    warnings: list[str] = field(default_factory=list)  # environment differences: shown loudly
    notes: list[str] = field(default_factory=list)  # context, e.g. the two git commits
    # why the flagged benchmarks got slower (perfgate.explain.wiring): markdown lines, shown
    # after the table; empty when nothing was flagged (and then absent from the JSON)
    why: list[str] = field(default_factory=list)

    def counts(self) -> Counter[str]:
        return Counter(row.verdict for row in self.rows)

    def sorted_rows(self) -> list[Row]:
        return sorted(self.rows, key=lambda r: (VERDICTS.index(r.verdict), r.name))

    def headline(self) -> str:
        """E.g. ``FAIL: 2 regressions, 1 improvement, 40 unchanged``."""
        counts = self.counts()
        parts = [
            f"{counts[v]} {_PLURAL.get(v, v) if counts[v] != 1 else v}"
            for v in VERDICTS
            if counts[v]
        ]
        status = "PASS" if self.exit_code == 0 else "FAIL"
        return f"{status}: {', '.join(parts)}"

    def to_json(self) -> dict[str, Any]:
        counts = self.counts()
        out = {
            "benchmarks": [
                {
                    "name": r.name,
                    "verdict": r.verdict,
                    "ratio": _finite(r.ratio),
                    "ci_low": _finite(r.ci_low),
                    "ci_high": _finite(r.ci_high),
                    "p_value": _finite(r.p_value),
                    "threshold": _finite(r.threshold),
                    "noise": _finite(r.noise),
                    "baseline_median": _finite(r.baseline_median),
                    "current_median": _finite(r.current_median),
                    "n_baseline": r.n_baseline,
                    "n_current": r.n_current,
                    "looks": r.looks,
                    "reason": r.reason,
                }
                for r in self.sorted_rows()
            ],
            "summary": {
                "headline": self.headline(),
                "exit_code": self.exit_code,
                "counts": {v: counts[v] for v in VERDICTS},
                "baseline": self.baseline_path,
                "current": self.current_path,
                "device_key": self.device_key,
                "mode": self.mode,
                "warnings": list(self.warnings),
                "notes": list(self.notes),
                "settings": dict(self.settings),
            },
        }
        if self.why:
            out["why"] = list(self.why)
        return out


def render_console(report: Report, console) -> None:
    """Print the report to a ``rich.console.Console``: warnings first, in a panel, then the table."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    if report.warnings:
        console.print(
            Panel(
                Text("\n".join(report.warnings)),  # Text: values may contain [brackets]
                title="WARNING: the environment differs from the baseline's",
                subtitle="timings may differ for reasons other than the code",
                border_style="bold yellow",
            )
        )
    level = report.settings.get("confidence")
    table = Table(
        title=f"perfgate compare: {report.device_key}, {report.mode} mode",
        caption="\n".join(
            filter(None, (_gate_description(report.settings), _settings_line(report.settings)))
        ),
    )
    table.add_column("verdict", no_wrap=True)
    table.add_column("benchmark", overflow="fold")
    table.add_column("change", justify="right")
    table.add_column(f"{_level(level)} CI" if level else "CI", justify="right")
    table.add_column("p", justify="right")
    table.add_column("threshold", justify="right")
    table.add_column("baseline", justify="right")
    table.add_column("current", justify="right")
    table.add_column("n", justify="right")
    table.add_column("reason", overflow="fold")
    for row in report.sorted_rows():
        style = _STYLE[row.verdict]
        # Text, not str: rich would read a pytest id such as "[m64-n7168]" as a markup tag.
        cells = [row.name, *_cells(row), row.reason]
        table.add_row(Text(row.verdict, style=style), *(Text(c) for c in cells))
    console.print(table)
    for note in report.notes:
        console.print(note, style="dim", markup=False, highlight=False)
    for line in report.why:
        console.print(line, markup=False, highlight=False)
    console.print(Text(report.headline(), style="bold red" if report.exit_code else "bold green"))


def render_markdown(report: Report) -> str:
    """The report as GitHub-flavoured markdown."""
    level = report.settings.get("confidence")
    ci_head = f"{_level(level)} CI" if level else "CI"
    lines = [
        f"### perfgate {report.headline()}",
        "",
        f"`{report.device_key}`, `{report.mode}` mode: `{_md_code(report.current_path)}` "
        f"against `{_md_code(report.baseline_path)}`. {_gate_description(report.settings)}",
        "",
    ]
    if report.settings:
        lines += [
            "Settings: " + ", ".join(f"`{k}={_setting(v)}`" for k, v in report.settings.items()),
            "",
        ]
    if report.warnings:
        lines += ["> [!WARNING]", "> **The environment differs from the baseline's:**"]
        lines += [f"> - {_md_escape(w)}" for w in report.warnings]
        lines.append("")
    lines += [f"- {_md_escape(n)}" for n in report.notes]
    if report.notes:
        lines.append("")

    header = [
        f"| verdict | benchmark | change | {ci_head} | p | threshold | baseline | current | n | reason |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]

    def table(rows: list[Row]) -> list[str]:
        return header + [
            f"| **{r.verdict}** | `{_md_code(r.name)}` | "
            + " | ".join([*_cells(r), _md_escape(r.reason)])
            + " |"
            for r in rows
        ]

    rows = report.sorted_rows()
    attention = [r for r in rows if r.verdict != "unchanged"]
    unchanged = [r for r in rows if r.verdict == "unchanged"]
    if attention:
        lines += [*table(attention), ""]
    if unchanged:
        lines += [
            "<details>",
            f"<summary>{len(unchanged)} unchanged</summary>",
            "",
            *table(unchanged),
            "",
            "</details>",
            "",
        ]
    if report.why:
        lines += [*report.why, ""]
    return "\n".join(lines)


def _level(confidence: float) -> str:
    """98% as ``98%``, 99.5% as ``99.5%`` (never rounded up to 100%)."""
    whole = f"{confidence:.0%}"
    return whole if abs(confidence * 100 - round(confidence * 100)) < 1e-9 else f"{confidence:.1%}"


def _gate_description(settings: dict[str, Any]) -> str:
    if not settings:
        return ""
    if settings.get("unit") == "process":  # perfgate ab: perfgate.gate.ab_report
        return (
            f"Each side is measured in worker processes ({settings['processes']} a side at "
            f"the looks, {settings['rounds_per_process']} rounds each); a process's level is "
            f"the {settings['trim']:.0%}-trimmed mean of its rounds. Student's t over the "
            f"processes' log levels gives the CI of the change, two-sided at 1 - 2 × "
            f"{settings['alpha']:g} / {settings['looks']} looks: a regression when it lies above "
            f"+{settings['floor']:.2%}, unchanged when within ±{settings['min_effect']:.1%} "
            f"([tool.perfgate.{settings['section']}])."
        )
    looks = settings.get("looks", 1)
    level = f"p < {settings['alpha']:g}"
    if looks > 1:
        level += f" / {looks} looks"
    threshold = f"max({settings['min_effect']:.1%}, {settings['noise_factor']:g} × noise)"
    if "drift_factor" in settings:
        threshold += (
            f", or max({settings['min_effect_drift']:.1%}, {settings['drift_factor']:g} × "
            "robust run-to-run drift of its runs' medians) where the baseline pools runs"
        )
    return (
        f"A change counts when a one-sided Mann-Whitney U test gives {level} "
        f"and the bootstrap CI (two-sided at 1 - 2 × that level) of the median ratio lies "
        f"beyond {threshold}."
    )


def _settings_line(settings: dict[str, Any]) -> str:
    """Every setting the verdicts used, so that a report can be reproduced from itself."""
    if not settings:
        return ""
    return "settings: " + ", ".join(f"{k}={_setting(v)}" for k, v in settings.items())


def _setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # the spelling of pyproject.toml and the JSON
    return f"{value:g}" if isinstance(value, float) else str(value)


def _cells(row: Row) -> list[str]:
    """change, CI, p, threshold, baseline median, current median, samples a side."""
    ci = "" if row.ci_low is None else f"{_pct(row.ci_low)} … {_pct(row.ci_high)}"
    n = "/".join("-" if k is None else str(k) for k in (row.n_baseline, row.n_current))
    if row.looks is not None and row.looks > 1:
        n += f" ({row.looks} looks)"
    return [
        _pct(row.ratio),
        ci,
        "" if row.p_value is None else f"{row.p_value:.2g}",
        "" if row.threshold is None else f"±{row.threshold:.1%}",
        _time(row.baseline_median),
        _time(row.current_median),
        n,
    ]


def _pct(ratio: float | None) -> str:
    """A ratio as a signed percent change: 1.0512 -> ``+5.1%``."""
    return "" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


def _time(seconds: float | None) -> str:
    if seconds is None:
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def _finite(x: float | None) -> float | None:
    # JSON has no NaN or infinity; the stats never produce them, and this asserts so.
    if x is not None and not math.isfinite(x):
        raise ValueError(f"non-finite value {x!r} in a report row")
    return x


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _md_code(text: str) -> str:
    # Inside a table a pipe ends the cell even within backticks; GFM accepts \| there.
    return text.replace("`", "'").replace("|", "\\|")
