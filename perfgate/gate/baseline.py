"""Baseline and result files: pytest-benchmark JSON with a perfgate fingerprint, validated.

A file is what ``pytest --benchmark-json=FILE --benchmark-save-data`` writes (so each benchmark's
``stats.data`` holds the per-round samples, in seconds of device time), with
``machine_info["perfgate"]`` added by perfgate's pytest plugin (``perfgate/plugin.py``, loaded
with ``-p perfgate.plugin``; docs/CONTRACTS.md):

    {"schema": 1, "device_key": "nvidia-h200", "mode": "device" | "leaderboard",
     "fingerprint": {gpu_name, arch, compute_units, driver, runtime, torch, triton,
                     git_commit, clocks}}

``load`` refuses anything a comparison could not trust: a corrupt or incomplete baseline must
stop the gate (exit 2), never pass it.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Any

from perfgate.gate.paths import SCHEMA
from perfgate.modes import MODE_NAMES
from perfgate.refusal import Refusal

MODES = MODE_NAMES  # perfgate.modes defines them
FINGERPRINT_KEYS = (
    "gpu_name",
    "arch",
    "compute_units",
    "driver",
    "runtime",
    "torch",
    "triton",
    "git_commit",
    "clocks",
)
# The code is git_commit; every other fingerprint key is the environment, which moves timings
# without any change of the code: the history starts a new segment when one of them changes.
CODE_KEYS = ("git_commit",)
ENVIRONMENT_KEYS = tuple(k for k in FINGERPRINT_KEYS if k not in CODE_KEYS)


# extra_info key of a pooled baseline's per-run medians and their spread
RUNS_KEY = "perfgate_runs"
# extra_info key of the per-process medians of a run made of several processes (and of every
# process of a baseline pooled from such runs): for people and history, never for the threshold
PROCESSES_KEY = "perfgate_processes"


_DEVICE_KEY = re.compile(r"[A-Za-z0-9._-]+")


class BaselineError(Refusal):
    """A baseline or result file that cannot be used; the message is one line naming the file."""


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a pytest-benchmark JSON file with a perfgate block; return it as is."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BaselineError(f"{path}: is a directory, expected a JSON file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read: {_one_line(exc)}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise BaselineError(
            f"{path}: nested too deeply to be a pytest-benchmark JSON file"
        ) from None
    _validate(path, data)
    return data


def load_replaced(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The baseline a new one replaces: ``(data, None)``, or ``(None, why)`` when it cannot be
    used, which does not stop its replacement (a broken baseline is what a new one mends)."""
    try:
        return load(path), None
    except BaselineError as exc:
        return None, str(exc)


def _validate(path: Path, data: Any) -> None:
    def fail(problem: str) -> BaselineError:
        return BaselineError(f"{path}: {problem}")

    if not isinstance(data, dict):
        raise fail(f"top level is a JSON {_json_type(data)}, expected an object")
    _validate_perfgate(fail, data.get("machine_info"))
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise fail("'benchmarks' must be a non-empty list (did the benchmark run select anything?)")
    seen: set[str] = set()
    for i, bench in enumerate(benchmarks):
        if not isinstance(bench, dict):
            raise fail(f"benchmarks[{i}] is a JSON {_json_type(bench)}, expected an object")
        name = bench.get("fullname")
        if not isinstance(name, str) or not name:
            raise fail(f"benchmarks[{i}] has no 'fullname' string")
        if name in seen:
            raise fail(f"duplicate benchmark fullname {name!r}")
        seen.add(name)
        extra = bench.get("extra_info")
        if extra is not None and not isinstance(extra, dict):
            raise fail(
                f"benchmark {name!r}: extra_info is a JSON {_json_type(extra)}, expected an object"
            )
        _validate_samples(fail, name, bench.get("stats"))
        _validate_runs(fail, name, bench.get("extra_info"), RUNS_KEY, "per-run")
        _validate_runs(fail, name, bench.get("extra_info"), PROCESSES_KEY, "per-process")


def _validate_perfgate(fail, machine_info: Any) -> None:
    if not isinstance(machine_info, dict):
        raise fail("no 'machine_info' object")
    block = machine_info.get("perfgate")
    if not isinstance(block, dict):
        raise fail(
            "no machine_info.perfgate block (device key, timing mode, fingerprint); "
            "record with perfgate's pytest plugin (-p perfgate.plugin)"
        )
    schema = block.get("schema")
    if type(schema) is not int or schema != SCHEMA:  # neither True nor 1.0 is schema 1
        raise fail(f"machine_info.perfgate.schema is {schema!r}, this perfgate reads {SCHEMA}")
    key = block.get("device_key")
    if not isinstance(key, str) or not key:
        raise fail("machine_info.perfgate.device_key must be a non-empty string")
    if not _DEVICE_KEY.fullmatch(key) or key in (".", ".."):
        raise fail(
            f"machine_info.perfgate.device_key is {_shown(key)}; expected a plain name of "
            "letters, digits, '.', '_' and '-' (it names a directory of perf_baselines)"
        )
    mode = block.get("mode")
    if mode not in MODES:
        raise fail(f"machine_info.perfgate.mode is {mode!r}, expected one of {', '.join(MODES)}")
    fp = block.get("fingerprint")
    if not isinstance(fp, dict):
        raise fail("machine_info.perfgate.fingerprint must be an object")
    absent = [k for k in FINGERPRINT_KEYS if k not in fp]
    if absent:
        raise fail(f"machine_info.perfgate.fingerprint lacks {', '.join(absent)}")


def _validate_samples(fail, name: str, stats: Any) -> None:
    if not isinstance(stats, dict):
        raise fail(f"benchmark {name!r} has no 'stats' object")
    samples = stats.get("data")
    if samples is None:
        raise fail(
            f"benchmark {name!r} has no stats.data (per-round samples); "
            "record with --benchmark-save-data"
        )
    if not isinstance(samples, list) or not samples:
        raise fail(f"benchmark {name!r}: stats.data must be a non-empty list of seconds")
    for j, x in enumerate(samples):
        if not _seconds(x):
            raise fail(
                f"benchmark {name!r}: stats.data[{j}] is {_shown(x)}; samples must be finite "
                f"seconds > 0, in [{SECONDS[0]:g}, {SECONDS[1]:g}]"
            )
    rounds = stats.get("rounds")
    if rounds is not None and rounds != len(samples):
        raise fail(
            f"benchmark {name!r}: stats.rounds is {rounds!r} but stats.data holds "
            f"{len(samples)} samples (truncated file?)"
        )


def _validate_runs(fail, name: str, extra_info: Any, key: str, what: str) -> None:
    """``extra_info.<key>`` (per-run or per-process medians of pooled samples) must be
    consistent: a wrong per-run spread would move the gate's threshold without anyone seeing it."""
    runs = extra_info.get(key) if isinstance(extra_info, dict) else None
    if runs is None:
        return
    where = f"benchmark {name!r}: extra_info.{key}"
    if not isinstance(runs, dict):
        raise fail(f"{where} must be an object")
    medians, spread = runs.get("medians"), runs.get("spread")
    if not isinstance(medians, list) or len(medians) < 2:
        raise fail(f"{where}.medians must list >= 2 {what} medians")
    if not all(_seconds(m) for m in medians):
        raise fail(
            f"{where}.medians must be finite seconds > 0, in [{SECONDS[0]:g}, {SECONDS[1]:g}], "
            f"got {_shown(medians)}"
        )
    rounds = runs.get("rounds")
    if rounds is not None and not (
        isinstance(rounds, list)
        and len(rounds) == len(medians)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in rounds)
    ):
        raise fail(f"{where}.rounds must list one count >= 1 per median, got {_shown(rounds)}")
    if not _positive(spread, allow_zero=True):
        raise fail(f"{where}.spread must be a finite fraction >= 0, got {_shown(spread)}")
    if not math.isclose(spread, run_spread(medians), rel_tol=1e-9, abs_tol=1e-12):
        raise fail(
            f"{where}.spread is {spread!r} but its medians give {run_spread(medians)!r} "
            "(edited by hand?)"
        )


# What a sample (or a median of samples) may be, in seconds: from a femtosecond (far below any
# timer's resolution; the device clock's quantum is 2**-40 s) to nearly three hours. Outside it a
# number is no timing, and the ratios of the statistics would overflow (5e-324 / x is inf).
SECONDS = (1e-15, 1e4)


def _seconds(x: Any) -> bool:
    return _positive(x) and SECONDS[0] <= float(x) <= SECONDS[1]


def _positive(x: Any, *, allow_zero: bool = False) -> bool:
    """``x`` is a JSON number that is a finite float (an int too large for one, 10**400, is not:
    it would overflow wherever the statistics read it) and > 0 (>= 0 with ``allow_zero``)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        x = float(x)
    except OverflowError:
        return False
    if not math.isfinite(x):
        return False
    return x >= 0 if allow_zero else x > 0


def run_spread(medians: list[float]) -> float:
    """Run-to-run spread of a benchmark's medians: (max - min) / min."""
    if len(medians) < 2 or min(medians) <= 0:
        raise ValueError(f"medians must hold >= 2 positive values, got {medians!r}")
    return (max(medians) - min(medians)) / min(medians)


def run_drift(medians: list[float]) -> float:
    """The drift a stored-baseline threshold allows for: a robust run-to-run standard deviation
    of a benchmark's per-run medians, relative to their median (:func:`perfgate.gate.stats.relative_spread`).

    Why not the range (``spread``, what the threshold used first): on the H200 a single run in a
    slow episode (m16-n2112-k7168 2.4-4.2% slower for a second or so, both processes at once;
    issue 11) made the range of 2-3 runs 2-4%, and 2 x that put the benchmark's threshold at
    4.4-9%, above the 5% slowdown it has to catch. The MAD ignores one such run among three; a
    spread shared by most runs (process-to-process offsets) still raises it. With two runs it is
    0.74 x the range (the MAD of two values is half their distance)."""
    if len(medians) < 2 or min(medians) <= 0:
        raise ValueError(f"medians must hold >= 2 positive values, got {medians!r}")
    import numpy as np

    from perfgate.gate.stats import relative_spread

    return relative_spread(np.asarray(medians, dtype=float))


def drifts(data: dict[str, Any]) -> dict[str, float]:
    """Each pooled benchmark's drift (:func:`run_drift` of its recorded per-run medians), by
    fullname; only pooled baselines have one. The recorded ``spread`` (the range) stays in the
    file for people and history; the threshold uses the robust drift."""
    out = {}
    for b in data["benchmarks"]:
        runs = (b.get("extra_info") or {}).get(RUNS_KEY)
        if runs is not None:
            out[b["fullname"]] = run_drift([float(m) for m in runs["medians"]])
    return out


def pool_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One baseline from independent runs of the same selection: the first run's file with each
    benchmark's samples concatenated over the runs and its per-run medians and spread recorded
    (``extra_info.perfgate_runs``). Runs made of several processes keep every process's median
    (``extra_info.perfgate_processes``, all runs' processes). Raises BaselineError when the runs
    do not match."""
    out = _pool(runs, "run", RUNS_KEY, "runs")
    for bench in out["benchmarks"]:
        records = [_record(run, bench["fullname"], PROCESSES_KEY) for run in runs]
        extra = bench.setdefault("extra_info", {})
        if all(records):
            extra[PROCESSES_KEY] = _medians_record(
                "processes",
                [n for r in records for n in r["rounds"]],
                [m for r in records for m in r["medians"]],
            )
        else:  # the first run's record would describe that run alone
            extra.pop(PROCESSES_KEY, None)
    return out


def extend_runs(stored: dict[str, Any], pooled: dict[str, Any]) -> dict[str, Any]:
    """``stored`` (a baseline) with the runs of ``pooled`` (this machine's runs, pooled by
    :func:`pool_runs`) added: samples concatenated, per-run and per-process medians listed after
    the stored ones. A baseline so extended spans several machines of one device class, and its
    robust run-to-run drift (the stored gate's threshold) covers their offsets. The caller checks
    that both measured the same commit on the same device in the same environment
    (:func:`extension_refusal`). Raises BaselineError when the files do not match."""
    for data in (stored, pooled):
        if not is_pooled(data):
            raise BaselineError("only a baseline of >= 2 runs can be extended or extend one")
    _check_matching([stored, pooled], "file")
    more = {b["fullname"]: b for b in pooled["benchmarks"]}
    out = copy.deepcopy(stored)
    for bench in out["benchmarks"]:
        other = more[bench["fullname"]]
        bench["stats"].update(stats_block(bench["stats"]["data"] + other["stats"]["data"]))
        extra, new = bench["extra_info"], other["extra_info"]
        for key, count in ((RUNS_KEY, "runs"), (PROCESSES_KEY, "processes")):
            if key in extra and key in new:
                extra[key] = _medians_record(
                    count,
                    extra[key]["rounds"] + new[key]["rounds"],
                    extra[key]["medians"] + new[key]["medians"],
                )
            else:  # a record of the stored runs alone would misdescribe the samples
                extra.pop(key, None)
    return out


def is_pooled(data: dict[str, Any]) -> bool:
    """Every benchmark of ``data`` records its per-run medians and rounds (>= 2 runs)."""
    return all(
        (b.get("extra_info") or {}).get(RUNS_KEY, {}).get("rounds") is not None
        for b in data["benchmarks"]
    )


def extension_refusal(stored: dict[str, Any], pooled: dict[str, Any]) -> str | None:
    """Why ``pooled`` must not extend ``stored`` (:func:`extend_runs`), or None: runs pooled into
    one baseline must have measured the same code (one commit, no uncommitted changes) in the
    same environment (every fingerprint key, the card's clock settings included)."""
    if mode(stored) != mode(pooled) or device_key(stored) != device_key(pooled):
        return "the stored baseline was recorded on another device or in another mode"
    if not is_pooled(stored):
        return "the stored baseline records no per-run medians (one run); record it again"
    missing = sorted(set(samples(stored)) ^ set(samples(pooled)))
    if missing:
        return (
            f"this run and the stored baseline measured other benchmarks (e.g. {missing[0]}); "
            "run the stored baseline's selection"
        )
    old, new = fingerprint(stored), fingerprint(pooled)
    for fp, whose in ((old, "the stored baseline"), (new, "this run")):
        if not fp.get("git_commit") or fp.get("git_dirty"):
            return f"{whose} names no clean commit; only runs of one commit can be pooled"
    changed = [k for k in FINGERPRINT_KEYS if old.get(k) != new.get(k)]
    if changed:
        key = changed[0]
        return (
            f"the stored baseline was recorded with another {key} ({old.get(key)!r}, this run "
            f"{new.get(key)!r}); only runs of one commit in one environment can be pooled"
        )
    return None


def pool_processes(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One run from the files of its processes (``perfgate bench`` splits a run's rounds over
    ``processes.<mode>`` of them): samples concatenated, each process's median recorded in
    ``extra_info.perfgate_processes``. Raises BaselineError when the processes do not match."""
    return _pool(parts, "process", PROCESSES_KEY, "processes")


def _medians_record(count: str, rounds: list[int], medians: list[float]) -> dict[str, Any]:
    """What ``extra_info.perfgate_runs`` / ``perfgate_processes`` hold: one median per pooled part
    (``count`` of them), its rounds, and their spread."""
    return {
        count: len(medians),
        "rounds": rounds,
        "medians": medians,
        "spread": run_spread(medians),
    }


def _record(data: dict[str, Any], name: str, key: str) -> dict[str, Any] | None:
    for bench in data["benchmarks"]:
        if bench["fullname"] == name:
            return (bench.get("extra_info") or {}).get(key)
    return None


def _pool(parts: list[dict[str, Any]], what: str, key: str, count: str) -> dict[str, Any]:
    if not parts:
        raise BaselineError(f"no {count} to pool")
    _check_matching(parts, what)
    first = parts[0]
    per_part = [samples(part) for part in parts]
    out = copy.deepcopy(first)
    for bench in out["benchmarks"]:
        name = bench["fullname"]
        data = [x for s in per_part for x in s[name]]
        bench["stats"].update(stats_block(data))
        if len(parts) >= 2:
            bench.setdefault("extra_info", {})[key] = _medians_record(
                count,
                [len(s[name]) for s in per_part],
                [statistics.median(s[name]) for s in per_part],
            )
    return out


def _check_matching(parts: list[dict[str, Any]], what: str) -> None:
    """The same device key, mode and benchmarks in every part; BaselineError naming the first
    that differs."""
    first = parts[0]
    names = sorted(b["fullname"] for b in first["benchmarks"])
    for i, part in enumerate(parts[1:], 1):
        if (device_key(part), mode(part)) != (device_key(first), mode(first)):
            raise BaselineError(f"{what} {i} was recorded on another device or in another mode")
        if sorted(b["fullname"] for b in part["benchmarks"]) != names:
            raise BaselineError(f"{what} {i} measured other benchmarks than {what} 0")


def append_samples(data: dict[str, Any], more: dict[str, Any]) -> None:
    """Add the samples of ``more`` (a loaded file: more rounds of some benchmarks of the same
    run) to ``data`` in place, keeping ``stats`` consistent with ``stats.data``."""
    extra = samples(more)
    for bench in data["benchmarks"]:
        if bench["fullname"] in extra:
            values = bench["stats"]["data"] + extra[bench["fullname"]]
            bench["stats"].update(stats_block(values))


def stats_block(data: list[float]) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` of ``data`` as far as tools read it (min, max, mean, median,
    stddev, rounds, data): for samples perfgate pooled or made."""
    return {
        "min": min(data),
        "max": max(data),
        "mean": statistics.fmean(data),
        "median": statistics.median(data),
        "stddev": statistics.stdev(data) if len(data) > 1 else 0.0,
        "rounds": len(data),
        "data": data,
    }


def perfgate_block(data: dict[str, Any]) -> dict[str, Any]:
    """``machine_info["perfgate"]`` of a loaded file."""
    return data["machine_info"]["perfgate"]


def injection(data: dict[str, Any]) -> str | None:
    """The first benchmark of ``data`` that records an injection (a lab run's extra pass,
    perfgate.variants: an ``extra_info`` key ``injected_*`` that is not 0), as ``name: key =
    value``; None for a run that times the kernels alone."""
    for bench in data.get("benchmarks") or []:
        extra = bench.get("extra_info") if isinstance(bench, dict) else None
        for key, value in (extra or {}).items() if isinstance(extra, dict) else ():
            if key.startswith("injected_") and value not in (0, None, False):
                return f"{bench.get('fullname') or bench.get('name')}: {key} = {value!r}"
    return None


def device_key(data: dict[str, Any]) -> str:
    """The device key of a loaded file, e.g. ``nvidia-h200``."""
    return perfgate_block(data)["device_key"]


def mode(data: dict[str, Any]) -> str:
    """The timing mode of a loaded file: ``device`` or ``leaderboard``."""
    return perfgate_block(data)["mode"]


def fingerprint(data: dict[str, Any]) -> dict[str, Any]:
    """The environment fingerprint of a loaded file."""
    return perfgate_block(data)["fingerprint"]


def samples(data: dict[str, Any]) -> dict[str, list[float]]:
    """Per-round samples of a loaded file by benchmark fullname, in file order."""
    return {b["fullname"]: [float(x) for x in b["stats"]["data"]] for b in data["benchmarks"]}


# The one atomic writer (perfgate.atomic), under the names baseline code has always used.


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "null" if value is None else "number"
    )


def _shown(value: Any) -> str:
    """``repr(value)``, cut short: a message stays one readable line (10**400 has 401 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
