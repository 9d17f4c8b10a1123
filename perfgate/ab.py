"""``python -m perfgate ab --base REV [--head REV]``: base and head measured interleaved, one GPU.

The base revision is checked out into a temporary git worktree (and the head too when
``--head`` names one; otherwise the head is this working tree, uncommitted edits included). Each
side builds its native reducer (``python -m kernels.reducer.build`` in its own tree, into its
own cache) and gets a worker process (:mod:`perfgate.sampler`) that imports that side's
``kernels`` while the timer, the flush, the inputs and the output checks are this checkout's.
The two workers share the GPU and take turns in ABBA blocks of rounds (:mod:`perfgate.interleave`),
so clocks, temperature and other tenants hit both sides alike: the comparison has no
day-to-day drift, and its threshold is ``ab_min_effect`` (1.5%) instead of a stored baseline's.

Rounds are adaptive (:mod:`perfgate.adaptive`): ``rounds.device`` a side first, doubled for the
benchmarks still inconclusive, at most ``looks`` looks, each at ``alpha / looks``.

Verdicts, reports (terminal table, ``--json``, ``--markdown``) and exit codes are ``compare``'s:
0 no regression; 1 a regression, a benchmark still inconclusive after every look (unless
``inconclusive_exit = 0``) or a wrong output on the head side; 2 unusable input (an unknown
revision, a base that does not build or whose outputs are wrong, no GPU with
``PERFGATE_REQUIRE_GPU=1``). Only the ``device`` timing mode: leaderboard-mode medians shift by
up to 3% from one process to the next (README), more than an A/B threshold of 1.5% allows.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfgate import spawn
from perfgate.bench import DEFAULT_RESULTS, REPO

GROUPS = ("leaderboard", "reducer", "grid")
DEFAULT_GROUPS = ("leaderboard", "reducer")


class AbError(Exception):
    """A run that cannot be judged; ``code`` is the exit code, the message one line."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


# -- the benchmarks -----------------------------------------------------------------------------
def cases(groups: tuple[str, ...] = DEFAULT_GROUPS, keyword: str | None = None) -> list[dict]:
    """The worker cases of ``groups``, named as the pytest benchmarks are (so that reports and
    baselines speak of the same benchmarks); ``keyword`` keeps the names containing it."""
    from perfgate import shapes

    unknown = [g for g in groups if g not in GROUPS]
    if unknown or not groups:
        raise ValueError(f"--groups must name some of {', '.join(GROUPS)}, got {groups!r}")
    out = []
    gemm_files = {
        "leaderboard": (shapes.LEADERBOARD, "test_leaderboard"),
        "grid": (shapes.GRID, "test_grid"),
    }
    for group in groups:
        if group == "reducer":
            out += [
                {
                    "name": f"tests/perf/test_reducer.py::test_reducer[{c.id}]",
                    "kind": "reducer",
                    "splits": c.splits,
                    "m": c.m,
                    "n": c.n,
                    "set_bytes": shapes.reducer_set_bytes(c),
                }
                for c in shapes.REDUCER
            ]
            continue
        found, test = gemm_files[group]
        out += [
            {
                "name": f"tests/perf/{test}.py::{test}[{s.id}]",
                "kind": "gemm",
                "m": s.m,
                "n": s.n,
                "k": s.k,
                "set_bytes": shapes.gemm_set_bytes(s),
            }
            for s in found
        ]
    return [c for c in out if keyword is None or keyword in c["name"]]


# -- revisions ----------------------------------------------------------------------------------
def git(*args: str, cwd: Path | None = None) -> str:
    """``git args`` in ``cwd`` (default: this checkout, :data:`REPO`); AbError if it fails."""
    # safe.directory: inside the ROCm container the mounted checkout belongs to another user,
    # and git refuses such a repository otherwise
    cmd = ["git", "-c", "safe.directory=*", *args]
    proc = spawn.run(cmd, cwd=REPO if cwd is None else cwd, capture_output=True, text=True)
    if proc.returncode:
        raise AbError(f"git {' '.join(args)}: {' '.join(proc.stderr.split()) or 'failed'}")
    return proc.stdout.strip()


def resolve(rev: str) -> str:
    """The commit ``rev`` names; AbError (exit 2) for an unknown revision."""
    if not rev or rev.startswith("-"):
        raise AbError(f"--base/--head must name a git revision, got {rev!r}")
    try:
        return git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except AbError:
        raise AbError(f"{rev!r} names no commit of {REPO} (fetch it first?)") from None


@contextlib.contextmanager
def worktree(commit: str, parent: Path, label: str = "rev") -> Iterator[Path]:
    """``commit`` checked out (detached) under ``parent`` as ``<label>-<commit>``; removed
    afterwards whatever happens. The label keeps two sides of one revision apart (``--base X
    --head X``, the null check): each gets its own tree, build and cache."""
    path = parent / f"{label}-{commit[:12]}"
    git("worktree", "add", "--detach", "--quiet", str(path), commit)
    try:
        yield path
    finally:
        # git() raises; cleanup must not: a failed removal is pruned with the temporary dir
        for args in (("worktree", "remove", "--force", str(path)), ("worktree", "prune")):
            with contextlib.suppress(AbError):
                git(*args)


def build(root: Path, cache: Path | None, label: str) -> None:
    """The side's native reducer, built in its own tree (a tree without the build skips it: the
    worker then reports which reducer ran)."""
    if not (root / "kernels" / "reducer" / "build.py").is_file():
        print(f"perfgate ab: {label}: no kernels/reducer/build.py; nothing to build", flush=True)
        return
    env = _side_env(cache)
    cmd = [sys.executable, "-m", "kernels.reducer.build"]
    proc = spawn.run(cmd, cwd=root, env=env, check=False)
    if proc.returncode:
        raise AbError(f"{label}: python -m kernels.reducer.build exited {proc.returncode}")


def _side_env(cache: Path | None) -> dict[str, str]:
    import os

    env = dict(os.environ)
    if cache is not None:
        # Each side's reducer in its own cache: both record a manifest for the same arch.
        env["MXFP4_CACHE_DIR"] = str(cache)
    return env


# -- measuring ----------------------------------------------------------------------------------
def measure_ab(sides: dict[str, Any], cases: list[dict], settings, rounds: int):
    """Adaptive interleaved rounds of both sides; (decisions, samples by stream key)."""
    from perfgate import adaptive, interleave
    from perfgate.sampler import PLAIN
    from perfgate.stats import compare_samples

    base, head = sides["base"], sides["head"]
    samples: dict[tuple, list[float]] = {}

    def pair(name: str) -> list[interleave.Stream]:
        return [interleave.Stream(base, name, PLAIN), interleave.Stream(head, name, PLAIN)]

    def extend(pending: list[str], total: int) -> None:
        for name in pending:
            streams = pair(name)
            have = len(samples.get(streams[0].key, []))
            interleave.measure(streams, total - have, samples)

    def judge(name: str):
        a, b = (samples[s.key] for s in pair(name))
        return compare_samples(a, b, settings, ab=True, looks=settings.looks)

    totals = adaptive.schedule(rounds, settings.looks)
    decisions = {}
    for case in cases:  # one case at a time on each side, every look of it before the next
        for label, side in sides.items():
            try:
                side.ask({"op": "prepare", "cases": [case], "levels": []})
            except interleave.WorkerError as exc:
                # a wrong or broken head is the pull request's fault: that fails the gate
                raise AbError(str(exc), 1 if label == "head" else 2) from None
        decisions.update(adaptive.decide([case["name"]], totals, extend, judge))
    return decisions, samples


def run(args: argparse.Namespace, gate) -> int:
    from perfgate import interleave

    base_sha = resolve(args.base)
    head_sha = resolve(args.head) if args.head else None
    selected = cases(tuple(args.groups.split(",")), args.keyword)
    if not selected:
        raise AbError(f"-k {args.keyword!r} matches no benchmark of {args.groups}")
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perfgate-ab-")))
        base_root = stack.enter_context(worktree(base_sha, tmp, "base"))
        head_root = stack.enter_context(worktree(head_sha, tmp, "head")) if head_sha else REPO
        roots = {"base": (base_root, tmp / "cache-base"), "head": (head_root, None)}
        if head_sha:
            roots["head"] = (head_root, tmp / "cache-head")
        for label, (root, cache) in roots.items():
            build(root, cache, label)
        sides = {}
        for label, (root, cache) in roots.items():
            env = {k: v for k, v in _side_env(cache).items() if k == "MXFP4_CACHE_DIR"}
            side = interleave.SideProcess(label, root, env)
            stack.callback(side.close)
            sides[label] = side
        try:
            decisions, samples = measure_ab(sides, selected, gate.stats, gate.rounds["device"])
        except interleave.WorkerError as exc:
            raise AbError(str(exc), 2) from None
        infos = {label: {"reducer_backend": side.reducer_backend} for label, side in sides.items()}
    return report(args, gate, decisions, samples, infos, base_sha, head_sha)


def report(args, gate, decisions, samples, infos, base_sha: str, head_sha: str | None) -> int:
    from perfgate import atomic, compare, fingerprint
    from perfgate.sampler import PLAIN

    fp = fingerprint.collect()
    base_s = {n: samples[("base", n, PLAIN)] for n in decisions}
    head_s = {n: samples[("head", n, PLAIN)] for n in decisions}
    rows = compare.judge(
        base_s,
        head_s,
        gate.stats,
        ab=True,
        looks=gate.stats.looks,
        looks_taken={n: d.look for n, d in decisions.items()},
    )
    head_label = f"head {args.head} ({head_sha[:12]})" if head_sha else _working_tree(fp)
    rep = compare.make_report(
        rows,
        gate.stats,
        baseline_path=f"base {args.base} ({base_sha[:12]})",
        current_path=head_label,
        device_key=fp["device_key"],
        mode="device",
        allow_missing=False,
        notes=[
            f"reducer: base {infos['base'].get('reducer_backend')}, "
            f"head {infos['head'].get('reducer_backend')}"
        ],
        ab=True,
        looks=gate.stats.looks,
    )
    paths = outputs(args)
    atomic.write_json(
        paths["samples"],
        {
            "base": base_sha,
            "head": head_sha,
            "fingerprint": fp,
            "base_samples": base_s,
            "head_samples": head_s,
            "prepare": infos,
        },
    )
    return compare.present(
        rep, json_out=paths["--json"], markdown_out=paths["--markdown"], prog="ab"
    )


def outputs(args: argparse.Namespace) -> dict[str, Path]:
    """What ``ab`` writes, by the option that names it: the report as JSON and markdown (by
    default in ``--results-dir``) and the samples of both sides."""
    results = Path(args.results_dir)
    return {
        "--json": Path(args.json_out) if args.json_out else results / "ab.json",
        "--markdown": Path(args.markdown_out) if args.markdown_out else results / "ab.md",
        "samples": results / "ab.samples.json",
    }


def _working_tree(fp: dict) -> str:
    commit = fp.get("git_commit") or "unknown commit"
    dirty = " + uncommitted changes" if fp.get("git_dirty") else ""
    return f"head: working tree ({commit[:12]}{dirty})"


# -- command line -------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ab",
        help="measure a base revision and the head interleaved on one GPU and gate the change",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base", required=True, metavar="REV", help="the revision to compare with")
    parser.add_argument(
        "--head",
        metavar="REV",
        help="the revision to gate (default: this working tree, uncommitted edits included)",
    )
    parser.add_argument(
        "--groups",
        default=",".join(DEFAULT_GROUPS),
        help=f"comma-separated benchmark groups of {', '.join(GROUPS)} (default: %(default)s)",
    )
    parser.add_argument("-k", dest="keyword", metavar="TEXT", help="only names containing TEXT")
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=DEFAULT_RESULTS,
        help="where ab.json, ab.md and ab.samples.json (every sample of both sides) go "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--json",
        dest="json_out",
        metavar="OUT",
        help="write the report as JSON (default: RESULTS/ab.json)",
    )
    parser.add_argument(
        "--markdown",
        dest="markdown_out",
        metavar="OUT",
        help="write the report as GitHub markdown (default: RESULTS/ab.md)",
    )
    from perfgate import settings

    # the A/B threshold is ab_min_effect alone (no drift between the sides: no noise or drift
    # terms), and the rounds are device mode's
    settings.add_options(
        parser,
        settings.STATS,
        only=("rounds.device",),
        skip=("min_effect", "noise_factor", "min_effect_drift", "drift_factor"),
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from perfgate import bench, settings

    try:
        gate = settings.from_args(args)
    except settings.SettingsError as exc:
        print(f"perfgate ab: error: {exc}", file=sys.stderr)
        return 2
    if shutil.which("git") is None:
        print(
            "perfgate ab: error: git is not on PATH (the base is a git worktree)", file=sys.stderr
        )
        return 2
    try:
        from perfgate.compare import check_outputs

        check_outputs(outputs(args), {})
        resolve(args.base)
        if args.head:
            resolve(args.head)
        cases(tuple(args.groups.split(",")), args.keyword)
    except (AbError, ValueError) as exc:
        print(f"perfgate ab: error: {exc}", file=sys.stderr)
        return 2
    if not bench.gpu_available():
        return bench._no_gpu("ab")
    try:
        return run(args, gate)
    except AbError as exc:
        print(f"perfgate ab: error: {exc}", file=sys.stderr)
        return exc.code
