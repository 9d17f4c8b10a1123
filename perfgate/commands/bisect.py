"""``python -m perfgate bisect --good REV --bad REV [-k TEXT]``: the commit that made it slower.

Bisects the first-parent line from GOOD to BAD with same-job A/B runs (``perfgate ab --base A
--head B``, both sides checked out into worktrees and measured interleaved on this GPU): first
BAD against GOOD (it must be a regression), then each step the midpoint of the undecided range
against the last good commit. The first bad commit is measured against its parent, and that A/B
is printed as the table that convicts it. Commits whose A/B cannot decide (no build, wrong
outputs, inconclusive) are skipped, as ``git bisect skip`` does. Every A/B's reports stay in
--results-dir.

When the first bad commit is a merge, the bisection goes on inside the branch it merged: from
the commit the branch starts from (its merge base with main) along the branch's own commits to
the merge's second parent, each A/B comparing commits of that branch; the answer names both the
merge on the first-parent line and the commit inside it (or says why the branch's commits cannot
place the slowdown: then it appears only at the merge itself). Merges inside the branch are
descended into in turn.

Exit codes: 0 the bisection finished (the first bad commit, the range hiding it behind skipped
commits, or a slowdown spread over several commits: the last line says which); 2 unusable input
(an unknown revision, GOOD not an ancestor of BAD on its first-parent line, BAD not slower than
GOOD, no GPU), with a one-line reason.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from perfgate import atomic
from perfgate.checkout import REPO as repo
from perfgate.hunt import bisect as bs
from perfgate.hunt import lines
from perfgate.refusal import Refusal
from perfgate.revisions import add_revision_options

PROG = "perfgate bisect"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bisect",
        help="find the commit that made a benchmark slower, by same-job A/B",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_revision_options(
        parser,
        ("--good", "a commit that was fast"),
        ("--bad", "a later commit that is slow"),
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=Path(".perfgate/results/bisect"),
        help="where each A/B's reports go (default: %(default)s)",
    )
    parser.add_argument(
        "--json",
        dest="json_out",
        type=Path,
        metavar="OUT",
        help="write the steps and the answer as JSON",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if shutil.which("git") is None:
        raise Refusal("git is not on PATH")

    commits = lines.commit_range(repo, args.good, args.bad)  # a bad revision: a Refusal
    from perfgate import catalog

    selected = catalog.cases(tuple(args.groups.split(",")), args.keyword)
    if not selected:
        raise Refusal(f"-k {args.keyword!r} matches no benchmark of {args.groups}")

    atomic.check_output_dirs({"--results-dir": args.results_dir})
    atomic.check_outputs({"--json": args.json_out})
    if args.json_out is not None and args.json_out.resolve().is_relative_to(
        args.results_dir.resolve()
    ):
        raise atomic.OutputError(
            f"--json {args.json_out}: inside --results-dir, where the A/B runs write; put it "
            "elsewhere"
        )
    import torch

    if not torch.cuda.is_available():
        raise Refusal("no GPU visible: each step is an A/B measured on this GPU")
    extra = ["--groups", args.groups]
    runner = bs.subprocess_runner(repo, keyword=args.keyword, extra=extra, out_dir=args.results_dir)
    print(f"{PROG}: {len(commits) - 1} commits after {commits[0][:12]} up to {commits[-1][:12]}")
    result = bs.bisect_merges(commits, bs.announcing(runner, PROG), lines.GitLines(repo))
    return _present(args, result)


def _present(args: argparse.Namespace, result) -> int:
    premise = result.steps[0] if result.steps else None
    refused = premise is None or premise.outcome != bs.REGRESSION
    if refused:
        if premise is not None:
            print(premise.table)
    else:
        level = result
        while level is not None and level.found:
            what = "the merge" if level.inside is not None else "it"
            print(
                f"\nThe A/B that convicts {what} ({level.conviction.head[:12]} against its "
                f"parent {level.conviction.base[:12]}):\n"
            )
            print(level.conviction.table)
            level = level.inside
        print("steps:")
        for s in result.all_steps:
            print(f"  {s.head[:12]} against {s.base[:12]}: {s.outcome}")
        if len(result.chain) > 1:
            print(f"{PROG}: on the first-parent line: {result.chain[0]} (a merge)")
            print(f"{PROG}: inside it: {result.culprit}")
        print(f"{PROG}: {result.message}")
    if args.json_out is not None:
        atomic.write_json(args.json_out, bs.as_json(result))
    if refused:  # BAD is not slower than GOOD: the input names no regression to bisect
        raise Refusal(result.message)
    return 0
