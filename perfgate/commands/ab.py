"""``python -m perfgate ab --base REV [--head REV]``: base and head measured interleaved, one GPU.

The base revision is checked out into a temporary git worktree (and the head too when
``--head`` names one; otherwise the head is this working tree, uncommitted edits included). Each
side builds its native reducer (``python -m kernels.reducer.build`` in its own tree, into its
own cache) and gets a worker process (:mod:`perfgate.measure.worker`) that imports that side's
``kernels`` while the timer, the flush, the inputs and the output checks are this checkout's.
The two workers share the GPU and take turns in ABBA blocks of rounds (:mod:`perfgate.measure.interleave`),
so clocks, temperature and other tenants hit both sides alike: the comparison has no
day-to-day drift, and its threshold is ``ab_min_effect`` (1.5%) instead of a stored baseline's.

Rounds are adaptive (:mod:`perfgate.measure.adaptive`): ``rounds.device`` a side first, doubled for the
benchmarks still inconclusive, at most ``looks`` looks, each at ``alpha / looks``.

Verdicts, reports (terminal table, ``--json``, ``--markdown``) and exit codes are ``compare``'s:
0 no regression; 1 a regression, a benchmark still inconclusive after every look (unless
``inconclusive_exit = 0``) or a wrong output on the head side; 2 unusable input (an unknown
revision, a base that does not build or whose outputs are wrong, no GPU with
``PERFGATE_REQUIRE_GPU=1``). Only the ``device`` timing mode: leaderboard-mode medians shift by
up to 3% from one process to the next (README), more than an A/B threshold of 1.5% allows.

``--base-submission A.py --head-submission B.py`` (instead of ``--base``/``--head``) compares two
submission files: each worker times its file's ``custom_kernel`` (one call per input copy in the
graph) with this checkout's timer, inputs and checks; the same gate, reports and exit codes, the
reducer group left out (docs/submission.md).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from perfgate import catalog
from perfgate.commands import base
from perfgate.gate import paths
from perfgate.history import wiring as history
from perfgate.revisions import DEFAULT_GROUPS as DEFAULT_GROUPS  # ab's default, for callers
from perfgate.revisions import AbError, add_revision_options, resolve
from perfgate.submission import sides as submission_sides


def report(
    args, gate, decisions, samples, infos, base_sha: str, head_sha: str | None, labels=None
) -> int:
    from perfgate import atomic
    from perfgate.gate import compare
    from perfgate.measure import fingerprint
    from perfgate.measure.worker import PLAIN

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
    base_label = f"base {args.base} ({base_sha[:12]})" if labels is None else labels["base"]
    rep = compare.make_report(
        rows,
        gate.stats,
        baseline_path=base_label,
        current_path=head_label if labels is None else labels["head"],
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
    add_revision_options(
        parser,
        ("--base", "the revision to compare with (required, unless two files are compared)"),
        ("--head", "the revision to gate (default: this working tree, uncommitted edits included)"),
        old_required=False,
        new_required=False,
    )
    submission_sides.add_options(parser)
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=paths.DEFAULT_RESULTS,
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
    from perfgate.gate import settings

    # the A/B threshold is ab_min_effect alone (no drift between the sides: no noise or drift
    # terms), and the rounds are device mode's
    settings.add_options(
        parser,
        settings.STATS,
        only=("rounds.device",),
        skip=("min_effect", "noise_factor", "min_effect_drift", "drift_factor"),
    )
    history.add_options(parser)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from perfgate.gate import settings

    problem = submission_sides.option_problem(args)
    if problem:
        return base.error("ab", problem)
    try:
        gate = settings.from_args(args)
    except settings.SettingsError as exc:
        return base.error("ab", exc)
    if submission_sides.given(args):
        return _submissions(args, gate)
    if shutil.which("git") is None:
        return base.error("ab", "git is not on PATH (the base is a git worktree)")
    try:
        from perfgate.gate.compare import check_outputs

        check_outputs(outputs(args), {})
        resolve(args.base)
        if args.head:
            resolve(args.head)
        catalog.cases(tuple(args.groups.split(",")), args.keyword)
        history.check(args, outputs(args).values())
    except (AbError, ValueError) as exc:
        return base.error("ab", exc)
    if not base.gpu_available():
        return base.no_gpu("ab")
    try:
        return history.keep(args, outputs(args)["samples"], _measure(args, gate), "ab")
    except AbError as exc:
        print(f"perfgate ab: error: {exc}", file=sys.stderr)
        return exc.code


def _measure(args: argparse.Namespace, gate) -> int:
    from perfgate.measure import ab

    base_sha = resolve(args.base)
    head_sha = resolve(args.head) if args.head else None
    selected = catalog.cases(tuple(args.groups.split(",")), args.keyword)
    if not selected:
        raise AbError(f"-k {args.keyword!r} matches no benchmark of {args.groups}")
    decisions, samples, infos = ab.run(base_sha, head_sha, selected, gate)
    return report(args, gate, decisions, samples, infos, base_sha, head_sha)


def _submissions(args: argparse.Namespace, gate) -> int:
    from perfgate.gate.compare import check_outputs
    from perfgate.measure import ab

    try:
        files = submission_sides.check_files(args)
        check_outputs(outputs(args), {"--base-submission": files["base"],
                                      "--head-submission": files["head"]})  # fmt: skip
        found = catalog.cases(tuple(args.groups.split(",")), args.keyword)
        if not found:
            raise ValueError(f"-k {args.keyword!r} matches no benchmark of {args.groups}")
        selected = submission_sides.gemm_cases(found)
    except (AbError, ValueError) as exc:
        return base.error("ab", exc)
    if not base.gpu_available():
        return base.no_gpu("ab")
    try:
        decisions, samples, infos = ab.run_submissions(files["base"], files["head"], selected, gate)
    except AbError as exc:
        print(f"perfgate ab: error: {exc}", file=sys.stderr)
        return exc.code
    shas = {label: f"sha256:{info['timed']['sha256']}" for label, info in infos.items()}
    labels = submission_sides.labels(infos)
    return report(args, gate, decisions, samples, infos, shas["base"], shas["head"], labels)
