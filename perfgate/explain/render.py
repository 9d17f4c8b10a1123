"""What ``perfgate explain`` prints and writes: per benchmark the two sides side by side, what
changed marked, then the ranked list of the differences that can explain the change; the gates'
"Why" sections carry the ranked list alone (:func:`why_lines`)."""

from __future__ import annotations

from typing import Any

from perfgate.explain import ranking
from perfgate.explain.explain import NOTHING, BenchmarkExplanation, Explanation
from perfgate.explain.launch_facts import CONFIG_FIELDS
from perfgate.explain.static_facts import FIELDS as STATIC_FIELDS
from perfgate.gate.host_counts import CATEGORIES

MARK = "<<"  # a changed row, in the text table; **bold** in markdown


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, list):
        return ranking._fmt(v)
    return "-" if v is None else str(v)


def rows(bx: BenchmarkExplanation) -> list[tuple[str, str, str, str]]:
    """(section, field, base, head) of every fact both sides have, in display order; a fact a
    side could not give shows its reason."""
    out: list[tuple[str, str, str, str]] = []
    base, head = bx.sides["base"], bx.sides["head"]

    def value(fact: Any, *path: str) -> Any:
        if not ranking._usable(fact):
            return "(not available)"
        for p in path:
            fact = fact.get(p) if isinstance(fact, dict) else None
        return fact

    targets = list(dict.fromkeys([*(base["targets"] or {}), *(head["targets"] or {})]))
    if not ranking._usable(base["targets"]) or not ranking._usable(head["targets"]):
        out.append(
            ("launch", "targets", _cell(value(base["targets"])), _cell(value(head["targets"])))
        )
        targets = []
    for t in targets:
        bt, ht = base["targets"].get(t, {}), head["targets"].get(t, {})
        sec = f"{t} launch"
        for f in CONFIG_FIELDS:
            out.append((sec, f, _cell(value(bt.get("launch"), "config", f)),
                        _cell(value(ht.get("launch"), "config", f))))  # fmt: skip
        for f in ("quantizer", "splits", "grid", "kernels"):
            out.append(
                (sec, f, _cell(value(bt.get("launch"), f)), _cell(value(ht.get("launch"), f)))
            )
        sec = f"{t} static (GEMM kernel)"
        for f in STATIC_FIELDS:
            out.append(
                (sec, f, _cell(value(bt.get("static"), f)), _cell(value(ht.get("static"), f)))
            )
        bi = value(bt.get("static"), "instructions")
        hi = value(ht.get("static"), "instructions")
        for m in sorted(
            set(bi if isinstance(bi, dict) else {}) | set(hi if isinstance(hi, dict) else {})
        ):
            out.append((sec, m, _cell(bi.get(m, 0) if isinstance(bi, dict) else bi),
                        _cell(hi.get(m, 0) if isinstance(hi, dict) else hi)))  # fmt: skip
    if base["host"] is not None or head["host"] is not None:
        for c in CATEGORIES:
            out.append(("host path per call", c, _cell(value(base["host"], "totals", c)),
                        _cell(value(head["host"], "totals", c))))  # fmt: skip
    if base["device"] is not None or head["device"] is not None:
        for label, fact in (("base", base["device"]), ("head", head["device"])):
            if not ranking._usable(fact):
                out.append(("device (us)", label, _cell(value(fact)), ""))
        if ranking._usable(base["device"]) and ranking._usable(head["device"]):
            bk = {k["role"]: k["median_us"] for k in base["device"]["kernels"]}
            hk = {k["role"]: k["median_us"] for k in head["device"]["kernels"]}
            for role in sorted(set(bk) | set(hk)):
                out.append(("device (us, median)", role, _cell(bk.get(role)), _cell(hk.get(role))))
            out.append(("device (us, median)", "the call", _cell(base["device"]["call_median_us"]),
                        _cell(head["device"]["call_median_us"])))  # fmt: skip
    return out


def ranked_lines(bx: BenchmarkExplanation, limit: int | None = None) -> list[str]:
    """The ranked list, numbered; ``NOTHING`` when no launch, static or host fact changed."""
    shown = bx.ranked if limit is None else bx.ranked[:limit]
    lines = [f"{i}. {d.text}" for i, d in enumerate(shown, 1)]
    if limit is not None and len(bx.ranked) > limit:
        lines.append(f"   ({len(bx.ranked) - limit} more differences: see `perfgate explain`)")
    if bx.nothing_changed:
        lines.append(
            f"- {NOTHING}" + (" (the device split above is all that moved)" if bx.ranked else "")
        )
    lines += [f"- {n}" for n in bx.notes]
    return lines


def _source_lines(expl: Explanation) -> list[str]:
    if not expl.source:
        return ["kernels/ is the same in both revisions."]
    return ["kernels/ changed: " + ", ".join(f"{c['path']} ({c['role']})" for c in expl.source)]


def text(expl: Explanation) -> str:
    out = [
        f"perfgate explain: head {expl.head_label} against base {expl.base[:12]}; targets "
        f"{', '.join(expl.targets)} (the benchmarks': {expl.own_target}); device split "
        + ("measured" if expl.device_measured else "not measured (no GPU, or --no-device)"),
        *_source_lines(expl),
    ]
    for bx in expl.benchmarks:
        table = rows(bx)
        width = [max([len(r[i]) for r in table] + [4]) for i in range(4)]
        out += [
            "",
            f"== {bx.benchmark.name}"
            + (f" (for {bx.benchmark.asked})" if bx.benchmark.asked != bx.benchmark.name else ""),
        ]
        out.append(f"{'':{width[0]}}  {'':{width[1]}}  {'base':>{width[2]}}  {'head':>{width[3]}}")
        for sec, f, b, h in table:
            mark = f"  {MARK}" if b != h else ""
            out.append(f"{sec:{width[0]}}  {f:{width[1]}}  {b:>{width[2]}}  {h:>{width[3]}}{mark}")
        out += ["", "What can explain it, likeliest first:", *ranked_lines(bx)]
    out.append(f"\n({expl.wall_s:.1f} s)")
    return "\n".join(out) + "\n"


def markdown(expl: Explanation) -> str:
    out = [
        f"## perfgate explain: `{expl.head_label}` against `{expl.base[:12]}`",
        "",
        f"Targets {', '.join(expl.targets)} (the benchmarks': {expl.own_target}); device split "
        + ("measured." if expl.device_measured else "not measured."),
        "",
        *_source_lines(expl),
        "",
    ]
    for bx in expl.benchmarks:
        out += [f"### `{bx.benchmark.name}`", "", *ranked_lines(bx), "", "<details>",
                "<summary>side by side</summary>", "", "| | | base | head |", "| --- | --- | ---: | ---: |"]  # fmt: skip
        for sec, f, b, h in rows(bx):
            if b != h:
                b, h = f"**{b}**", f"**{h}**"
            out.append(f"| {sec} | {f} | {b} | {h} |")
        out += ["", "</details>", ""]
    return "\n".join(out)


def why_lines(expl: Explanation, names: dict[str, list[str]], limit: int = 5) -> list[str]:
    """The ranked lines of each benchmark, under the report's names for it (``names``: case id
    -> the flagged benchmarks' names), for a gate's "Why" section."""
    out = []
    head = expl.head or "the working tree"
    for bx in expl.benchmarks:
        for name in names.get(bx.benchmark.name, [bx.benchmark.name]):
            out += [f"**`{name}`**", "", *ranked_lines(bx, limit), ""]
        out.append(
            f"Side by side: `python -m perfgate explain --base {expl.base[:12]} "
            + (f"--head {head[:12]} " if expl.head else "")
            + f"-k {bx.benchmark.name}`"
        )
        out.append("")
    return out


def as_json(expl: Explanation) -> dict[str, Any]:
    """The explanation as JSON: both sides' facts and the ranked differences per benchmark."""
    return {
        "base": expl.base,
        "head": expl.head,
        "targets": list(expl.targets),
        "own_target": expl.own_target,
        "device_measured": expl.device_measured,
        "source": expl.source,
        "wall_s": round(expl.wall_s, 1),
        "benchmarks": [
            {
                "name": bx.benchmark.name,
                "asked": bx.benchmark.asked,
                "shape": list(bx.benchmark.shape),
                "nothing_changed": bx.nothing_changed,
                "ranked": [
                    {
                        k: getattr(d, k)
                        for k in (
                            "tier",
                            "score",
                            "part",
                            "target",
                            "field",
                            "base",
                            "head",
                            "text",
                            "kernel",
                        )
                    }
                    for d in bx.ranked
                ],
                "notes": bx.notes,
                "sides": bx.sides,
            }
            for bx in expl.benchmarks
        ],
    }
