"""The history as pictures (matplotlib, no display needed): PNG or SVG by the file's suffix.

- :func:`overview`: one panel per device and timing mode; every benchmark's medians over its
  runs in commit order, relative to its first run, with the CI of each median as error bars; the
  ranked shapes' geometric mean (the leaderboard's score) as its own thick line; change points
  marked with their size; fingerprint segment starts as dashed lines naming what changed.
- :func:`series_figure`: one benchmark in its own unit (µs), with the level of each stretch
  between change points drawn across it.
"""

from __future__ import annotations

import io
import math
import os
import statistics
from collections.abc import Iterable, Sequence
from itertools import pairwise
from pathlib import Path

from perfgate import atomic
from perfgate.history.detect import Detection, series_of
from perfgate.history.store import Row

FORMATS = {".png": "png", ".svg": "svg"}
SLOWER, FASTER, SCORE = "#c62828", "#2e7d32", "black"


def ranked_ids() -> frozenset[str]:
    from kernels.shapes import LEADERBOARD

    return frozenset(s.id for s in LEADERBOARD)


def is_ranked(row: Row) -> bool:
    """A benchmark of the six ranked shapes, in the ``leaderboard`` group (the score's terms)."""
    name = row.benchmark
    shape = name[name.rfind("[") + 1 : -1] if name.endswith("]") else ""
    return row.group == "leaderboard" and shape in ranked_ids()


def score(rows: Iterable[Row]) -> list[tuple[int, float]]:
    """(run id, geometric mean of the ranked shapes' medians) for each run that holds all six."""
    need = len(ranked_ids())
    by_run: dict[int, list[float]] = {}
    for r in rows:
        if is_ranked(r):
            by_run.setdefault(r.run_id, []).append(r.median)
    return [
        (run, math.exp(sum(map(math.log, ms)) / len(ms)))
        for run, ms in by_run.items()
        if len(ms) == need
    ]


def run_order(rows: Iterable[Row]) -> dict[int, int]:
    """Each run's position on the x axis: commit order, as the store orders a series."""
    runs = {r.run_id: (r.commit_time or r.run_time or "", r.run_time or "", r.run_id) for r in rows}
    return {run: x for x, run in enumerate(sorted(runs, key=runs.__getitem__))}


def format_for(path: str | os.PathLike[str]) -> str:
    """``png`` or ``svg`` from the suffix; ValueError for anything else."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"--out {path}: expected a .png or .svg file name")
    return FORMATS[suffix]


def overview(rows: Sequence[Row], detection: Detection, *, title: str = "perfgate history"):
    """The overview figure of ``rows`` (at least one)."""
    from matplotlib.figure import Figure  # no pyplot: no display, no global state

    panels: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        panels.setdefault((r.device_key, r.mode), []).append(r)
    if not panels:
        raise ValueError("nothing to plot: no rows")
    fig = Figure(figsize=(12, 4.6 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, ((device, mode), panel) in zip(axes, panels.items(), strict=True):
        _overview_panel(ax, panel, detection, f"{title}: {device}, {mode} mode")
    return fig


def _overview_panel(ax, rows: list[Row], detection: Detection, title: str) -> None:
    xs = run_order(rows)
    labels = {xs[r.run_id]: r.commit[:7] for r in rows}
    many = len(series_of(rows)) > 12
    for series in series_of(rows):
        ref = series[0].median
        x = [xs[r.run_id] for r in series]
        y = [r.median / ref for r in series]
        err = [
            [(r.median - r.ci_low) / ref for r in series],
            [(r.ci_high - r.median) / ref for r in series],
        ]
        ax.errorbar(
            x,
            y,
            yerr=err,
            marker="o",
            markersize=2.5,
            linewidth=0.9,
            capsize=1.5,
            alpha=0.85,
            label=None if many else _short(series[0].benchmark),
        )
        key = (series[0].device_key, series[0].mode, series[0].benchmark)
        at = {r.run_id: r.median / ref for r in series}
        for c in detection.changes:
            if (c.device_key, c.mode, c.benchmark) == key and c.run_id in at:
                _mark(ax, xs[c.run_id], at[c.run_id], c.change)
    points = score(rows)
    if points:
        ref = points[0][1]
        pts = sorted((xs[run], value / ref) for run, value in points)
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            color=SCORE,
            linewidth=2.6,
            zorder=5,
            label="score: geometric mean of the ranked shapes",
        )
    _segment_lines(ax, detection, xs, {(r.device_key, r.mode) for r in rows})
    ax.axhline(1.0, color="grey", linewidth=0.6)
    ax.set_title(title)
    ax.set_ylabel("median / the series' first run (lower is faster)")
    _commit_axis(ax, labels)
    if points or not many:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def series_figure(series: Sequence[Row], detection: Detection):
    """One benchmark's history in µs (``series``: one device, mode and benchmark)."""
    from matplotlib.figure import Figure  # no pyplot: no display, no global state

    if not series:
        raise ValueError("nothing to plot: no rows")
    first = series[0]
    key = (first.device_key, first.mode, first.benchmark)
    xs = run_order(series)
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = fig.subplots()
    x = [xs[r.run_id] for r in series]
    us = [r.median * 1e6 for r in series]
    err = [
        [(r.median - r.ci_low) * 1e6 for r in series],
        [(r.ci_high - r.median) * 1e6 for r in series],
    ]
    ax.errorbar(x, us, yerr=err, marker="o", markersize=3, linewidth=0.9, capsize=2)
    changes = [c for c in detection.changes if (c.device_key, c.mode, c.benchmark) == key]
    cut_x = [xs[c.run_id] for c in changes if c.run_id in xs]
    starts = [
        xs[s.run_id]
        for s in detection.segment_starts
        if (s.device_key, s.mode, s.benchmark) == key and s.run_id in xs
    ]
    bounds = sorted({0, *cut_x, *starts, len(xs)})
    for lo, hi in pairwise(bounds):
        level = [u for xi, u in zip(x, us, strict=True) if lo <= xi < hi]
        if level:
            mid = statistics.median(level)
            ax.hlines(mid, lo - 0.4, hi - 0.6, color="grey", linewidth=2, alpha=0.6)
    for c in changes:
        if c.run_id in xs:
            _mark(ax, xs[c.run_id], c.after * 1e6, c.change)
    _segment_lines(ax, detection, xs, {(first.device_key, first.mode)}, benchmark=first.benchmark)
    ax.set_title(f"{_short(first.benchmark)} ({first.device_key}, {first.mode})", fontsize=9)
    ax.set_ylabel("median (µs)")
    _commit_axis(ax, {xs[r.run_id]: r.commit[:7] for r in series})
    return fig


def _mark(ax, x: float, y: float, change: float) -> None:
    color = SLOWER if change > 0 else FASTER
    ax.scatter([x], [y], marker="v" if change > 0 else "^", s=90, color=color, zorder=6)
    ax.annotate(
        f"{change:+.1%}",
        (x, y),
        textcoords="offset points",
        xytext=(4, 8),
        color=color,
        fontsize=8,
        fontweight="bold",
    )


def _segment_lines(ax, detection, xs, panels, *, benchmark: str | None = None) -> None:
    seen: dict[int, str] = {}
    for s in detection.segment_starts:
        here = (s.device_key, s.mode) in panels and s.run_id in xs
        if here and (benchmark is None or s.benchmark == benchmark):
            seen.setdefault(xs[s.run_id], s.difference)
    for x, text in seen.items():
        ax.axvline(x - 0.5, color="grey", linestyle="--", linewidth=1)
        ax.annotate(
            f"new fingerprint: {text}",
            (x - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -10),
            textcoords="offset points",
            fontsize=7,
            color="dimgrey",
        )


def _commit_axis(ax, labels: dict[int, str]) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=14, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: labels.get(round(v), "")))
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.set_xlabel("commit (runs in commit order)")
    ax.grid(alpha=0.25)


def _short(benchmark: str) -> str:
    return benchmark.rpartition("::")[2] or benchmark


def render(fig, fmt: str) -> bytes:
    """The figure as PNG or SVG bytes."""
    import matplotlib

    buf = io.BytesIO()
    # SVG: no date in the metadata, so the same history gives the same file; text stays text
    # (searchable, smaller) instead of glyph outlines
    meta = {"Date": None} if fmt == "svg" else {}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "perfgate"}):
        fig.savefig(buf, format=fmt, dpi=110, metadata=meta)
    return buf.getvalue()


def save(fig, path: str | os.PathLike[str]) -> None:
    """Write ``fig`` to ``path`` (PNG or SVG by its suffix), atomically."""
    atomic.write_bytes(path, render(fig, format_for(path)))
