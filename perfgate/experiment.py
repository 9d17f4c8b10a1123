"""The power experiment: trials of injected slowdowns judged by the A/B and stored gates.

What ``python -m perfgate experiment`` measures and how it judges (its design is the command's
help: :mod:`perfgate.commands.experiment`); this module holds the trials, the judging, the
Clopper-Pearson table and the samples file.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.measure.worker import PLAIN, variant_name

DEFAULT_LEVELS = (0.03, 0.05, 0.10)
MODES_JUDGED = ("ab", "stored")
# Discarded rounds of every stream after a case is prepared: production runs a warm-up pass of
# min_samples (10) rounds per benchmark and pytest-benchmark 5 warm-up rounds before measuring.
WARMUP_ROUNDS = 20
# A trial's measured size within this fraction of its level counts as "at the level".
SIZE_BAND = 0.15


@dataclass
class Trial:
    """One trial of one benchmark in one session: every stream's samples."""

    session: int
    case: str
    index: int
    a_plain: list[float]
    b: dict[str, list[float]] = field(default_factory=dict)  # variant -> samples


# -- judging (pure: tested on the CPU with synthetic trials) -------------------------------------


def level_text(variant: str) -> str:
    """An injected level as it was given, in percent (``0.0075`` is ``0.75%``, not ``1%``)."""
    return f"{float(variant) * 100:g}%"


def judge_looks(base, cur, settings, totals: list[int], **how):
    """The adaptive verdict on recorded samples: the first look that decides, using only the
    rounds measured so far (``cur[:total]``, and ``base[:total]`` when ``base`` grows with it);
    (Result, look) or (the last Result, look) when the recording ran out first."""
    from perfgate.gate.stats import INCONCLUSIVE, compare_samples

    grows = how.pop("grows", False)
    result, judged = None, 0
    for look, total in enumerate(totals, 1):
        if len(cur) < total:
            break
        b = base[:total] if grows else base
        result, judged = compare_samples(b, cur[:total], settings, looks=len(totals), **how), look
        if result.verdict != INCONCLUSIVE:
            break
    return result, judged


def ab_verdicts(trial: Trial, settings, totals: list[int]) -> dict[str, tuple]:
    return {
        v: judge_looks(trial.a_plain, cur, settings, totals, ab=True, grows=True)
        for v, cur in trial.b.items()
    }


def stored_baseline(trials: list[Trial], session: int, case: str, rounds: int, runs: int = 3):
    """(pooled samples, drift) of a baseline as ``update-baselines`` records it: ``runs``
    independent runs, the first trial's plain A samples (``rounds`` of them) of the sessions
    after ``session`` (cyclically; fewer when fewer exist), and their robust run-to-run drift
    (None for one run: a single-run baseline)."""
    from perfgate.gate.baseline import run_drift

    first = {t.session: t for t in trials if t.case == case and t.index == 0}
    order = sorted(first)
    if session in order:
        at = order.index(session)
        order = order[at + 1 :] + order[:at]
    chosen = [first[s].a_plain[:rounds] for s in order[:runs]]
    if not chosen:
        return None, None
    import statistics

    drift = run_drift([statistics.median(r) for r in chosen]) if len(chosen) >= 2 else None
    return [x for r in chosen for x in r], drift


def stored_verdicts(
    trial: Trial, trials: list[Trial], settings, totals, runs: int = 3
) -> dict[str, tuple]:
    base, drift = stored_baseline(trials, trial.session, trial.case, totals[0], runs)
    if base is None:
        return {}
    return {v: judge_looks(base, cur, settings, totals, drift=drift) for v, cur in trial.b.items()}


def trial_sizes(trial: Trial) -> dict[str, float]:
    """Each injected variant's measured size in this trial: median(injected) / median(plain) - 1
    (B's streams, measured interleaved in one process)."""
    import numpy as np

    plain = float(np.median(trial.b[PLAIN]))
    return {v: float(np.median(xs)) / plain - 1 for v, xs in trial.b.items() if v != PLAIN}


def size_band(size: float, level: float) -> str:
    """Where a measured size lies against its level: ``below``, ``at`` or ``above`` the band
    of +-``SIZE_BAND`` (relative) around it."""
    if size < level * (1 - SIZE_BAND):
        return "below"
    if size > level * (1 + SIZE_BAND):
        return "above"
    return "at"


def true_sizes(trials: list[Trial]) -> dict[tuple[int, str], dict[str, float]]:
    """Per (session, case): each level's median(injected) / median(plain) - 1 over every trial."""
    import numpy as np

    pooled: dict[tuple[int, str], dict[str, list[float]]] = {}
    for t in trials:
        streams = pooled.setdefault((t.session, t.case), {})
        for v, xs in t.b.items():
            streams.setdefault(v, []).extend(xs)
    out = {}
    for key, streams in pooled.items():
        plain = float(np.median(streams[PLAIN]))
        out[key] = {v: float(np.median(xs)) / plain - 1 for v, xs in streams.items() if v != PLAIN}
    return out


def judgements(trials: list[Trial], settings, totals: list[int], runs: int = 3) -> list[dict]:
    """One record per trial, mode and variant: the verdict, the look, the numbers behind it and
    the trial's measured size of that variant (None for plain)."""
    out = []
    for trial in trials:
        sizes = trial_sizes(trial)
        judged = {
            "ab": ab_verdicts(trial, settings, totals),
            "stored": stored_verdicts(trial, trials, settings, totals, runs),
        }
        for mode, by_variant in judged.items():
            for v, (result, look) in by_variant.items():
                out.append(
                    {
                        "session": trial.session,
                        "case": trial.case,
                        "trial": trial.index,
                        "mode": mode,
                        "variant": v,
                        "verdict": result.verdict if result else "inconclusive",
                        "look": look,
                        "ratio": None if result is None else result.ratio,
                        "ci_low": None if result is None else result.ci_low,
                        "threshold": None if result is None else result.threshold,
                        "true_size": sizes.get(v),
                    }
                )
    return out


def tally(
    trials: list[Trial], settings, totals: list[int], runs: int = 3
) -> dict[str, dict[str, Counter]]:
    """mode -> variant -> Counter of verdicts, plus ``looks:N`` counts of decided verdicts."""
    out: dict[str, dict[str, Counter]] = {m: {} for m in MODES_JUDGED}
    for j in judgements(trials, settings, totals, runs):
        counter = out[j["mode"]].setdefault(j["variant"], Counter())
        counter[j["verdict"]] += 1
        counter[f"looks:{j['look']}"] += 1
    return out


def _flagged(j: dict) -> bool:
    """A regression; at level 0 an improvement is a false alarm too."""
    return j["verdict"] == "regression" or (j["variant"] == PLAIN and j["verdict"] == "improvement")


def interval(k: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of a rate k/n."""
    from scipy.stats import binomtest

    if n == 0:
        return 0.0, 1.0
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def summarise(
    trials: list[Trial], settings, totals, levels, meta: dict, baseline_runs: int = 3
) -> dict[str, Any]:
    records = judgements(trials, settings, totals, baseline_runs)
    sizes = true_sizes(trials)
    rows, bands = [], []
    for mode in MODES_JUDGED:
        for v in [PLAIN, *(variant_name(lv) for lv in levels)]:
            mine = [j for j in records if j["mode"] == mode and j["variant"] == v]
            c = Counter(j["verdict"] for j in mine) + Counter(f"looks:{j['look']}" for j in mine)
            n, hits = len(mine), sum(_flagged(j) for j in mine)
            measured = sorted(j["true_size"] for j in mine if j["true_size"] is not None)
            rows.append(
                {
                    "mode": mode,
                    "variant": v,
                    "n": n,
                    "flagged": hits,
                    "rate_ci95": interval(hits, n),
                    "counts": dict(c),
                    "sessions": len({j["session"] for j in mine}),
                    "true_size": None
                    if not measured
                    else {
                        "min": measured[0],
                        "median": measured[len(measured) // 2],
                        "max": measured[-1],
                    },
                }
            )
            if v == PLAIN:
                continue
            for band in ("below", "at", "above"):
                inside = [j for j in mine if size_band(j["true_size"], float(v)) == band]
                k = sum(_flagged(j) for j in inside)
                bands.append(
                    {
                        "mode": mode,
                        "variant": v,
                        "band": band,
                        "n": len(inside),
                        "flagged": k,
                        "rate_ci95": interval(k, len(inside)),
                    }
                )
    return {
        "meta": meta,
        "rows": rows,
        "by_true_size": bands,
        "true_sizes": {f"{s}|{c}": v for (s, c), v in sizes.items()},
        "judgements": records,
    }


def render(summary: dict[str, Any]) -> str:
    meta = summary["meta"]
    lines = [
        "# perfgate experiment: power and false alarms",
        "",
        f"{meta['device']}; {meta['sessions']} sessions x {meta['trials']} trials x "
        f"{meta['benchmarks']} benchmarks; looks at {meta['totals']} rounds a side; stored "
        f"baseline: {min(meta.get('baseline_runs', 3), meta['sessions'] - 1)} other sessions' "
        "runs pooled; "
        f"`{meta['command']}`",
        "",
        "| mode | injected | true size (min / median / max) | flagged | rate (95% CI) | sessions "
        "| verdicts |",
        "| --- | ---: | --- | ---: | --- | ---: | --- |",
    ]
    for r in summary["rows"]:
        what = "none (false alarms)" if r["variant"] == PLAIN else level_text(r["variant"])
        ts = r["true_size"]
        size = "" if ts is None else " / ".join(f"{ts[k]:+.2%}" for k in ("min", "median", "max"))
        lo, hi = r["rate_ci95"]
        rate = "" if not r["n"] else f"{r['flagged'] / r['n']:.1%} ({lo:.1%}-{hi:.1%})"
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(r["counts"].items()))
        lines.append(
            f"| {r['mode']} | {what} | {size} | {r['flagged']}/{r['n']} | {rate} | "
            f"{r.get('sessions', '')} | {verdicts} |"
        )
    bands = summary.get("by_true_size") or []
    if bands:
        lines += [
            "",
            f"Detection by each trial's measured size: below, at (within ±{SIZE_BAND:.0%} of the "
            "level) or above it.",
            "",
            "| mode | injected | below | at the level | above |",
            "| --- | ---: | --- | --- | --- |",
        ]
        for mode in MODES_JUDGED:
            for v in dict.fromkeys(b["variant"] for b in bands if b["mode"] == mode):
                cells = []
                for band in ("below", "at", "above"):
                    b = next(x for x in bands if (x["mode"], x["variant"], x["band"]) ==
                             (mode, v, band))  # fmt: skip
                    lo, hi = b["rate_ci95"]
                    cells.append(
                        f"{b['flagged']}/{b['n']}" + (f" ({lo:.1%}-{hi:.1%})" if b["n"] else "")
                    )
                lines.append(f"| {mode} | {level_text(v)} | " + " | ".join(cells) + " |")
    cal = meta.get("calibration")
    if cal:
        lines += ["", _render_calibration(cal)]
    return "\n".join(lines) + "\n"


def _render_calibration(cal: dict[str, dict]) -> str:
    """One line per level: how the closed loop ended over every session and case."""
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
def run_session(
    session: int,
    selected,
    levels,
    settings,
    totals,
    trials: int,
    calibration: dict | None = None,
) -> list[Trial]:
    """One session's trials. ``calibration``, when given, receives B's closed-loop calibration
    of every level per case (``"s<session>|<case>" -> {variant: Calibration.as_dict()}``)."""
    from perfgate.gate.paths import REPO
    from perfgate.measure import adaptive, interleave

    variants = [PLAIN, *(variant_name(lv) for lv in levels)]
    out: list[Trial] = []
    with contextlib.ExitStack() as stack:
        a = interleave.SideProcess("A", REPO)
        stack.callback(a.close)
        b = interleave.SideProcess("B", REPO)
        stack.callback(b.close)
        for spec in selected:  # one case at a time, as perfgate ab and the pytest harness do
            case = spec["name"]
            a.ask({"op": "prepare", "cases": [spec], "levels": []})
            info = b.ask({"op": "prepare", "cases": [spec], "levels": list(levels)})
            if calibration is not None:
                got = (info.get("cases") or {}).get(case) or {}
                calibration[f"s{session}|{case}"] = {
                    v: got[v]["calibration"]
                    for v in variants[1:]
                    if isinstance(got.get(v), dict) and "calibration" in got[v]
                }
            a_stream = interleave.Stream(a, case, PLAIN)
            every = [a_stream, *(interleave.Stream(b, case, v) for v in variants)]
            interleave.measure(every, WARMUP_ROUNDS, {})  # discarded, as production's warm-up
            for index in range(trials):
                samples: dict[tuple, list[float]] = {}

                def extend(pending, total, a_stream=a_stream, samples=samples, case=case):
                    streams = [a_stream, *(interleave.Stream(b, case, v) for v in pending)]
                    # every pending stream has as many rounds as A: they were measured together
                    have = len(samples.get(a_stream.key, []))
                    interleave.measure(streams, total - have, samples)

                trial = Trial(session, case, index, a_plain=[])

                def judge(v, trial=trial, samples=samples, a_stream=a_stream, case=case):
                    from perfgate.gate.stats import compare_samples

                    cur = samples[("B", case, v)]
                    base = samples[a_stream.key][: len(cur)]
                    return compare_samples(base, cur, settings, ab=True, looks=len(totals))

                adaptive.decide(variants, totals, extend, judge)
                trial.a_plain = samples[a_stream.key]
                trial.b = {
                    v: samples[("B", case, v)] for v in variants if ("B", case, v) in samples
                }
                out.append(trial)
    return out


def save_samples(path: Path, trials: list[Trial]) -> None:
    """Every stream of ``trials`` as one ``.npz``, written atomically (perfgate.atomic)."""
    import io

    import numpy as np

    from perfgate import atomic

    arrays = {}
    for t in trials:
        arrays[f"s{t.session}|{t.case}|t{t.index}|A|plain"] = np.asarray(t.a_plain)
        for v, xs in t.b.items():
            arrays[f"s{t.session}|{t.case}|t{t.index}|B|{v}"] = np.asarray(xs)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic.write_bytes(path, buffer.getvalue())


class SamplesError(ValueError):
    """A samples file that cannot be re-analysed; the message is one line naming it."""


_KEY = re.compile(r"s(\d+)\|([^|]+)\|t(\d+)\|(A\|plain|B\|[^|]+)")


def load_samples(path: Path) -> list[Trial]:
    """The trials of a ``samples.npz`` (re-analysis on any machine); SamplesError naming the
    file and what was expected when it is not one that ``save_samples`` wrote, or holds too
    little to judge."""
    import zipfile

    import numpy as np

    def fail(problem: str) -> SamplesError:
        return SamplesError(f"--reanalyse {path}: {problem}")

    if path.is_dir():
        raise fail("is a directory, expected the samples.npz of an experiment run")
    trials: dict[tuple, Trial] = {}
    try:
        data = np.load(path, allow_pickle=False)
        if not hasattr(data, "files"):
            raise fail("is a single .npy array, expected the .npz of an experiment run")
        with data:
            for key in data.files:
                match = _KEY.fullmatch(key)
                if match is None:
                    raise fail(
                        f"holds an array {key!r}; expected s<session>|<case>|t<trial>|A|plain "
                        "or ...|B|<variant> (an experiment's samples.npz)"
                    )
                values = data[key]
                if values.ndim != 1 or values.size == 0 or values.dtype.kind != "f":
                    raise fail(f"array {key!r} must be a non-empty 1-D array of seconds")
                if not (np.isfinite(values).all() and (values > 0).all()):
                    raise fail(f"array {key!r} holds samples that are not finite seconds > 0")
                s, case, t, stream = match.groups()
                trial = trials.setdefault((s, case, t), Trial(int(s), case, int(t), []))
                if stream == "A|plain":
                    trial.a_plain = values.tolist()
                else:
                    trial.b[stream[2:]] = values.tolist()
    except FileNotFoundError:
        raise fail("no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, SamplesError):
            raise
        detail = " ".join(str(exc).split())
        raise fail(f"not an .npz archive written by perfgate experiment ({detail})") from None
    if not trials:
        raise fail("holds no samples")
    for trial in trials.values():
        if not trial.a_plain or PLAIN not in trial.b:
            where = f"s{trial.session}|{trial.case}|t{trial.index}"
            raise fail(f"trial {where} lacks its A|plain or B|plain stream")
    sessions = {t.session for t in trials.values()}
    if len(sessions) < 2:
        raise fail(
            f"holds {len(sessions)} session; the stored-baseline mode needs >= 2 (other "
            "sessions make the baseline)"
        )
    return list(trials.values())


def load_meta(path: Path) -> dict[str, Any]:
    """The ``meta.json`` beside a samples file (the measuring run's device and calibration), or
    {} where there is none; SamplesError when it is not a JSON object."""
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise SamplesError(
            f"{path}: not a meta.json written by perfgate experiment ({detail})"
        ) from None
    if not isinstance(meta, dict):
        raise SamplesError(f"{path}: expected a JSON object (an experiment's meta.json)")
    return meta


def counts(trials: list[Trial]) -> dict[str, Any]:
    """What ran, counted from the samples: sessions, benchmarks, and trials per benchmark and
    session (one number, or "min-max" where sessions differ). A report's header says this, never
    what a command line asked for."""
    per = Counter((t.session, t.case) for t in trials)
    low, high = min(per.values()), max(per.values())
    return {
        "sessions": len({t.session for t in trials}),
        "benchmarks": len({t.case for t in trials}),
        "trials": low if low == high else f"{low}-{high}",
    }


# -- command line -------------------------------------------------------------------------------
def parse_levels(text: str) -> tuple[float, ...]:
    try:
        levels = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(
            f"--inject must be comma-separated fractions such as 0.03,0.05, got {text!r}"
        ) from None
    if not levels or any(not 0 < lv < 1 for lv in levels) or len(set(levels)) != len(levels):
        raise ValueError(f"--inject must list distinct fractions in (0, 1), got {text!r}")
    return levels
