"""The benchmark session behind ``bench`` and ``update-baselines``: pytest processes, pooled.

One mode's run is ``processes.<mode>`` pytest processes (``pytest tests/perf -p perfgate.plugin``)
that split the mode's rounds; their samples are pooled into one results file. The gate against a
stored baseline then takes adaptive looks (:func:`adaptive_rounds`): more rounds for the
benchmarks still inconclusive, appended to the same file.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfgate import atomic, spawn
from perfgate.gate import baseline as bl
from perfgate.gate import settings
from perfgate.gate.paths import REPO, result_paths
from perfgate.modes import MODE_NAMES
from perfgate.refusal import Refusal

# pytest exit codes (pytest.ExitCode), written out so that this module needs no pytest import
PYTEST_OK, PYTEST_FAILED, PYTEST_NO_TESTS = 0, 1, 5


DEFAULT_MARKERS = "bench and not slow"


# -- pure helpers (tested on the CPU) ---------------------------------------------------------
def modes(mode: str) -> tuple[str, ...]:
    if mode == "both":
        return MODE_NAMES
    if mode not in MODE_NAMES:
        raise ValueError(f"mode must be one of {', '.join((*MODE_NAMES, 'both'))}, got {mode!r}")
    return (mode,)


def each_mode(mode: str, run: Callable[[str], int]) -> int:
    """``run(m)`` for every mode ``mode`` names (``both``: each in turn); the worst exit code. A
    refusal of one mode (its baseline missing, say) does not keep the next mode from running:
    the first is raised once every mode has run, for ``python -m perfgate`` to answer."""
    worst, refused = 0, None
    for m in modes(mode):
        try:
            worst = max(worst, run(m))
        except Refusal as exc:
            refused = refused or exc
    if refused is not None:
        raise refused
    return worst


def passthrough(args: list[str] | None) -> list[str]:
    """pytest's arguments from argparse's REMAINDER (which keeps the leading ``--``)."""
    args = list(args or [])
    return args[1:] if args[:1] == ["--"] else args


def selection_given(keyword: str | None, markers: str | None, extra: list[str]) -> bool:
    """True when the user narrowed (or widened) the default selection."""
    return keyword is not None or markers is not None or bool(extra)


def pytest_command(
    mode: str,
    json_path: Path,
    *,
    keyword: str | None,
    markers: str | None,
    extra: list[str],
    targets: list[str] | None = None,
) -> list[str]:
    """The pytest command line for one mode (run with the repository as working directory)."""
    if mode not in MODE_NAMES:
        raise ValueError(f"mode must be one of {', '.join(MODE_NAMES)}, got {mode!r}")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *(targets or ["tests/perf"]),
        "-p",
        "perfgate.plugin",
        "-p",
        "no:cacheprovider",
        "-m",
        markers if markers is not None else DEFAULT_MARKERS,
        "--benchmark-enable",
        "--benchmark-save-data",
        f"--benchmark-json={json_path}",
        "--benchmark-disable-gc",
        "--benchmark-sort=fullname",
        "--benchmark-columns=min,median,mean,stddev,iqr,rounds",
        f"--perfgate-mode={mode}",
    ]
    if keyword is not None:
        cmd += ["-k", keyword]
    return cmd + list(extra)


def rounds_override(mode: str, args: argparse.Namespace) -> list[str]:
    """``--perfgate-rounds N`` when ``--rounds-<mode>`` was given (the plugin reads the table
    otherwise); before the passthrough, so that an explicit ``-- --perfgate-rounds`` wins."""
    rounds = settings.overrides_from(args).get(f"rounds.{mode}")
    return [] if rounds is None else [f"--perfgate-rounds={rounds}"]


# -- running ----------------------------------------------------------------------------------
def process_rounds(rounds: int, processes: int) -> list[int]:
    """``rounds`` split over ``processes`` as evenly as whole rounds allow (the first ones take
    the remainder): what each process of a run measures. Every process measures at least one."""
    for name, v in (("rounds", rounds), ("processes", processes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if processes > rounds:
        raise ValueError(f"cannot split {rounds} rounds over {processes} processes")
    share, extra = divmod(rounds, processes)
    return [share + (i < extra) for i in range(processes)]


def run_mode(
    mode: str, args: argparse.Namespace, gate, *, warmup_rounds: int | None = None
) -> tuple[int, Path]:
    """Run one mode's benchmarks; (exit code as compare's 0/1/2 or 0 on success, results path).

    A run is ``processes.<mode>`` pytest processes (``[tool.perfgate.processes]``) that split
    the mode's rounds evenly; their samples are pooled into one results file, which records each
    process's median (:func:`perfgate.gate.baseline.pool_processes`). Why: on the H200 a leaderboard
    process keeps an offset of up to 1.7% for its whole life, the same on every shape and
    through re-allocated inputs and flush buffer (docs/views.md), so one process per run made
    the run-to-run spread; a run of several processes averages it.

    ``warmup_rounds``: a warm-up pass of that many rounds in one process, its results discarded
    (see :func:`warm_up`)."""
    paths = result_paths(args.results_dir, mode, args.tag)
    json_path = paths["json"].resolve()
    if warmup_rounds is not None:
        json_path = json_path.with_suffix(".warmup.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.unlink(missing_ok=True)  # never compare a stale file from an earlier run
    if warmup_rounds is not None:
        rounds = [f"--perfgate-rounds={warmup_rounds}"]
        return run_process(mode, args, json_path, rounds, "warm-up pass, discarded")
    processes = gate.processes[mode]
    if processes == 1:
        return run_process(mode, args, json_path, rounds_override(mode, args), "mode")
    parts = []
    for i, rounds in enumerate(process_rounds(gate.rounds[mode], processes)):
        part = json_path.with_suffix(f".p{i}.json")
        part.unlink(missing_ok=True)
        what = f"mode, process {i + 1} of {processes}"
        rc, _ = run_process(mode, args, part, [f"--perfgate-rounds={rounds}"], what)
        if rc:
            return rc, json_path
        try:
            parts.append(load_result(part, mode))
        except bl.BaselineError as exc:
            print(f"perfgate: {mode} mode: process {i + 1}: {exc}", file=sys.stderr)
            return 2, json_path
    try:
        pooled = bl.pool_processes(parts)
    except bl.BaselineError as exc:
        print(f"perfgate: {mode} mode: {exc}", file=sys.stderr)
        return 2, json_path
    atomic.write_json(json_path, pooled)
    return 0, json_path


def run_process(
    mode: str, args: argparse.Namespace, json_path: Path, rounds: list[str], what: str
) -> tuple[int, Path]:
    """One pytest process of a run, writing ``json_path``; (exit code as :func:`run_mode`).
    ``what`` names it in the command line printed first."""
    extra = rounds + passthrough(args.pytest_args)
    cmd = pytest_command(mode, json_path, keyword=args.keyword, markers=args.markers, extra=extra)
    print(f"perfgate: {mode} {what}: {' '.join(cmd[1:])}", flush=True)
    env = dict(os.environ, PERFGATE_REQUIRE_GPU="1")
    rc = spawn.run(cmd, cwd=REPO, env=env, check=False).returncode
    if rc == PYTEST_FAILED:
        print(
            f"perfgate: {mode} mode: a benchmark failed (wrong output or error); no comparison",
            file=sys.stderr,
        )
        return 1, json_path
    if rc == PYTEST_NO_TESTS:
        print(f"perfgate: {mode} mode: the selection matched no benchmarks", file=sys.stderr)
        return 2, json_path
    if rc != PYTEST_OK:
        print(f"perfgate: {mode} mode: pytest exited {rc}", file=sys.stderr)
        return 2, json_path
    if not json_path.is_file():
        print(f"perfgate: {mode} mode: pytest wrote no {json_path}", file=sys.stderr)
        return 2, json_path
    return 0, json_path


def warm_up(mode: str, args: argparse.Namespace, gate) -> int:
    """A short pass over the selection before the measured runs, its results discarded.

    Measured on the H200 (2026-12-01, three update-baselines runs of the default selection on a
    GPU that had been idle): the first run's GEMM medians were 0.5-3% slower than the next two,
    which agreed within 0.5%, so a pooled baseline's spread (and its threshold) was set by the
    first run alone, and a baseline recorded as a machine's first run drifts by that much (the
    committed m32-n2880-k512 baseline was 1.8% slow, issue 11). A pass of ``min_samples`` rounds
    per benchmark brings the card to its working clocks for a few seconds of the default
    selection. ``--no-warmup-pass`` skips it."""
    if args.no_warmup_pass:
        return 0
    rc, _ = run_mode(mode, args, gate, warmup_rounds=gate.stats.min_samples)
    return rc


def load_result(json_path: Path, mode: str) -> dict[str, Any]:
    """The validated result file of a run; raises BaselineError when it is unusable."""
    data = bl.load(json_path)
    if bl.mode(data) != mode:
        raise bl.BaselineError(f"{json_path}: holds {bl.mode(data)!r} times, expected {mode!r}")
    return data


def adaptive_rounds(mode, args, gate, base_data, data, json_path: Path) -> dict[str, int]:
    """More rounds for the benchmarks still inconclusive against the baseline (perfgate.measure.adaptive):
    each later look reruns only those, appends the new samples to the run's file (one run, more
    rounds) and judges again at alpha / looks. Returns the look that decided each benchmark."""
    from perfgate.gate.stats import compare_samples
    from perfgate.measure import adaptive

    base_samples, drifts = bl.samples(base_data), bl.drifts(base_data)
    names = [n for n in bl.samples(data) if n in base_samples]
    totals = adaptive.schedule(first_look_rounds(mode, gate, data), gate.stats.looks)

    def extend(pending: list[str], total: int) -> None:
        have = min(len(bl.samples(data)[n]) for n in pending)
        if total > have:
            more = rerun(mode, args, pending, total - have)
            bl.append_samples(data, more)
            atomic.write_json(json_path, data)

    def judge(name: str):
        cur = bl.samples(data)[name]
        return compare_samples(base_samples[name], cur, gate.stats, drift=drifts.get(name),
                               looks=gate.stats.looks)  # fmt: skip

    decided = adaptive.decide(names, totals, extend, judge)
    return {name: d.look for name, d in decided.items()}


def first_look_rounds(mode: str, gate, data) -> int:
    """The first look's size: what the first run measured (``--rounds-<mode>`` or the table)."""
    return min(len(x) for x in bl.samples(data).values())


def rerun(mode: str, args: argparse.Namespace, names: list[str], rounds: int) -> dict:
    """``rounds`` more rounds of the benchmarks ``names`` (pytest node ids), as a loaded file."""
    json_path = (
        result_paths(args.results_dir, mode, args.tag)["json"].resolve().with_suffix(".more.json")
    )
    json_path.unlink(missing_ok=True)
    extra = [f"--perfgate-rounds={rounds}", *passthrough(args.pytest_args)]
    cmd = pytest_command(mode, json_path, keyword=None, markers="bench", extra=extra, targets=names)
    print(f"perfgate: {mode} mode: {len(names)} inconclusive, {rounds} more rounds", flush=True)
    env = dict(os.environ, PERFGATE_REQUIRE_GPU="1")
    rc = spawn.run(cmd, cwd=REPO, env=env, check=False).returncode
    if rc != PYTEST_OK or not json_path.is_file():
        raise bl.BaselineError(f"the rerun of {len(names)} inconclusive benchmarks failed ({rc})")
    return load_result(json_path, mode)
