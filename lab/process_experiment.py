"""The power experiment of the process-level A/B (``python -m lab experiment``).

A **verdict** is what ``perfgate ab`` does once, with both sides this checkout: fresh worker
processes a side at every look (A and B, started for this verdict only, so the null compares
processes started afresh per side), the looks of ``[tool.perfgate.ab_<mode>]``, every
benchmark of the selection judged by :func:`perfgate.gate.process_ab.judge`. A measures the plain
kernels; B measures the plain kernels and, per level, the same calls with an injected slowdown:

- ``sleep`` (the default): a device sleep after the calls, its cycles found by the closed loop
  of :mod:`lab.inject` in the first B worker that prepares the case and reused by every later
  one (:mod:`lab.variants`, which the B workers take through ``PERFGATE_VARIANTS``); each verdict's *measured size* is B's
  injected against B's plain processes, ``exp(mean(log level_v - log level_plain)) - 1``;
- ``factor``: no injected stream; B's plain rounds x ``(1 + level)``, an exact size. It tests
  the statistics on real noise without the injection's own error (the closed loop cannot reach
  1% where one sleep node alone adds more: docs/ab-process-level.md).

Each (verdict, benchmark, level) is one judgement: level 0 (B plain against A plain) counts the
false alarms. A benchmark is measured at a look while any of its levels is undecided, and each
level is judged on the processes of the looks it would have seen alone (those up to the look
that decided it), so every row is the gate's own behaviour.
"""

from __future__ import annotations

import io
import json
import math
import re
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate import atomic
from perfgate.gate.paths import REPO
from perfgate.measure import interleave
from perfgate.measure.ab import SideSpec, WorkerPool, measure_look, next_wave
from perfgate.measure.worker import PLAIN, variant_name
from perfgate.refusal import Refusal
from perfgate.variants import VARIANTS_ENV

INJECTIONS = ("sleep", "factor")
DEFAULT_LEVELS = (0.03, 0.05, 0.10)
# A verdict's measured size within this fraction of its level counts as "at the level".
SIZE_BAND = 0.15
# The round-level design (one worker a side, every round a sample) was retired after this
# commit; its samples files (keys s<session>|<case>|t<trial>|...) are re-analysed there.
ROUND_DESIGN_LAST = "76c1929"
# the provider of the B workers' injected variants (perfgate.variants)
VARIANTS = "lab.variants"


class ExperimentError(Refusal, ValueError):
    """An option or an input file of the experiment that cannot be used; one line naming it."""


@dataclass
class VerdictTrial:
    """One benchmark in one verdict: every process's rounds, and the look of each process
    (A's i-th and B's i-th process were started and measured together)."""

    verdict: int
    case: str
    a: list[list[float]]
    b: dict[str, list[list[float]]] = field(default_factory=dict)  # variant -> processes
    looks: list[int] = field(default_factory=list)


# -- judging (pure: tested on the CPU with synthetic processes) ---------------------------------
def head_processes(trial: VerdictTrial, variant: str, injection: str) -> list[list[float]]:
    """B's processes of ``variant``: measured, or with ``factor`` B's plain x (1 + level)."""
    if variant == PLAIN or injection == "sleep":
        return trial.b[variant]
    scale = 1 + float(variant)
    return [[x * scale for x in p] for p in trial.b[PLAIN]]


def judge_trial(trial: VerdictTrial, variant: str, design, injection: str):
    """(result, look) of one level: the first look that decides it, on the processes of the
    looks up to it; the last result when the recording ends undecided."""
    from perfgate.gate.process_ab import judge
    from perfgate.gate.stats import INCONCLUSIVE

    head = head_processes(trial, variant, injection)
    result, judged = None, 0
    for look in range(1, design.looks + 1):
        if look not in trial.looks:
            break  # not measured at this look (the recording ran out)
        keep = [i for i, k in enumerate(trial.looks) if k <= look]
        a = [trial.a[i] for i in keep]
        b = [head[i] for i in keep]
        result, judged = judge(a, b, design, look=look), look
        if result.verdict != INCONCLUSIVE:
            break
    return result, judged


def measured_size(trial: VerdictTrial, variant: str, injection: str, trim: float) -> float:
    """The slowdown the verdict's B processes show: injected against plain, per process."""
    import numpy as np

    from perfgate.gate.process_ab import process_levels

    plain = trial.b[PLAIN]
    head = head_processes(trial, variant, injection)
    diffs = [
        float(process_levels(h, trim) - process_levels(p, trim))
        for h, p in zip(head, plain, strict=True)
    ]
    return float(math.expm1(np.mean(diffs)))


def judgements(trials: list[VerdictTrial], design, levels, injection: str) -> list[dict]:
    out = []
    for trial in trials:
        for v in [PLAIN, *(variant_name(lv) for lv in levels)]:
            if injection == "sleep" and v not in trial.b:
                continue
            result, look = judge_trial(trial, v, design, injection)
            out.append(
                {
                    "verdict_index": trial.verdict,
                    "case": trial.case,
                    "variant": v,
                    "verdict": result.verdict if result else "inconclusive",
                    "look": look,
                    "processes": 0 if result is None else result.n_base,
                    "ratio": None if result is None else result.ratio,
                    "ci_low": None if result is None else result.ci_low,
                    "ci_high": None if result is None else result.ci_high,
                    "process_sd": None if result is None else result.noise,
                    "true_size": None
                    if v == PLAIN
                    else measured_size(trial, v, injection, design.trim),
                }
            )
    return out


def spreads(trials: list[VerdictTrial], trim: float) -> dict[str, dict[str, float]]:
    """Per benchmark: the SD of the per-process log levels within a verdict and side (pooled
    over A plain and B plain of every verdict), the part of it the rounds alone explain
    (noise / sqrt(rounds)), and the median robust round noise: what the H200 model of
    docs/ab-process-level.md assumes, measured."""
    import numpy as np

    from perfgate.gate.process_ab import process_levels

    out = {}
    for case in dict.fromkeys(t.case for t in trials):
        ss, df, noise, lengths = 0.0, 0, [], []
        for t in (t for t in trials if t.case == case):
            for procs in (t.a, t.b[PLAIN]):
                for n in sorted({len(p) for p in procs}):  # processes of one length at a time
                    x = np.array([p for p in procs if len(p) == n])
                    med = np.median(x, axis=1)
                    noise += list(1.4826 * np.median(np.abs(x - med[:, None]), axis=1) / med)
                    lengths += [n] * len(x)
                if len(procs) >= 2:
                    lv = np.array([process_levels(p, trim) for p in procs])
                    ss, df = ss + float(((lv - lv.mean()) ** 2).sum()), df + len(lv) - 1
        round_noise = float(np.median(noise)) if noise else float("nan")
        out[case] = {
            "process_sd": math.sqrt(ss / df) if df else float("nan"),
            "round_noise": round_noise,
            "rounds_share": round_noise / math.sqrt(float(np.median(lengths)))
            if lengths
            else float("nan"),
        }
    return out


def level_text(variant: str) -> str:
    """An injected level as it was given, in percent (``0.0075`` is ``0.75%``, not ``1%``)."""
    return f"{float(variant) * 100:g}%"


def size_band(size: float, level: float) -> str:
    """Where a measured size lies against its level: ``below``, ``at`` or ``above`` the band
    of +-``SIZE_BAND`` (relative) around it."""
    if size < level * (1 - SIZE_BAND):
        return "below"
    if size > level * (1 + SIZE_BAND):
        return "above"
    return "at"


def flagged(j: dict) -> bool:
    """A regression; at level 0 an improvement is a false alarm too."""
    return j["verdict"] == "regression" or (j["variant"] == PLAIN and j["verdict"] == "improvement")


def interval(k: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of a rate k/n."""
    from scipy.stats import binomtest

    if n == 0:
        return 0.0, 1.0
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def summarise(trials, design, levels, injection: str, meta: dict) -> dict[str, Any]:
    records = judgements(trials, design, levels, injection)
    rows, bands = [], []
    for v in [PLAIN, *(variant_name(lv) for lv in levels)]:
        mine = [j for j in records if j["variant"] == v]
        c = Counter(j["verdict"] for j in mine) + Counter(f"looks:{j['look']}" for j in mine)
        n, hits = len(mine), sum(flagged(j) for j in mine)
        sizes = sorted(j["true_size"] for j in mine if j["true_size"] is not None)
        rows.append(
            {
                "variant": v,
                "n": n,
                "flagged": hits,
                "rate_ci95": interval(hits, n),
                "counts": dict(c),
                "verdicts": len({j["verdict_index"] for j in mine}),
                "true_size": None
                if not sizes
                else {"min": sizes[0], "median": sizes[len(sizes) // 2], "max": sizes[-1]},
            }
        )
        if v == PLAIN:
            continue
        for band in ("below", "at", "above"):
            inside = [j for j in mine if size_band(j["true_size"], float(v)) == band]
            k = sum(flagged(j) for j in inside)
            bands.append({"variant": v, "band": band, "n": len(inside), "flagged": k,
                          "rate_ci95": interval(k, len(inside))})  # fmt: skip
    return {
        "meta": meta,
        "rows": rows,
        "by_true_size": bands,
        "size_band": SIZE_BAND,
        "spreads": spreads(trials, design.trim),
        "judgements": records,
    }


def render(summary: dict[str, Any]) -> str:
    meta = summary["meta"]
    d = meta["design"]
    lines = [
        f"# lab experiment: power and false alarms (process-level A/B, {d['mode']} mode)",
        "",
        f"{meta['device']}; {meta['verdicts']} verdicts (fresh workers a side each) x "
        f"{meta['benchmarks']} benchmarks; looks at {'/'.join(map(str, d['processes']))} "
        f"processes a side x {d['rounds']} rounds; CI within ±{d['min_effect']:.1%} is unchanged, "
        f"above +{d['floor']:.2%} a regression, alpha {d['alpha']:g} / {len(d['processes'])} "
        f"looks; injection: {d['injection']}; `{meta['command']}`",
        "",
        "| mode | injected | measured size (min / median / max) | flagged | rate (95% CI) | "
        "verdicts | outcomes |",
        "| --- | ---: | --- | ---: | --- | ---: | --- |",
    ]
    for r in summary["rows"]:
        what = "none (false alarms)" if r["variant"] == PLAIN else level_text(r["variant"])
        ts = r["true_size"]
        size = "" if ts is None else " / ".join(f"{ts[k]:+.2%}" for k in ("min", "median", "max"))
        lo, hi = r["rate_ci95"]
        rate = "" if not r["n"] else f"{r['flagged'] / r['n']:.1%} ({lo:.1%}-{hi:.1%})"
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(r["counts"].items()))
        lines.append(f"| ab {d['mode']} | {what} | {size} | {r['flagged']}/{r['n']} | {rate} | "
                     f"{r['verdicts']} | {outcomes} |")  # fmt: skip
    if summary["by_true_size"]:
        lines += [
            "",
            f"Detection by each judgement's measured size: below, at (within "
            f"±{summary['size_band']:.0%} of the level) or above it.",
            "",
            "| injected | below | at the level | above |",
            "| ---: | --- | --- | --- |",
        ]
        for v in dict.fromkeys(b["variant"] for b in summary["by_true_size"]):
            cells = []
            for band in ("below", "at", "above"):
                b = next(
                    x for x in summary["by_true_size"] if (x["variant"], x["band"]) == (v, band)
                )
                lo, hi = b["rate_ci95"]
                cells.append(
                    f"{b['flagged']}/{b['n']}" + (f" ({lo:.1%}-{hi:.1%})" if b["n"] else "")
                )
            lines.append(f"| {level_text(v)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Per benchmark, measured: the spread of the workers' levels within a verdict and side "
        "(the unit the verdict replicates over), the part of it the rounds' own noise explains "
        "(noise / sqrt(rounds)), and the robust round noise.",
        "",
        "| benchmark | process SD | of which rounds, about | round noise |",
        "| --- | ---: | ---: | ---: |",
    ]
    for case, s in summary["spreads"].items():
        lines.append(f"| {case} | {s['process_sd']:.3%} | {s['rounds_share']:.3%} | "
                     f"{s['round_noise']:.2%} |")  # fmt: skip
    secs = meta.get("verdict_seconds") or []
    if secs:
        lines += [
            "",
            f"GPU time: {len(secs)} verdicts in {sum(secs):.0f} s, {min(secs):.0f}-{max(secs):.0f}"
            f" s each (median {sorted(secs)[len(secs) // 2]:.0f} s"
            + (
                "; each also measures the injected streams, which a production verdict does not)."
                if d["injection"] == "sleep"
                else ")."
            ),
        ]
    if meta.get("calibration"):
        lines += ["", _render_calibration(meta["calibration"])]
    return "\n".join(lines) + "\n"


def _render_calibration(cal: dict[str, dict]) -> str:
    """One line per level: how the closed loop ended over every verdict and case."""
    import numpy as np

    per_level: dict[str, list[dict]] = {}
    for info in cal.values():
        for v, c in info.items():
            per_level.setdefault(v, []).append(c)
    parts = []
    for v, cs in sorted(per_level.items(), key=lambda kv: float(kv[0])):
        achieved = np.array([c["achieved"] for c in cs])
        steps = [len(c["steps"]) for c in cs]
        parts.append(
            f"{level_text(v)}: {sum(c['converged'] for c in cs)}/{len(cs)} converged, "
            f"{sum(c['floor_limited'] for c in cs)} floor-limited, prepare-time size "
            f"{achieved.min():+.2%}..{achieved.max():+.2%}, steps {min(steps)}-{max(steps)}"
        )
    return "Calibration (closed loop, per session and case): " + "; ".join(parts) + "."


# -- measuring (GPU) ---------------------------------------------------------------------------
def run_verdict(
    index: int,
    selected: list[dict],
    levels,
    design,
    injection: str,
    start,
    *,
    cycles: dict[str, dict[str, int]],
    calibration: dict,
    timings: list | None = None,
) -> list[VerdictTrial]:
    """One verdict: fresh A and B workers at every look, the pending benchmarks of any level
    measured, each level judged as the gate would judge it alone."""
    injected = tuple(variant_name(lv) for lv in levels)
    variants = [PLAIN, *injected]
    a = SideSpec("A", REPO)
    b = SideSpec("B", REPO, {VARIANTS_ENV: VARIANTS}, tuple(variants), tuple(levels))
    if injection == "factor":
        b = SideSpec("B", REPO)
    trials = {c["name"]: VerdictTrial(index, c["name"], []) for c in selected}
    pending = {c["name"]: list(variants) for c in selected}

    def on_prepared(spec, worker, case: str, answer: dict) -> None:
        info = (answer.get("cases") or {}).get(case) or {}
        got = {v: info[v] for v in injected if isinstance(info.get(v), dict)}
        fresh = {v: x for v, x in got.items() if "calibration" in x}
        if fresh:
            cycles.setdefault(case, {}).update({v: int(x["cycles"]) for v, x in fresh.items()})
            calibration[f"v{index}|{case}"] = {v: x["calibration"] for v, x in fresh.items()}

    store: dict = {}
    measured = 0
    pool = WorkerPool(start, [a, b])
    try:
        for look, (processes, rounds) in enumerate(design.schedule(), 1):
            todo = [c for c in selected if pending[c["name"]]]
            if not todo:
                break
            spent: dict[str, float] = {}
            pool.plan(processes, next_wave(design, processes))
            measure_look([a, b], processes - measured, todo, rounds, store, start=pool,
                         first=measured, cycles=cycles, on_prepared=on_prepared, timings=spent)  # fmt: skip
            if timings is not None:
                timings.append({"verdict": index, "look": look, "pending": len(todo), **spent})
            for c in todo:
                t = trials[c["name"]]
                t.looks += [look] * (processes - measured)
                t.a = store["A"][c["name"]][PLAIN]
                t.b = dict(store["B"][c["name"]])
                last = look == design.looks
                pending[c["name"]] = [
                    v for v in pending[c["name"]]
                    if not last and judge_trial(t, v, design, injection)[0].verdict == "inconclusive"
                ]  # fmt: skip
            measured = processes
    finally:
        pool.close()
    return list(trials.values())


def measure(args, selected, levels, design, injection: str, meta: dict, out: Path, mode: str):
    """Verdicts until ``--runs`` or the budget; samples and meta written after every verdict,
    so that a run cut short keeps what it measured."""

    def start(spec, i: int):
        return interleave.SideProcess(f"{spec.label}{i + 1}", spec.root, spec.env, mode=mode)

    trials: list[VerdictTrial] = []
    cycles: dict[str, dict[str, int]] = {}
    meta.update(calibration={}, verdict_seconds=[], looks_timings=[])
    begin, longest = time.monotonic(), 0.0
    for index in range(args.runs):
        budget = args.budget_s
        if index and budget is not None and time.monotonic() - begin + longest > budget:
            print(f"experiment: budget reached after {index} verdicts", flush=True)
            break
        t0 = time.monotonic()
        trials += run_verdict(index, selected, levels, design, injection, start, cycles=cycles,
                              calibration=meta["calibration"], timings=meta["looks_timings"])  # fmt: skip
        spent = time.monotonic() - t0
        longest = max(longest, spent)
        meta["verdict_seconds"].append(spent)
        meta.update(counts(trials))
        save(out / "samples.npz", trials)
        atomic.write_text(out / "meta.json", json.dumps(meta, indent=1) + "\n")
        print(f"experiment: verdict {index} done in {spent:.0f} s", flush=True)
    return trials


def counts(trials: list[VerdictTrial]) -> dict[str, Any]:
    return {
        "verdicts": len({t.verdict for t in trials}),
        "benchmarks": len({t.case for t in trials}),
    }


# -- the samples file ---------------------------------------------------------------------------
_KEY = re.compile(r"p\|v(\d+)\|([^|]+)\|([AB])(\d+)\|l(\d+)\|([^|]+)")
_ROUND_KEY = re.compile(r"s\d+\|[^|]+\|t\d+\|(A\|plain|B\|[^|]+)")


def save(path: Path, trials: list[VerdictTrial]) -> None:
    """Every process's rounds as one ``.npz`` (``p|v<verdict>|<case>|<side><i>|l<look>|<variant>``),
    written atomically."""
    import numpy as np

    arrays = {}
    for t in trials:
        for i, (rounds, look) in enumerate(zip(t.a, t.looks, strict=True)):
            arrays[f"p|v{t.verdict}|{t.case}|A{i}|l{look}|{PLAIN}"] = np.asarray(rounds)
        for v, procs in t.b.items():
            for i, (rounds, look) in enumerate(zip(procs, t.looks, strict=True)):
                arrays[f"p|v{t.verdict}|{t.case}|B{i}|l{look}|{v}"] = np.asarray(rounds)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic.write_bytes(path, buffer.getvalue())


def from_arrays(arrays: dict[str, Any], where: str, offset: int = 0) -> list[VerdictTrial]:
    """The trials of one file's arrays (verdict indices shifted by ``offset``, so that several
    files' verdicts stay apart); ExperimentError naming ``where`` for anything else."""
    import numpy as np

    if arrays and all(_ROUND_KEY.fullmatch(k) for k in arrays):
        raise ExperimentError(f"{where}: holds samples of the retired round-level design (one worker "
                         f"a side); perfgate at commit {ROUND_DESIGN_LAST} re-analyses them")  # fmt: skip
    found: dict[tuple[int, str], dict] = {}
    for key, values in arrays.items():
        m = _KEY.fullmatch(key)
        if m is None:
            raise ExperimentError(f"{where}: holds an array {key!r}; expected "
                             "p|v<verdict>|<case>|<A|B><i>|l<look>|<variant>")  # fmt: skip
        if values.ndim != 1 or values.size == 0 or values.dtype.kind != "f":
            raise ExperimentError(
                f"{where}: array {key!r} must be a non-empty 1-D array of seconds"
            )
        if not (np.isfinite(values).all() and (values > 0).all()):
            raise ExperimentError(
                f"{where}: array {key!r} holds samples that are not finite seconds > 0"
            )
        v, case, side, i, look, variant = m.groups()
        rec = found.setdefault((int(v) + offset, case), {"A": {}, "B": {}, "looks": {}})
        rec[side].setdefault(variant, {})[int(i)] = values.tolist()
        if rec["looks"].setdefault(int(i), int(look)) != int(look):
            raise ExperimentError(f"{where}: process {i} of v{v}|{case} is tagged with two looks")
    trials = []
    for (v, case), rec in sorted(found.items()):
        n = len(rec["looks"])
        if sorted(rec["looks"]) != list(range(n)):
            raise ExperimentError(
                f"{where}: v{v - offset}|{case} lacks some processes (0..{n - 1})"
            )
        streams = {("A", PLAIN): rec["A"].get(PLAIN, {})}
        streams.update({("B", var): procs for var, procs in rec["B"].items()})
        for (side, var), procs in streams.items():
            if sorted(procs) != list(range(n)):
                raise ExperimentError(f"{where}: v{v - offset}|{case}|{side}|{var} lacks some of its "
                                 f"{n} processes")  # fmt: skip
        if PLAIN not in rec["B"]:
            raise ExperimentError(f"{where}: v{v - offset}|{case} lacks B's plain processes")
        trials.append(
            VerdictTrial(
                v, case,
                [rec["A"][PLAIN][i] for i in range(n)],
                {var: [procs[i] for i in range(n)] for var, procs in rec["B"].items()},
                [rec["looks"][i] for i in range(n)],
            )
        )  # fmt: skip
    return trials


def load(paths: list[Path]) -> tuple[list[VerdictTrial], list[dict]]:
    """The trials of several samples files (their verdicts numbered apart) and each file's
    meta.json; ExperimentError naming the file for one that is not a process-level samples file."""
    import numpy as np

    trials: list[VerdictTrial] = []
    metas = []
    for path in paths:
        where = f"--reanalyse {path}"
        if path.is_dir():
            raise ExperimentError(
                f"{where}: is a directory, expected the samples.npz of an experiment run"
            )
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except FileNotFoundError:
            raise ExperimentError(f"{where}: no such file") from None
        except (
            OSError,
            ValueError,
            EOFError,
            zipfile.BadZipFile,
            AttributeError,
            TypeError,
        ) as exc:
            detail = " ".join(str(exc).split())
            raise ExperimentError(f"{where}: not an .npz archive written by lab experiment "
                             f"({detail})") from None  # fmt: skip
        offset = 1 + max((t.verdict for t in trials), default=-1)
        got = from_arrays(arrays, where, offset)
        if not got:
            raise ExperimentError(f"{where}: holds no samples")
        trials += got
        metas.append(load_meta(path.with_name("meta.json")))
    return trials, metas


def load_meta(path: Path) -> dict[str, Any]:
    """The ``meta.json`` beside a samples file (the measuring run's device and calibration), or
    {} where there is none; ExperimentError when it is not a JSON object."""
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ExperimentError(
            f"{path}: not a meta.json written by lab experiment ({detail})"
        ) from None
    if not isinstance(meta, dict):
        raise ExperimentError(f"{path}: expected a JSON object (an experiment's meta.json)")
    return meta


def parse_levels(text: str) -> tuple[float, ...]:
    """``--inject``'s levels; ExperimentError saying what was expected."""
    try:
        levels = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ExperimentError(
            f"--inject must be comma-separated fractions such as 0.03,0.05, got {text!r}"
        ) from None
    if not levels or any(not 0 < lv < 1 for lv in levels) or len(set(levels)) != len(levels):
        raise ExperimentError(f"--inject must list distinct fractions in (0, 1), got {text!r}")
    return levels
