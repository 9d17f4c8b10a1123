"""``python -m perfgate compare BASELINE.json CURRENT.json``: the statistical regression gate.

Benchmarks are matched by ``fullname``; each gets one verdict (``regression``, ``improvement``,
``unchanged``, ``inconclusive`` from :mod:`perfgate.gate.stats`; ``new`` when only in CURRENT,
``missing`` when only in BASELINE).

Exit codes:
  0  no regression (improvements, inconclusive and new benchmarks do not fail the gate);
  1  at least one regression, or a benchmark missing from CURRENT (a benchmark that silently
     disappears would otherwise hide its own regression; ``--allow-missing`` accepts it);
  2  unusable input, with a one-line reason on stderr: a missing/corrupt/incomplete file, a
     different device (device key, architecture or compute-unit count), or a different timing
     mode (``device`` vs ``leaderboard`` time are different quantities).

Other fingerprint differences (GPU name, driver, runtime, torch, triton, clocks) are printed as a
loud warning, and included in the markdown and JSON reports, but do not change the exit code.

The gate's settings come from [tool.perfgate] in pyproject.toml; each option below overrides one
key for this run, and every report echoes the settings it used.
"""

from __future__ import annotations

import argparse

from perfgate.gate import compare, settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="statistical regression gate: compare two pytest-benchmark JSON files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("baseline", metavar="BASELINE.json", help="the stored baseline")
    parser.add_argument("current", metavar="CURRENT.json", help="this run's results")
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="write the report as JSON")
    parser.add_argument(
        "--markdown",
        dest="markdown_out",
        metavar="OUT",
        help="write the report as GitHub markdown (a PR comment, $GITHUB_STEP_SUMMARY)",
    )
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="a benchmark in the baseline but not in the current run does not fail the gate",
    )

    # a comparison of two files takes one look at a stored baseline: no adaptive looks, no A/B
    settings.add_options(parser, settings.STATS, skip=("looks",))
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    gate = settings.from_args(args)  # a bad value or table: a Refusal, one line and exit 2
    return compare.compare_files(
        args.baseline,
        args.current,
        settings=gate.stats,
        json_out=args.json_out,
        markdown_out=args.markdown_out,
        allow_missing=args.allow_missing,
    )
