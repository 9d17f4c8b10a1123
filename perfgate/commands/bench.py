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
import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from perfgate import atomic, spawn, variants
from perfgate.commands import base
from perfgate.explain import wiring as explain
from perfgate.gate import baseline as bl
from perfgate.gate import compare, device, paths, settings
from perfgate.gate.compare import compare_files
from perfgate.gate.verdict import REGRESSION
from perfgate.history import verdicts
from perfgate.history import wiring as history
from perfgate.measure import session
from perfgate.modes import MODE_NAMES, MODES
from perfgate.refusal import Refusal, RunFailure
from perfgate.submission import bench as submission
from perfgate.variants import VARIANTS_ENV

# what --extend cannot go with: another baseline (--isa), or a replacement's permissions
EXTEND_CLASHES = {
    "--isa": "isa",
    "--replace-device": "replace_device",
    "--allow-drop": "allow_drop",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    bench = subparsers.add_parser(
        "bench",
        help="run the GPU benchmarks and gate them against this device's baseline",
        description=__doc__.split("\n\n")[1],
    )
    _common_options(bench)
    bench.add_argument(
        "--allow-missing-baseline",
        action="store_true",
        help="exit 0 (with a warning) instead of 2 when this device has no baseline yet",
    )
    history.add_options(bench, against=True)

    explain.add_options(bench)
    bench.set_defaults(func=bench_command)

    update = subparsers.add_parser(
        "update-baselines",
        help="run the GPU benchmarks and rewrite this device's baselines",
        description=__doc__.split("\n\n")[2],
    )
    # update-baselines compares the new baseline with the old one once: no adaptive looks
    _common_options(update, skip=("looks",))
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
        "--extend",
        action="store_true",
        help="add this machine's runs to the stored baseline instead of replacing it (the same "
        "commit and environment): a baseline pooled over several machines, whose threshold "
        "covers their offsets",
    )
    update.add_argument(
        "--replace-device",
        action="store_true",
        help="replace a baseline recorded on another device (GPU name, arch or CU count)",
    )
    history.add_options(update)
    update.set_defaults(func=update_command)


def _common_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
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
        help=f"pytest -m selection (default: {session.DEFAULT_MARKERS!r}: leaderboard and reducer groups)",
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
        default=paths.DEFAULT_RESULTS,
        help="where <mode>.json, <mode>.md and <mode>.compare.json go (default: %(default)s)",
    )
    parser.add_argument(
        "--baselines-dir",
        type=Path,
        default=paths.DEFAULT_BASELINES,
        help="root of the per-device baselines (default: perf_baselines in the repository)",
    )

    settings.add_options(parser, settings.STATS, settings.ROUNDS, settings.PROCESSES, skip=skip)
    submission.add_option(parser)
    parser.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        metavar="-- PYTEST_ARGS",
        help="anything after -- goes to pytest (e.g. -- --perfgate-rounds 400 -x)",
    )


def _gate_settings(command: str, args: argparse.Namespace):
    """[tool.perfgate] with this command line's overrides; a Refusal when they are unusable."""
    paths.stem(MODE_NAMES[0], getattr(args, "tag", None))
    check_dirs(args, command)
    history.check(args)
    return settings.from_args(args)


def check_dirs(args: argparse.Namespace, command: str = "bench") -> None:
    """The results must be writable, never land among the baselines (results/<mode>.json
    would then be a baseline, overwritten by every run) nor among the project's files; the
    baselines update-baselines writes go under --baselines-dir alone: OutputError, one line,
    otherwise."""
    results, baselines = Path(args.results_dir), Path(args.baselines_dir)
    atomic.check_output_dirs({"--results-dir": results})
    atomic.check_outputs({"--results-dir": results / f"{paths.stem(MODE_NAMES[0], args.tag)}.md"})
    if command == "update-baselines":
        atomic.check_output_dirs({"--baselines-dir": baselines}, baselines=True)
    inside = Path(os.path.realpath(results))
    root = Path(os.path.realpath(baselines))
    if inside == root or root in inside.parents:
        raise atomic.OutputError(
            f"--results-dir {results} is inside --baselines-dir {baselines}: a run's results "
            "would be written over the baselines it is compared with; give another --results-dir"
        )


def bench_command(args: argparse.Namespace) -> int:
    timing = submission.configure(args)
    gate = _gate_settings("bench", args)

    explain.check(args)
    if not base.gpu_available():
        return base.no_gpu("bench")
    rc = submission.leaderboard_tier(args, "bench")
    if rc:
        return rc
    with timing:
        return session.each_mode(args.mode, lambda mode: _bench_mode(mode, args, gate))


def _bench_mode(mode: str, args: argparse.Namespace, gate) -> int:

    rc = session.warm_up(mode, args, gate)
    if rc:
        return rc
    rc, json_path = session.run_mode(mode, args, gate)
    if rc:
        return rc
    data = session.load_result(json_path, mode)
    rc, verdict = _judge(mode, args, gate, data, json_path)
    return history.keep(args, json_path, rc, "bench", verdict)


def _judge(mode: str, args: argparse.Namespace, gate, data, json_path: Path):
    """The gate's exit code and its verdict for the history (None: no comparison was made)."""
    out = paths.result_paths(args.results_dir, mode, args.tag)
    base = paths.baseline_path(args.baselines_dir, bl.device_key(data), mode, args.tag)
    base, gate = history.judged_against(args, data, json_path, base, gate, "bench")
    if not base.is_file():
        return _missing_baseline(mode, base, bl.device_key(data), out, args), None
    base_data = bl.load(base)
    submission.check_source(base, base_data, data)
    compare.check_enough_rounds({json_path: bl.samples(data)}, gate.stats)
    looks = session.adaptive_rounds(mode, args, gate, base_data, data, json_path)
    narrowed = session.selection_given(
        args.keyword, args.markers, session.passthrough(args.pytest_args)
    )
    report = compare.build_report(
        base,
        json_path,
        gate.stats,
        # a narrowed selection leaves the rest of the baseline unmeasured on purpose
        allow_missing=narrowed,
        looks_taken=looks,
    )
    report = _explained(args, report, base_data, data)
    rc = compare.present(
        report, json_out=out["compare"], markdown_out=out["markdown"], prog="bench"
    )
    return rc, verdicts.from_exit_code(rc)


def _explained(args: argparse.Namespace, report, base_data: dict, data: dict):
    """``report`` with the "Why" section of its flagged benchmarks: the baseline's commit
    against this run's (the working tree when it had uncommitted changes)."""
    flagged = [r.name for r in report.rows if r.verdict == REGRESSION]
    if not flagged or not hasattr(args, "explain_budget_s") or getattr(args, "submission", None):
        return report  # update-baselines; a submission file is no revision of kernels/

    def commit(doc: dict) -> tuple[str | None, bool]:
        fp = ((doc.get("machine_info") or {}).get("perfgate") or {}).get("fingerprint") or {}
        return fp.get("git_commit") or None, bool(fp.get("git_dirty"))

    base, _ = commit(base_data)
    head, dirty = commit(data)
    why = explain.why_section(
        base, None if dirty else head, flagged, budget_s=args.explain_budget_s
    )
    return dataclasses.replace(report, why=why)


def _missing_baseline(mode: str, base: Path, key: str, out, args) -> int:

    message = (
        f"no {mode} baseline for device {key!r} ({base}); record one on this device with "
        f"`python -m perfgate update-baselines --mode {mode}{submission.hint(args)}` and commit it"
    )
    atomic.write_text(out["markdown"], f"### perfgate {mode}\n\n**{message}**\n")
    if args.allow_missing_baseline:
        print(f"perfgate bench: WARNING: {message}", file=sys.stderr)
        return 0
    raise Refusal(message)


def update_command(args: argparse.Namespace) -> int:
    if args.extend:
        clash = [f for f, on in EXTEND_CLASHES.items() if getattr(args, on)]
        if clash:
            raise Refusal(
                f"--extend adds runs to the stored baseline; {clash[0]} cannot go with it"
            )
    if args.isa:
        return _update_isa(args)
    timing = submission.configure(args)
    gate = _gate_settings("update-baselines", args)
    if variants.named():
        raise Refusal(f"{VARIANTS_ENV} is set; an injected slowdown must never become a baseline")
    if not base.gpu_available():
        base.no_gpu("update-baselines")  # GpuRequired where a GPU is required
        raise Refusal("nothing measured, no baseline written")
    rc = submission.leaderboard_tier(args, "update-baselines")
    if rc:
        return rc
    with timing:
        return session.each_mode(args.mode, lambda mode: _update_mode(mode, args, gate))


def _update_mode(mode: str, args: argparse.Namespace, gate) -> int:
    prog = "perfgate update-baselines"
    runs = gate.baseline_runs if args.runs is None else args.runs  # checked by its option
    if args.extend and runs < 2:
        raise Refusal(f"--extend needs --runs >= 2 (each machine's run-to-run drift), got {runs}")
    try:
        data = _record_runs(mode, args, runs, gate)
    except _RunFailed as exc:  # a pytest run that failed: its exit code, not a refusal
        print(f"{prog}: {mode}: {exc}; baseline unchanged", file=sys.stderr)
        return exc.code
    base = paths.baseline_path(args.baselines_dir, bl.device_key(data), mode, args.tag)
    problem = _refusal(base, data, args)
    if problem:
        raise Refusal(f"{problem}; baseline unchanged")
    stored = _extended(base, data) if args.extend else None
    pooled = paths.result_paths(args.results_dir, mode, args.tag)["json"].with_suffix(
        ".pooled.json"
    )
    atomic.write_json(pooled, data)
    if base.exists():
        what = (
            "this machine's runs against the stored baseline"
            if stored
            else "new baseline against the one it replaces"
        )
        print(f"{prog}: {mode}: {what}:")
        compare_files(base, pooled, settings=gate.stats, allow_missing=True)
    written = bl.extend_runs(stored, data) if stored else data
    atomic.write_json(base, written)
    fp = bl.fingerprint(data)
    pooled_runs = f"{runs} runs pooled"
    if stored:
        before = _run_count(stored)
        pooled_runs = f"{before + runs} runs pooled: {before} stored + {runs} of this machine"
    print(
        f"{prog}: wrote {base} ({len(data['benchmarks'])} benchmarks, {pooled_runs}, "
        f"commit {fp.get('git_commit')}{' + uncommitted changes' if fp.get('git_dirty') else ''})"
        "; commit it"
    )
    return history.keep(args, pooled, 0, "update-baselines")


def _extended(base: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The stored baseline that ``--extend`` adds this machine's runs to; Refusal when there is
    none or the runs cannot be pooled with it (:func:`perfgate.gate.baseline.extension_refusal`)."""
    if not base.exists():
        raise Refusal(f"--extend: no baseline at {base} to extend; baseline unchanged")
    stored = bl.load(base)
    problem = bl.extension_refusal(stored, data)
    if problem:
        raise Refusal(f"--extend: {problem}; baseline unchanged")
    return stored


def _run_count(data: dict[str, Any]) -> int:
    return len(data["benchmarks"][0]["extra_info"][bl.RUNS_KEY]["medians"])


class _RunFailed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _record_runs(mode: str, args: argparse.Namespace, runs: int, gate) -> dict[str, Any]:
    """``runs`` independent runs (separate pytest processes), pooled (perfgate.gate.baseline)."""
    recorded = []
    rc = session.warm_up(mode, args, gate)
    if rc:
        raise _RunFailed("the warm-up pass failed", rc)
    for i in range(runs):
        rc, json_path = session.run_mode(mode, args, gate)
        if rc:
            raise _RunFailed(f"run {i + 1} of {runs} incomplete", rc)
        recorded.append(session.load_result(json_path, mode))
    return bl.pool_runs(recorded)


def _refusal(base: Path, data: dict[str, Any], args: argparse.Namespace) -> str | None:
    """Why the new baseline must not replace ``base``, or None."""
    injected = bl.injection(data)
    if injected:
        return f"the run records an injection ({injected}); a baseline must time the kernels alone"
    fp = bl.fingerprint(data)
    if not fp.get("git_commit"):
        return (
            "the run records no git commit (not a git checkout?); a baseline must say what it "
            "measured"
        )
    if not base.exists() or args.extend:  # --extend: _extended's checks
        return None
    old, unusable = bl.load_replaced(base)
    if old is None:
        print(f"perfgate update-baselines: WARNING: replacing an unusable baseline: {unusable}")
        return None
    other = device.differences(bl.fingerprint(old), fp)
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
    """Every target's report into a private directory first; the baselines are replaced only
    once every target has compiled, all together (atomic.write_all): all or nothing."""
    from perfgate.isa.collect import TARGETS

    prog = "perfgate update-baselines --isa"
    outs = {target: Path(args.baselines_dir) / "isa" / f"{target}.json" for target in TARGETS}
    atomic.check_outputs({f"--baselines-dir ({t})": out for t, out in outs.items()}, baselines=True)
    with tempfile.TemporaryDirectory(prefix="perfgate-update-isa-") as staging:
        staged = {target: Path(staging) / f"{target}.json" for target in TARGETS}
        for target, report in staged.items():
            cmd = [sys.executable, "-m", "perfgate", "isa", "--target", target]
            print(f"{prog}: {' '.join(cmd[1:])}", flush=True)
            rc = spawn.run([*cmd, "--json", str(report)], cwd=paths.REPO, check=False).returncode
            if rc != 0 or not report.is_file():
                how = spawn.describe(rc) if rc != 0 else "wrote no report"
                raise RunFailure(
                    f"perfgate isa --target {target} {how}; no ISA baseline written",
                    spawn.exit_code(rc) if rc != 0 else 2,
                )
        atomic.write_all({outs[t]: report.read_bytes() for t, report in staged.items()})
    print(f"{prog}: wrote {', '.join(str(out) for out in outs.values())}; commit them")
    return 0
