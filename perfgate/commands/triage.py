"""``python -m perfgate triage [REPORT ...]``: who made main slower, after the gate flagged it.

Run it on the GPU machine right after a red gate on main (the workflow does). For each benchmark
that the gate's reports flag as a regression (default: .perfgate/results/device.compare.json,
what bench writes), it bisects with same-job A/B runs on this GPU, from a good commit to --bad
(default HEAD). The good commit is the newest run of main in the history store that passed the
gate on this device, in this timing mode and fingerprint segment (--good REV overrides; with no
such run, the commit the report's baseline was recorded at, said in one line). When the first
bad commit is a merge, the bisection goes on inside the branch it merged and names the commit
there. Benchmarks that share a culprit are grouped: once a culprit is found, one A/B of it
against its parent tells which other flagged benchmarks it made slower. --max-steps and
--time-budget-s bound the A/Bs; when a limit stops the triage, it says so and reports what it
found so far.

It writes each culprit and the A/B table that convicts it to --summary (markdown: the workflow
appends it to $GITHUB_STEP_SUMMARY) and --json, and opens one GitHub issue per culprit (labelled
perfgate-triage), or updates it on a rerun (its description replaced, a comment added; never a
second issue), through the REST API at $GITHUB_API_URL (default https://api.github.com) with
the token in $GITHUB_TOKEN, for --repo (default $GITHUB_REPOSITORY). --no-issues: no issues.

Exit codes: 0 done: every flagged benchmark has its answer (a culprit and its issue, or why
there is none: not slower in the A/B, spread over commits, hidden by commits that cannot be
measured, stopped by a limit), or nothing was flagged. The gate has already failed the job;
triage does not fail it a second time for the same regression. 2 triage could not do its job,
with one line naming why: unusable input before any A/B (an option, a report, the store, no GPU,
no token or repository without --no-issues), a flagged benchmark with no good commit, or the
GitHub API failing (the summary and JSON are written first). Never 1: that is the gate's verdict.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from perfgate import atomic
from perfgate.commands import base
from perfgate.explain import wiring as explain
from perfgate.gate import paths
from perfgate.hunt import bisect as bs
from perfgate.hunt import github
from perfgate.refusal import Refusal

PROG = "perfgate triage"
DEFAULT_REPORT = Path(".perfgate/results/device.compare.json")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "triage",
        help="after the gate flagged main: bisect each regression, report the culprits, open "
        "one GitHub issue per culprit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "reports",
        nargs="*",
        type=Path,
        default=[],
        metavar="REPORT",
        help=f"the gate's comparison reports, <mode>.compare.json (default: {DEFAULT_REPORT})",
    )
    parser.add_argument(
        "--bad", default="HEAD", metavar="REV", help="the flagged commit (default: HEAD)"
    )
    parser.add_argument(
        "--good", metavar="REV", help="bisect from this commit (default: from the history store)"
    )
    parser.add_argument(
        "--db",
        metavar="STORE",
        help="the history store: a SQLite path or a postgresql:// URL (default: "
        "$PERFGATE_HISTORY_URL, else db of [tool.perfgate-history])",
    )
    parser.add_argument(
        "--branch",
        metavar="NAME",
        help="whose passing runs give the good commit (default: branch of [tool.perfgate-history])",
    )
    parser.add_argument(
        "--max-steps",
        type=_positive(int),
        metavar="N",
        help="start at most N A/Bs (default: what a full triage of the flagged benchmarks over "
        "the commits needs, at most what --time-budget-s fits at --ab-seconds each)",
    )
    parser.add_argument(
        "--time-budget-s",
        type=_positive(float),
        default=3600.0,
        metavar="S",
        help="start no A/B that would end later than S seconds after the start, judged by the "
        "slowest A/B so far; set it below the job's timeout (default: %(default)g)",
    )
    parser.add_argument(
        "--ab-seconds",
        type=_positive(float),
        default=120.0,
        metavar="S",
        help="how long one A/B takes before one has run (default: %(default)g)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=Path(".perfgate/results/triage"),
        metavar="DIR",
        help="where each A/B's reports go (default: %(default)s)",
    )
    parser.add_argument(
        "--summary", type=Path, metavar="FILE.md", help="write the culprits as markdown"
    )
    parser.add_argument(
        "--json", dest="json_out", type=Path, metavar="OUT", help="write the culprits as JSON"
    )
    parser.add_argument(
        "--repo", metavar="OWNER/NAME", help="where the issues go (default: $GITHUB_REPOSITORY)"
    )
    parser.add_argument("--no-issues", action="store_true", help="open or update no GitHub issue")
    parser.add_argument(
        "--publish",
        type=Path,
        metavar="TRIAGE.json",
        help="instead of a triage: open or update the issues of one made with --no-issues "
        "--json TRIAGE.json (the workflow's GPU container gets no token; this runs outside it); "
        "takes only --summary and --repo",
    )

    explain.add_options(parser)
    defaults = {
        a.dest: (a.default, a.option_strings[0] if a.option_strings else a.metavar)
        for a in parser._actions
        if a.dest != "help"
    }
    parser.set_defaults(func=_run, triage_defaults=defaults)


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what} > 0, got {text!r}")
        return value

    return parse


def _run(args: argparse.Namespace) -> int:
    if args.publish is not None:
        return _publish(args)

    from perfgate.history import config, store
    from perfgate.hunt import culprits, github
    from perfgate.hunt import triage as tg

    if shutil.which("git") is None:
        raise Refusal("git is not on PATH")
    if args.no_issues and args.repo:
        raise Refusal(f"--repo {args.repo}: names where issues go; --no-issues opens none")

    explain.check(args)
    cfg = config.load()
    reports = tuple(args.reports or (DEFAULT_REPORT,))
    db = store.location(args.db, cfg.db)
    local = store.local_path(db)
    if local is not None:  # as every command's --db: before anything is read, whatever it holds
        atomic.check_not_tracked("--db", local)
    _check_outputs(args, reports, local)
    api = (
        None
        if args.no_issues
        else _issues_api(args, github, "; pass --no-issues to triage without them")
    )
    req = tg.Request(
        reports=reports,
        repo=paths.REPO,
        db=db,
        branch=args.branch or cfg.branch,
        bad=args.bad,
        good=args.good,
        max_steps=args.max_steps,
        time_budget_s=args.time_budget_s,
        ab_seconds=args.ab_seconds,
        summary=args.summary,
        json_out=args.json_out,
        run_url=tg.run_url(),
        explain_budget_s=args.explain_budget_s,
    )
    factory = culprits.subprocess_factory(paths.REPO, args.results_dir, _announcing)
    return tg.triage(req, _gpu_first(factory), api)


def _publish(args: argparse.Namespace) -> int:
    from perfgate.hunt import triage as tg

    allowed = {"publish", "summary", "repo"}
    given = [
        flag
        for dest, (default, flag) in args.triage_defaults.items()
        if dest not in allowed and getattr(args, dest) != default
    ]
    if given:
        raise Refusal(f"--publish takes only --summary and --repo, not {given[0]}")
    atomic.check_outputs({"--summary": args.summary}, {"--publish": args.publish})
    return tg.publish_saved(args.publish, _issues_api(args, github, ""), args.summary)


def _check_outputs(args, reports, db) -> None:
    outputs = {"--summary": args.summary, "--json": args.json_out}
    inputs = [*(("REPORT", r) for r in reports), *([("--db", db)] if db is not None else [])]
    atomic.check_output_dirs({"--results-dir": args.results_dir})
    atomic.check_outputs(outputs, inputs)
    results = args.results_dir.resolve()
    for option, path in outputs.items():
        if path is None:
            continue
        if path.resolve().is_relative_to(results):
            raise atomic.OutputError(
                f"{option} {path}: inside --results-dir, where the A/B runs write; put it elsewhere"
            )


def _issues_api(args, github, hint: str):
    token = os.environ.get("GITHUB_TOKEN", "")
    repo = args.repo or os.environ.get("GITHUB_REPOSITORY", "")
    if not token:
        raise Refusal(
            f"GITHUB_TOKEN is not set: it opens the issues (the workflow passes the job's token){hint}"
        )
    if not repo:
        raise Refusal("--repo: not given and GITHUB_REPOSITORY is not set (OWNER/NAME)")
    url = os.environ.get("GITHUB_API_URL") or github.DEFAULT_API_URL
    try:
        return github.IssuesAPI(url, repo, token)
    except ValueError as exc:  # the issues client (a library of its own) checks --repo and the
        raise Refusal(str(exc)) from None  # URL with ValueError: here they are the user's input


def _gpu_first(factory):
    """The factory, refusing (exit 2) before its first A/B on a machine without a GPU: triage
    of a report that flags nothing needs none."""

    def make(mode, benchmarks):
        from perfgate.hunt.culprits import TriageError

        if not base.gpu_available():
            raise TriageError("no GPU visible: each step is an A/B measured on this GPU")
        return factory(mode, benchmarks)

    return make


def _announcing(runner, benchmarks):
    what = (
        benchmarks[0].rpartition("::")[2]
        if len(benchmarks) == 1
        else f"{len(benchmarks)} benchmarks"
    )
    return bs.announcing(runner, PROG, what)
