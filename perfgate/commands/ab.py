"""``python -m perfgate ab --base REV [--head REV]``: base and head measured interleaved, one GPU.

The base revision is checked out into a temporary git worktree (and the head too when
``--head`` names one; otherwise the head is this working tree, uncommitted edits included). Each
side builds its native reducer (``python -m kernels.reducer.build`` in its own tree, into its
own cache) and gets a worker process (:mod:`perfgate.measure.worker`) that imports that side's
``kernels`` while the timer, the flush, the inputs and the output checks are this checkout's.

**The worker process is the unit** (docs/ab-process-level.md): a process keeps a level of its
own for its life, so each side is measured in several workers, alternated A1 B1 A2 B2 ... in
ABBA blocks on the one GPU, and the verdict trusts only what replicates across processes:
Student's t on the per-process levels (each the 20%-trimmed mean of its rounds). Looks are
adaptive: ``ab_<mode>.processes`` workers a side first (3), then as many again in new workers
for the benchmarks still undecided (6, 12, 24 a side with ``looks = 4``), each look at
``alpha / looks``. A regression is a CI above ``+ab_<mode>.floor`` (0.25%); unchanged is a CI
within ``+-ab_<mode>.min_effect`` (1% in device mode, 2% in leaderboard mode).

``--mode leaderboard`` times the whole call: each round is one ``custom_kernel(data)`` after the
leaderboard's 2 GiB flush, so a host-path or launch regression is gated by A/B too.

Verdicts, reports (terminal table, ``--json``, ``--markdown``; per-process levels in the notes
and the JSON) and exit codes are ``compare``'s: 0 no regression; 1 a regression, a benchmark
still inconclusive after every look (unless ``inconclusive_exit = 0``) or a wrong output on the
head side; 2 unusable input (an unknown revision, a base that does not build or whose outputs
are wrong, no GPU with ``PERFGATE_REQUIRE_GPU=1``).

``--base-submission A.py --head-submission B.py`` (instead of ``--base``/``--head``) compares two
submission files: each worker times its file's ``custom_kernel`` (one call per input copy in the
graph) with this checkout's timer, inputs and checks; the same gate, reports and exit codes, the
reducer group left out (docs/submission.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from pathlib import Path

from perfgate import atomic, catalog
from perfgate.commands import base
from perfgate.explain import wiring as explain
from perfgate.gate import paths, settings
from perfgate.gate.compare import check_outputs as check_reports
from perfgate.gate.verdict import REGRESSION
from perfgate.history import wiring as history
from perfgate.measure import ab, fingerprint
from perfgate.measure.ab import check_mode_options, default_groups
from perfgate.modes import AB_MODE_NAMES
from perfgate.refusal import Refusal
from perfgate.revisions import DEFAULT_GROUPS as DEFAULT_GROUPS  # ab's default, for callers
from perfgate.revisions import AbError, add_revision_options, resolve
from perfgate.submission import sides as submission_sides

GROUPS = tuple(name for name in catalog.GROUPS if name != "host")  # what device mode times


def report(
    args, gate, decisions, store, infos, base_sha: str, head_sha: str | None, labels=None
) -> int:
    from perfgate.gate import ab_report, compare, process_ab

    fp = fingerprint.collect()
    mode = getattr(args, "mode", "device")
    head_label = f"head {args.head} ({head_sha[:12]})" if head_sha else _working_tree(fp)
    rep = ab_report.make(
        decisions,
        store,
        process_ab.design_for(gate, mode),
        mode,
        gate,
        baseline_path=f"base {args.base} ({base_sha[:12]})" if labels is None else labels["base"],
        current_path=head_label if labels is None else labels["head"],
        device_key=fp["device_key"],
        notes=[
            f"reducer: base {infos['base'].get('reducer_backend')}, "
            f"head {infos['head'].get('reducer_backend')}"
        ],
    )
    if labels is None:  # two revisions (not two files): say why a flagged benchmark is slower
        rep = _explained(args, rep, base_sha, head_sha)
    paths = outputs(args)
    record = ab_report.samples_record(store, decisions)
    atomic.write_json(
        paths["samples"],
        {
            "base": base_sha,
            "head": head_sha,
            "fingerprint": fp,
            "unit": "process",
            "mode": mode,
            "base_samples": record["base"],
            "head_samples": record["head"],
            "prepare": infos,
            "looks": infos.get("looks", []),
        },
    )
    return compare.present(
        rep, json_out=paths["--json"], markdown_out=paths["--markdown"], prog="ab"
    )


def _explained(args, rep, base_sha: str, head_sha: str | None):
    """``rep`` with the "Why" section of its flagged benchmarks (perfgate.explain.wiring)."""
    flagged = [r.name for r in rep.rows if r.verdict == REGRESSION]
    if not flagged or not hasattr(args, "explain_budget_s"):  # a caller that asks for none
        return rep
    why = explain.why_section(base_sha, head_sha, flagged, budget_s=args.explain_budget_s)
    return dataclasses.replace(rep, why=why)


def check_outputs(args: argparse.Namespace, inputs: dict) -> None:
    """What ab writes passes perfgate's output rule: --results-dir a directory outside the
    project's files, and no report over an input or the settings file (OutputError)."""
    atomic.check_output_dirs({"--results-dir": args.results_dir})
    check_reports(outputs(args), inputs)


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
        groups_default=None,
        groups_help=f"comma-separated benchmark groups of {', '.join(GROUPS)} (default: "
        f"{','.join(DEFAULT_GROUPS)} in device mode, leaderboard in leaderboard mode)",
    )
    submission_sides.add_options(parser)
    parser.add_argument(
        "--mode",
        choices=AB_MODE_NAMES,
        default="device",
        help="device: graph replays over the input copies (kernel time); leaderboard: one "
        "whole custom_kernel call per round after a 2 GiB flush (default: %(default)s)",
    )
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

    # the process-level A/B of each mode ([tool.perfgate.ab_<mode>]), at alpha
    settings.add_options(parser, settings.AB, only=("alpha", "inconclusive_exit"))
    history.add_options(parser)

    explain.add_options(parser)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    submission_sides.check_options(args)
    gate = settings.from_args(args)

    explain.check(args)
    if submission_sides.given(args):
        return _submissions(args, gate)
    if shutil.which("git") is None:
        raise Refusal("git is not on PATH (the base is a git worktree)")
    check_outputs(args, {})

    check_mode_options(settings.overrides_from(args), args.mode)
    args.groups = args.groups or default_groups(args.mode)
    resolve(args.base)
    if args.head:
        resolve(args.head)
    catalog.cases(tuple(args.groups.split(",")), args.keyword, mode=args.mode)
    history.check(args, outputs(args).values())
    if not base.gpu_available():
        return base.no_gpu("ab")
    return history.keep(args, outputs(args)["samples"], _measure(args, gate), "ab")


def _measure(args: argparse.Namespace, gate) -> int:
    base_sha = resolve(args.base)
    head_sha = resolve(args.head) if args.head else None
    mode = getattr(args, "mode", "device")
    selected = catalog.cases(tuple(args.groups.split(",")), args.keyword, mode=mode)
    if not selected:
        raise AbError(f"-k {args.keyword!r} matches no benchmark of {args.groups}")
    decisions, store, infos, looks = ab.run(base_sha, head_sha, selected, gate, mode)
    infos["looks"] = looks
    return report(args, gate, decisions, store, infos, base_sha, head_sha)


def _submissions(args: argparse.Namespace, gate) -> int:
    files = submission_sides.check_files(args)
    check_outputs(args, {"--base-submission": files["base"],
                         "--head-submission": files["head"]})  # fmt: skip
    ab.check_mode_options(settings.overrides_from(args), args.mode)
    args.groups = args.groups or ab.default_groups(args.mode)
    found = catalog.cases(tuple(args.groups.split(",")), args.keyword, mode=args.mode)
    if not found:
        raise Refusal(f"-k {args.keyword!r} matches no benchmark of {args.groups}")
    selected = submission_sides.gemm_cases(found)
    if not base.gpu_available():
        return base.no_gpu("ab")
    submission_sides.check_leaderboard_tier(files)
    decisions, store, infos, looks = ab.run_submissions(
        files["base"], files["head"], selected, gate, args.mode
    )
    shas = {label: f"sha256:{infos[label]['timed']['sha256']}" for label in ("base", "head")}
    labels = submission_sides.labels(infos)
    infos["looks"] = looks
    return report(args, gate, decisions, store, infos, shas["base"], shas["head"], labels)
