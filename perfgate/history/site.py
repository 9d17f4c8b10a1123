"""The history as a static HTML site (for GitHub Pages, as ``asv publish`` makes one).

``DIR/index.html`` holds the change points, the fingerprint segment starts, each benchmark's
newest median with its CI and a link to its own plot, and one overview plot per device and
timing mode; ``DIR/<device>/<mode>.png`` (and ``.svg``) are those overviews, at stable
addresses that a pull-request comment can link; ``DIR/series/*.png`` the per-benchmark plots;
``DIR/history.json`` the same data for programs (no samples). The page has no scripts and loads
nothing from outside.

The site is built in a new directory beside DIR and swapped in whole, so a reader never sees half
of a report. DIR must be absent, empty, or an earlier report (it holds :data:`MARKER`): anything
else in it is refused, never deleted.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate import atomic
from perfgate.history import plot
from perfgate.history.detect import Detection, series_of
from perfgate.history.store import Row
from perfgate.refusal import Refusal

MARKER = ".perfgate-history-report"


class SiteError(Refusal, ValueError):
    """An output directory that cannot take the report; one line."""


def check_out_dir(out: Path, inputs: Sequence[Path] = ()) -> None:
    """Refuse an ``out`` that is a file, holds anything but an earlier report, or holds an input."""
    if out.exists() and not out.is_dir():
        raise SiteError(f"--out {out}: is a file, expected a directory for the report")
    resolved = out.resolve()
    for p in inputs:
        if resolved == p.resolve() or resolved in p.resolve().parents:
            raise SiteError(f"--out {out}: holds the input {p}; the report never replaces an input")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise SiteError(
            f"--out {out}: a non-empty directory that is not an earlier history report "
            f"(no {MARKER}); give a new or empty directory"
        )


def write_site(
    out: str | os.PathLike[str],
    rows: Sequence[Row],
    detection: Detection,
    *,
    store: str,
    inputs: Sequence[Path] = (),
) -> Path:
    """Build the report of ``rows`` into ``out``; returns the index page."""
    out = Path(out)
    check_out_dir(out, inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".new"))
    try:
        _build(stage, rows, detection, store)
        _swap(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return out / "index.html"


def _swap(stage: Path, out: Path) -> None:
    os.chmod(stage, 0o755)  # mkdtemp makes it 0700; Pages and other users read it
    if not out.exists():
        os.replace(stage, out)
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
    os.rmdir(old)
    os.replace(out, old)
    os.replace(stage, out)
    shutil.rmtree(old, ignore_errors=True)


def slug(text: str) -> str:
    """A file name for ``text``: readable, and unique by a short digest."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", text.rpartition("::")[2] or text).strip("-")
    return f"{readable[:60]}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _build(stage: Path, rows: Sequence[Row], detection: Detection, store: str) -> None:
    panels: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        panels.setdefault((r.device_key, r.mode), []).append(r)
    overviews = []
    for (device, mode), panel in panels.items():
        fig = plot.overview(panel, detection)
        for fmt in ("png", "svg"):
            rel = f"{slug_part(device)}/{slug_part(mode)}.{fmt}"
            atomic.write_bytes(stage / rel, plot.render(fig, fmt))
        overviews.append((device, mode, f"{slug_part(device)}/{slug_part(mode)}"))
    series_links: dict[tuple[str, str, str], str] = {}
    for series in series_of(rows):
        first = series[0]
        rel = f"series/{slug(f'{first.device_key} {first.mode} {first.benchmark}')}.png"
        atomic.write_bytes(stage / rel, plot.render(plot.series_figure(series, detection), "png"))
        series_links[(first.device_key, first.mode, first.benchmark)] = rel
    generated = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    atomic.write_text(
        stage / "index.html", _page(rows, detection, overviews, series_links, store, generated)
    )
    atomic.write_json(stage / "history.json", _data(rows, detection, generated))
    atomic.write_text(stage / MARKER, "written by python -m perfgate history report\n")


def slug_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "_"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3f}"


def _page(rows, detection: Detection, overviews, links, store: str, generated: str) -> str:
    e = html.escape
    runs = {r.run_id for r in rows}
    alarms = detection.alarms
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>perfgate history</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>perfgate history</h1>",
        f'<p class="meta">{len(runs)} runs, {detection.series} series, from <code>{e(store)}</code>;'
        f" generated {e(generated)}.</p>",
    ]
    if alarms:
        parts.append(
            f'<p class="alarm">{len(alarms)} slower change{"s" * (len(alarms) != 1)} in the newest '
            "fingerprint segment (<code>history detect</code> exits 1).</p>"
        )
    else:
        parts.append('<p class="ok">No slower change in the newest fingerprint segment.</p>')
    parts.append("<h2>Change points</h2>")
    if detection.changes:
        parts.append(
            "<table><thead><tr><th>benchmark</th><th>device, mode</th><th>first commit after</th>"
            "<th>last commit before</th><th>before (µs)</th><th>after (µs)</th><th>change</th>"
            "<th>runs before / after</th><th>p</th><th>alarm</th></tr></thead><tbody>"
        )
        for c in sorted(detection.changes, key=lambda c: (not c.alarm, -abs(c.change))):
            link = links.get((c.device_key, c.mode, c.benchmark))
            name = f'<a href="{e(link)}">{e(c.benchmark)}</a>' if link else e(c.benchmark)
            cls = "slower" if c.change > 0 else "faster"
            parts.append(
                f'<tr class="{cls}"><td>{name}</td><td>{e(c.device_key)}, {e(c.mode)}</td>'
                f"<td><code>{e(c.commit[:12])}</code></td><td><code>{e(c.previous_commit[:12])}"
                f"</code></td><td>{_us(c.before)}</td><td>{_us(c.after)}</td>"
                f"<td>{c.change:+.2%}</td><td>{c.runs_before} / {c.runs_after}</td>"
                f"<td>{c.p_value:.2g}</td><td>{'yes' if c.alarm else ''}</td></tr>"
            )
        parts.append("</tbody></table>")
    else:
        parts.append("<p>None found.</p>")
    parts.append("<h2>Fingerprint segments</h2>")
    starts = _distinct_starts(detection)
    if starts:
        parts.append(
            "<p>Runs after a change of driver, runtime, torch, triton or GPU settings start a new "
            "segment; times are never compared across one.</p><table><thead><tr><th>device, mode"
            "</th><th>first commit</th><th>what changed</th><th>series</th></tr></thead><tbody>"
        )
        for (device, mode, commit, diff), count in starts.items():
            parts.append(
                f"<tr><td>{e(device)}, {e(mode)}</td><td><code>{e(commit[:12])}</code></td>"
                f"<td>{e(diff)}</td><td>{count}</td></tr>"
            )
        parts.append("</tbody></table>")
    else:
        parts.append("<p>One segment per series: the fingerprint never changed.</p>")
    for device, mode, base in overviews:
        parts.append(
            f"<h2>{e(device)}, {e(mode)} mode</h2>"
            f'<p><a href="{e(base)}.svg"><img src="{e(base)}.png" alt="history of {e(device)}, '
            f'{e(mode)} mode" width="1320"></a></p>'
        )
    parts.append(
        "<h2>Benchmarks</h2><table><thead><tr><th>benchmark</th><th>device, mode</th><th>runs"
        "</th><th>newest commit</th><th>median (µs)</th><th>95% CI (µs)</th><th>rounds</th>"
        "</tr></thead><tbody>"
    )
    for series in series_of(rows):
        r = series[-1]
        link = links[(r.device_key, r.mode, r.benchmark)]
        parts.append(
            f'<tr><td><a href="{e(link)}">{e(r.benchmark)}</a></td><td>{e(r.device_key)}, '
            f"{e(r.mode)}</td><td>{len(series)}</td><td><code>{e(r.commit[:12])}</code></td>"
            f"<td>{_us(r.median)}</td><td>{_us(r.ci_low)} – {_us(r.ci_high)}</td>"
            f"<td>{r.rounds}</td></tr>"
        )
    parts.append("</tbody></table>")
    parts.append('<p class="meta">Data: <a href="history.json">history.json</a>.</p></body></html>')
    return "\n".join(parts) + "\n"


def _distinct_starts(detection: Detection) -> dict[tuple[str, str, str, str], int]:
    out: dict[tuple[str, str, str, str], int] = {}
    for s in detection.segment_starts:
        key = (s.device_key, s.mode, s.commit, s.difference)
        out[key] = out.get(key, 0) + 1
    return out


def _data(rows: Sequence[Row], detection: Detection, generated: str) -> dict[str, Any]:
    return {
        "generated": generated,
        "rows": [
            {
                "device_key": r.device_key,
                "mode": r.mode,
                "benchmark": r.benchmark,
                "commit": r.commit,
                "commit_time": r.commit_time,
                "run_time": r.run_time,
                "branch": r.branch,
                "segment": r.segment,
                "median": r.median,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "rounds": r.rounds,
            }
            for r in rows
        ],
        "changes": [c.to_json() for c in detection.changes],
        "segment_starts": [
            {
                "device_key": s.device_key,
                "mode": s.mode,
                "benchmark": s.benchmark,
                "commit": s.commit,
                "difference": s.difference,
            }
            for s in detection.segment_starts
        ],
    }


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:1400px;padding:0 1rem;color:#222}
h1{margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}
thead th{background:#f4f4f4}
tr.slower td:nth-child(7){color:#c62828;font-weight:bold}
tr.faster td:nth-child(7){color:#2e7d32;font-weight:bold}
.alarm{background:#fdecea;border-left:4px solid #c62828;padding:.5rem}
.ok{background:#edf7ed;border-left:4px solid #2e7d32;padding:.5rem}
.meta{color:#666}img{max-width:100%;height:auto}code{font-size:.9em}
"""
