"""``python -m perfgate bench`` and ``update-baselines``: run the GPU benchmarks, gate or record.

``bench`` runs ``pytest tests/perf`` once per timing mode, writing
``.perfgate/results/<mode>.json`` (pytest-benchmark JSON with per-round device-time samples),
then compares it with ``perf_baselines/<device_key>/<mode>.json`` and exits as ``compare`` does:
0 no regression, 1 regression (or a failing benchmark), 2 unusable input. With no baseline for
this device it exits 2 (a GPU job without a baseline must be visible, not green) unless
``--allow-missing-baseline``. On a machine without a GPU it prints why and exits 0, running
nothing (``PERFGATE_REQUIRE_GPU=1`` makes that an error, exit 2).

``update-baselines`` runs the same benchmarks and, only after a complete successful run, writes
the baseline atomically and prints the comparison with the one it replaces.
``update-baselines --isa`` rewrites the static ISA baselines instead (``perfgate isa``).

Default selection: ``-m "bench and not slow"``, i.e. the ``leaderboard`` and ``reducer``
groups; the production grid is ``slow`` (``-m slow`` or ``-k grid`` selects it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from perfgate import spawn
from perfgate.modes import MODE_NAMES, MODES

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MARKERS = "bench and not slow"
DEFAULT_RESULTS = Path(".perfgate/results")
DEFAULT_BASELINES = REPO / "perf_baselines"
# pytest exit codes (pytest.ExitCode), written out so that this module needs no pytest import
PYTEST_OK, PYTEST_FAILED, PYTEST_NO_TESTS = 0, 1, 5


def register(subparsers: argparse._SubParsersAction) -> None:
    bench = subparsers.add_parser(
        "bench",
        help="run the GPU benchmarks and gate them against this device's baseline",
        description=__doc__.split("\n\n")[1],
    )
    _common_options(bench, skip=("ab_min_effect",))
    bench.add_argument(
        "--allow-missing-baseline",
        action="store_true",
        help="exit 0 (with a warning) instead of 2 when this device has no baseline yet",
    )
    bench.set_defaults(func=bench_command)

    update = subparsers.add_parser(
        "update-baselines",
        help="run the GPU benchmarks and rewrite this device's baselines",
        description=__doc__.split("\n\n")[2],
    )
    # update-baselines compares the new baseline with the old one once: no adaptive looks
    _common_options(update, skip=("ab_min_effect", "looks"))
    update.add_argument(
        "--isa",
        action="store_true",
        help="rewrite <baselines-dir>/isa/<target>.json for every target (perfgate isa) instead",
    )
    update.add_argument(
        "--allow-drop",
        action="store_true",
        help="allow a new baseline that lacks benchmarks of the old one (a narrower selection)",
    )
    from perfgate import settings

    runs = settings.key("baseline_runs")
    update.add_argument(
        "--runs",
        type=settings.argument(runs, "--runs"),
        default=None,
        metavar="N",
        help="independent runs to pool (default: baseline_runs of [tool.perfgate]); >= 2 "
        f"records each benchmark's run-to-run spread, which sets its threshold ({runs.expected})",
    )
    update.add_argument(
        "--replace-device",
        action="store_true",
        help="replace a baseline recorded on another device (GPU name, arch or CU count)",
    )
    update.set_defaults(func=update_command)


def _common_options(parser: argparse.ArgumentParser, skip: tuple[str, ...]) -> None:
    each = "; ".join(f"{m.name}: {m.description}" for m in MODES).replace("%", "%%")
    parser.add_argument(
        "--mode",
        choices=(*MODE_NAMES, "both"),
        default="device",
        help=f"timing mode: {', '.join(MODE_NAMES)}, or both for every mode in turn "
        f"(default: %(default)s). {each}",
    )
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest -k selection")
    parser.add_argument(
        "-m",
        dest="markers",
        metavar="EXPR",
        help=f"pytest -m selection (default: {DEFAULT_MARKERS!r}: leaderboard and reducer groups)",
    )
    parser.add_argument(
        "--no-warmup-pass",
        action="store_true",
        help="skip the short pass (min_samples rounds, discarded) that brings the GPU to its "
        "working clocks before the measured run",
    )
    parser.add_argument(
        "--tag",
        metavar="NAME",
        help="a selection with its own baseline and results, <mode>-NAME.json (e.g. -m slow "
        "--tag grid: the production grid)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=DEFAULT_RESULTS,
        help="where <mode>.json, <mode>.md and <mode>.compare.json go (default: %(default)s)",
    )
    parser.add_argument(
        "--baselines-dir",
        type=Path,
        default=DEFAULT_BASELINES,
        help="root of the per-device baselines (default: perf_baselines in the repository)",
    )
    from perfgate import settings

    settings.add_options(parser, settings.STATS, settings.ROUNDS, settings.PROCESSES, skip=skip)
    parser.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        metavar="-- PYTEST_ARGS",
        help="anything after -- goes to pytest (e.g. -- --perfgate-rounds 400 -x)",
    )


# -- pure helpers (tested on the CPU) ---------------------------------------------------------
def modes(mode: str) -> tuple[str, ...]:
    if mode == "both":
        return MODE_NAMES
    if mode not in MODE_NAMES:
        raise ValueError(f"mode must be one of {', '.join((*MODE_NAMES, 'both'))}, got {mode!r}")
    return (mode,)


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


def baseline_path(baselines_dir: Path, device_key: str, mode: str, tag: str | None = None) -> Path:
    """``<baselines_dir>/<device_key>/<mode>.json``, or ``<mode>-<tag>.json`` for a tagged
    selection (``--tag grid``: the production grid has its own baseline, so that the default
    selection's baseline never lists benchmarks a default run leaves out)."""
    if mode not in MODE_NAMES:
        raise ValueError(f"mode must be one of {', '.join(MODE_NAMES)}, got {mode!r}")
    if not device_key or device_key in (".", "..") or any(c in device_key for c in "/\\"):
        raise ValueError(f"device_key must be a plain directory name, got {device_key!r}")
    return Path(baselines_dir) / device_key / f"{_stem(mode, tag)}.json"


def _stem(mode: str, tag: str | None) -> str:
    if tag is None:
        return mode
    if not tag.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"--tag must be letters, digits, - or _, got {tag!r}")
    return f"{mode}-{tag}"


def result_paths(results_dir: Path, mode: str, tag: str | None = None) -> dict[str, Path]:
    """Where one mode's results, markdown report and comparison JSON go."""
    results_dir, stem = Path(results_dir), _stem(mode, tag)
    return {
        "json": results_dir / f"{stem}.json",
        "markdown": results_dir / f"{stem}.md",
        "compare": results_dir / f"{stem}.compare.json",
    }


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _require_gpu_env() -> bool:
    return os.environ.get("PERFGATE_REQUIRE_GPU", "0") not in ("", "0")


def _no_gpu(command: str) -> int:
    """The answer on a machine without a GPU: a clear message; 0, or 2 when a GPU is required."""
    import torch

    why = f"torch {torch.__version__} sees no CUDA/ROCm GPU (cuda={torch.version.cuda}, hip={torch.version.hip})"
    if _require_gpu_env():
        print(f"perfgate {command}: error: PERFGATE_REQUIRE_GPU is set but {why}", file=sys.stderr)
        return 2
    print(f"perfgate {command}: no GPU on this machine ({why}); ran no benchmarks.")
    return 0


def _gate_settings(command: str, args: argparse.Namespace):
    """[tool.perfgate] with this command line's overrides; None (after one line) when unusable."""
    from perfgate import settings

    try:
        _stem(MODE_NAMES[0], getattr(args, "tag", None))
        check_dirs(args)
        return settings.from_args(args)
    except (settings.SettingsError, ValueError) as exc:
        print(f"perfgate {command}: error: {exc}", file=sys.stderr)
        return None


def _rounds_override(mode: str, args: argparse.Namespace) -> list[str]:
    """``--perfgate-rounds N`` when ``--rounds-<mode>`` was given (the plugin reads the table
    otherwise); before the passthrough, so that an explicit ``-- --perfgate-rounds`` wins."""
    from perfgate import settings

    rounds = settings.overrides_from(args).get(f"rounds.{mode}")
    return [] if rounds is None else [f"--perfgate-rounds={rounds}"]


def check_dirs(args: argparse.Namespace) -> None:
    """The results must be writable and never land among the baselines (results/<mode>.json
    would then be a baseline, overwritten by every run): OutputError, one line, otherwise."""
    from perfgate import atomic

    results, baselines = Path(args.results_dir), Path(args.baselines_dir)
    atomic.check_outputs({"--results-dir": results / f"{_stem(MODE_NAMES[0], args.tag)}.md"})
    inside = Path(os.path.realpath(results))
    root = Path(os.path.realpath(baselines))
    if inside == root or root in inside.parents:
        raise atomic.OutputError(
            f"--results-dir {results} is inside --baselines-dir {baselines}: a run's results "
            "would be written over the baselines it is compared with; give another --results-dir"
        )


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
    process's median (:func:`perfgate.baseline.pool_processes`). Why: on the H200 a leaderboard
    process keeps an offset of up to 1.7% for its whole life, the same on every shape and
    through re-allocated inputs and flush buffer (docs/views.md), so one process per run made
    the run-to-run spread; a run of several processes averages it.

    ``warmup_rounds``: a warm-up pass of that many rounds in one process, its results discarded
    (see :func:`warm_up`)."""
    from perfgate import baseline as bl

    paths = result_paths(args.results_dir, mode, args.tag)
    json_path = paths["json"].resolve()
    if warmup_rounds is not None:
        json_path = json_path.with_suffix(".warmup.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.unlink(missing_ok=True)  # never compare a stale file from an earlier run
    if warmup_rounds is not None:
        rounds = [f"--perfgate-rounds={warmup_rounds}"]
        return _run_process(mode, args, json_path, rounds, "warm-up pass, discarded")
    processes = gate.processes[mode]
    if processes == 1:
        return _run_process(mode, args, json_path, _rounds_override(mode, args), "mode")
    parts = []
    for i, rounds in enumerate(process_rounds(gate.rounds[mode], processes)):
        part = json_path.with_suffix(f".p{i}.json")
        part.unlink(missing_ok=True)
        what = f"mode, process {i + 1} of {processes}"
        rc, _ = _run_process(mode, args, part, [f"--perfgate-rounds={rounds}"], what)
        if rc:
            return rc, json_path
        try:
            parts.append(_load_result(part, mode))
        except bl.BaselineError as exc:
            print(f"perfgate: {mode} mode: process {i + 1}: {exc}", file=sys.stderr)
            return 2, json_path
    try:
        pooled = bl.pool_processes(parts)
    except bl.BaselineError as exc:
        print(f"perfgate: {mode} mode: {exc}", file=sys.stderr)
        return 2, json_path
    bl.write_atomic(json_path, pooled)
    return 0, json_path


def _run_process(
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


def _load_result(json_path: Path, mode: str) -> dict[str, Any]:
    """The validated result file of a run; raises BaselineError when it is unusable."""
    from perfgate import baseline as bl

    data = bl.load(json_path)
    if bl.mode(data) != mode:
        raise bl.BaselineError(f"{json_path}: holds {bl.mode(data)!r} times, expected {mode!r}")
    return data


def bench_command(args: argparse.Namespace) -> int:
    gate = _gate_settings("bench", args)
    if gate is None:
        return 2
    if not gpu_available():
        return _no_gpu("bench")
    return max(_bench_mode(mode, args, gate) for mode in modes(args.mode))


def _bench_mode(mode: str, args: argparse.Namespace, gate) -> int:
    from perfgate import baseline as bl
    from perfgate import compare

    rc = warm_up(mode, args, gate)
    if rc:
        return rc
    rc, json_path = run_mode(mode, args, gate)
    if rc:
        return rc
    try:
        data = _load_result(json_path, mode)
    except bl.BaselineError as exc:
        print(f"perfgate bench: error: {exc}", file=sys.stderr)
        return 2
    paths = result_paths(args.results_dir, mode, args.tag)
    base = baseline_path(args.baselines_dir, bl.device_key(data), mode, args.tag)
    if not base.is_file():
        return _missing_baseline(mode, base, bl.device_key(data), paths, args)
    try:
        base_data = bl.load(base)
        compare.check_enough_rounds({json_path: bl.samples(data)}, gate.stats)
        looks = _adaptive_rounds(mode, args, gate, base_data, data, json_path)
    except (bl.BaselineError, compare.InputError) as exc:
        print(f"perfgate bench: error: {exc}", file=sys.stderr)
        return 2
    narrowed = selection_given(args.keyword, args.markers, passthrough(args.pytest_args))
    try:
        report = compare.build_report(
            base,
            json_path,
            gate.stats,
            # a narrowed selection leaves the rest of the baseline unmeasured on purpose
            allow_missing=narrowed,
            looks_taken=looks,
        )
    except (bl.BaselineError, compare.InputError) as exc:
        print(f"perfgate bench: error: {exc}", file=sys.stderr)
        return 2
    return compare.present(
        report, json_out=paths["compare"], markdown_out=paths["markdown"], prog="bench"
    )


def _missing_baseline(mode: str, base: Path, key: str, paths, args) -> int:
    from perfgate import baseline as bl

    message = (
        f"no {mode} baseline for device {key!r} ({base}); record one on this device with "
        f"`python -m perfgate update-baselines --mode {mode}` and commit it"
    )
    bl.write_text_atomic(paths["markdown"], f"### perfgate {mode}\n\n**{message}**\n")
    if args.allow_missing_baseline:
        print(f"perfgate bench: WARNING: {message}", file=sys.stderr)
        return 0
    print(f"perfgate bench: error: {message}", file=sys.stderr)
    return 2


def _adaptive_rounds(mode, args, gate, base_data, data, json_path: Path) -> dict[str, int]:
    """More rounds for the benchmarks still inconclusive against the baseline (perfgate.adaptive):
    each later look reruns only those, appends the new samples to the run's file (one run, more
    rounds) and judges again at alpha / looks. Returns the look that decided each benchmark."""
    from perfgate import adaptive
    from perfgate import baseline as bl
    from perfgate.stats import compare_samples

    base_samples, drifts = bl.samples(base_data), bl.drifts(base_data)
    names = [n for n in bl.samples(data) if n in base_samples]
    totals = adaptive.schedule(_rounds(mode, gate, data), gate.stats.looks)

    def extend(pending: list[str], total: int) -> None:
        have = min(len(bl.samples(data)[n]) for n in pending)
        if total > have:
            more = _rerun(mode, args, pending, total - have)
            bl.append_samples(data, more)
            bl.write_atomic(json_path, data)

    def judge(name: str):
        cur = bl.samples(data)[name]
        return compare_samples(base_samples[name], cur, gate.stats, drift=drifts.get(name),
                               looks=gate.stats.looks)  # fmt: skip

    decided = adaptive.decide(names, totals, extend, judge)
    return {name: d.look for name, d in decided.items()}


def _rounds(mode: str, gate, data) -> int:
    """The first look's size: what the first run measured (``--rounds-<mode>`` or the table)."""
    from perfgate import baseline as bl

    return min(len(x) for x in bl.samples(data).values())


def _rerun(mode: str, args: argparse.Namespace, names: list[str], rounds: int) -> dict:
    """``rounds`` more rounds of the benchmarks ``names`` (pytest node ids), as a loaded file."""
    from perfgate import baseline as bl

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
    return _load_result(json_path, mode)


def update_command(args: argparse.Namespace) -> int:
    from perfgate.timing import slowdown_fraction

    if args.isa:
        return _update_isa(args)
    gate = _gate_settings("update-baselines", args)
    if gate is None:
        return 2
    if slowdown_fraction():
        print(
            "perfgate update-baselines: error: MXFP4_BENCH_INJECT_SLOWDOWN is set; "
            "an injected slowdown must never become a baseline",
            file=sys.stderr,
        )
        return 2
    if not gpu_available():
        _no_gpu("update-baselines")
        print(
            "perfgate update-baselines: error: nothing measured, no baseline written",
            file=sys.stderr,
        )
        return 2
    return max(_update_mode(mode, args, gate) for mode in modes(args.mode))


def _update_mode(mode: str, args: argparse.Namespace, gate) -> int:
    from perfgate import baseline as bl
    from perfgate.compare import compare_files

    prog = "perfgate update-baselines"
    runs = gate.baseline_runs if args.runs is None else args.runs  # checked by its option
    try:
        data = _record_runs(mode, args, runs, gate)
    except _RunFailed as exc:
        print(f"{prog}: {mode}: {exc}; baseline unchanged", file=sys.stderr)
        return exc.code
    except bl.BaselineError as exc:
        print(f"{prog}: error: {exc}; baseline unchanged", file=sys.stderr)
        return 2
    base = baseline_path(args.baselines_dir, bl.device_key(data), mode, args.tag)
    problem = _refusal(base, data, args)
    if problem:
        print(f"{prog}: error: {problem}; baseline unchanged", file=sys.stderr)
        return 2
    pooled = result_paths(args.results_dir, mode, args.tag)["json"].with_suffix(".pooled.json")
    bl.write_atomic(pooled, data)
    if base.exists():
        print(f"{prog}: {mode}: new baseline against the one it replaces:")
        compare_files(base, pooled, settings=gate.stats, allow_missing=True)
    bl.write_atomic(base, data)
    fp = bl.fingerprint(data)
    print(
        f"{prog}: wrote {base} ({len(data['benchmarks'])} benchmarks, {runs} runs pooled, "
        f"commit {fp.get('git_commit')}{' + uncommitted changes' if fp.get('git_dirty') else ''})"
        "; commit it"
    )
    return 0


class _RunFailed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _record_runs(mode: str, args: argparse.Namespace, runs: int, gate) -> dict[str, Any]:
    """``runs`` independent runs (separate pytest processes), pooled (perfgate.baseline)."""
    from perfgate import baseline as bl

    recorded = []
    rc = warm_up(mode, args, gate)
    if rc:
        raise _RunFailed("the warm-up pass failed", rc)
    for i in range(runs):
        rc, json_path = run_mode(mode, args, gate)
        if rc:
            raise _RunFailed(f"run {i + 1} of {runs} incomplete", rc)
        recorded.append(_load_result(json_path, mode))
    return bl.pool_runs(recorded)


def _refusal(base: Path, data: dict[str, Any], args: argparse.Namespace) -> str | None:
    """Why the new baseline must not replace ``base``, or None."""
    from perfgate import baseline as bl

    fp = bl.fingerprint(data)
    if not fp.get("git_commit"):
        return (
            "the run records no git commit (not a git checkout?); a baseline must say what it "
            "measured"
        )
    if not base.exists():
        return None
    try:
        old = bl.load(base)
    except bl.BaselineError as exc:
        print(f"perfgate update-baselines: WARNING: replacing an unusable baseline: {exc}")
        return None
    other = bl.device_differences(bl.fingerprint(old), fp)
    if other and not args.replace_device:
        return (
            f"{base} was recorded on another device ({other}); pass --replace-device to replace it"
        )
    dropped = sorted(set(bl.samples(old)) - set(bl.samples(data)))
    if dropped and not args.allow_drop:
        return (
            f"the new baseline would drop {len(dropped)} benchmark(s) of {base} (e.g. "
            f"{dropped[0]}); run the full selection or pass --allow-drop"
        )
    return None


def _update_isa(args: argparse.Namespace) -> int:
    from perfgate import atomic
    from perfgate.isa.collect import TARGETS

    outs = {target: Path(args.baselines_dir) / "isa" / f"{target}.json" for target in TARGETS}
    try:
        atomic.check_outputs({f"--baselines-dir ({t})": out for t, out in outs.items()})
    except atomic.OutputError as exc:
        print(f"perfgate update-baselines: error: {exc}", file=sys.stderr)
        return 2
    rc = 0
    for target, out in outs.items():
        cmd = [sys.executable, "-m", "perfgate", "isa", "--target", target, "--json", str(out)]
        print(f"perfgate update-baselines --isa: {' '.join(cmd[1:])}", flush=True)
        rc = max(rc, spawn.run(cmd, cwd=REPO, check=False).returncode)
    return rc
