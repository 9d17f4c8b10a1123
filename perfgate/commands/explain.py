"""``python -m perfgate explain --base R [--head H] [-k BENCHMARK]``: why a benchmark got slower.

For each benchmark (``-k``: the names holding TEXT; default the leaderboard's six), base against
head, side by side, what changed marked: the launch (the config selected for the shape: tile,
warps, stages, split-K, the quantizer variant; the grid; the kernels launched per call), the
static compile of the GEMM kernel for the benchmark's target and for gfx950 (registers, spills,
LDS, occupancy, tracked instruction counts, the vector work per wave), the host path per call
(launches, allocations, copies, syncs, Python calls) and, on a GPU, each kernel's device time in
the call, both sides measured in one run. It ends with a ranked list of the differences that can
explain the change, each with its number, or says "same code and config: look at the machine or
the inputs". Each revision's facts come from its own ``kernels`` (a git worktree) measured by
this checkout's perfgate (docs/explain.md).

Exit codes: 0 it explained (whatever it found); 2 unusable input (an unknown revision, a ``-k``
that matches nothing, an output over an input or the project's files), one line.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from perfgate import atomic
from perfgate.explain import explain as ex
from perfgate.explain import render
from perfgate.refusal import Refusal

PROG = "perfgate explain"


def register(subparsers: argparse._SubParsersAction) -> None:
    from kernels.targets import TARGETS

    compilable = [name for name, t in TARGETS.items() if t.statically_compilable]
    parser = subparsers.add_parser(
        "explain",
        help="say why a benchmark got slower: launch, static compile, host path, device split",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base", required=True, metavar="REV", help="the revision it was fast at")
    parser.add_argument(
        "--head", metavar="REV", help="the slower revision (default: this working tree)"
    )
    parser.add_argument(
        "-k", dest="keyword", metavar="TEXT", help="only benchmarks whose name holds TEXT"
    )
    parser.add_argument(
        "--target",
        choices=compilable,
        help="the benchmarks' target (default: this GPU's; without a GPU, sm90); gfx950 is "
        "compiled too",
    )
    parser.add_argument(
        "--device",
        choices=("auto", "yes", "no"),
        default="auto",
        help="measure each kernel's device time on this GPU: auto (where there is one), yes "
        "(no GPU: an error), no (default: %(default)s)",
    )
    parser.add_argument(
        "--rounds", type=int, default=30, help="flushed calls per device-split pass (default 30)"
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        metavar="S",
        help="stop after S seconds, saying what was not finished (default: no limit)",
    )
    parser.add_argument(
        "--repo",
        type=Path,
        metavar="DIR",
        help="the git repository the revisions are in (default: this checkout)",
    )
    parser.add_argument("--json", dest="json_out", type=Path, metavar="OUT", help="write JSON")
    parser.add_argument(
        "--markdown", dest="markdown_out", type=Path, metavar="OUT", help="write markdown"
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if shutil.which("git") is None:
        raise Refusal("git is not on PATH (each revision is a git worktree)")
    if args.rounds < 1:
        raise Refusal(f"--rounds must be an int >= 1, got {args.rounds}")
    if args.budget_s is not None and not args.budget_s > 0:
        raise Refusal(f"--budget-s must be a number of seconds > 0, got {args.budget_s:g}")
    atomic.check_outputs(
        {"--json": args.json_out, "--markdown": args.markdown_out}, {"--repo": args.repo}
    )
    if args.repo is not None and not (args.repo / ".git").exists():
        raise Refusal(f"--repo {args.repo}: not a git repository")
    benchmarks = ex.select(args.keyword)
    import torch

    gpu = torch.cuda.is_available()
    if args.device == "yes" and not gpu:
        raise Refusal("--device yes: no GPU visible (the device split is measured on one)")
    device = gpu if args.device == "auto" else args.device == "yes"
    expl = ex.explain(
        args.base,
        args.head,
        benchmarks,
        own_target=args.target or ex.default_target(),
        device=device,
        budget_s=args.budget_s,
        rounds=args.rounds,
        repo=args.repo,
    )
    sys.stdout.write(render.text(expl))
    if args.markdown_out is not None:
        atomic.write_text(args.markdown_out, render.markdown(expl))
    if args.json_out is not None:
        atomic.write_json(args.json_out, render.as_json(expl))
    return 0
