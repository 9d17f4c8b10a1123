"""A/B sides that are submission files: ``perfgate ab --base-submission A.py --head-submission B.py``:
the command's options and their checks. The side itself, a worker process timing a file, is
:class:`perfgate.measure.submission_side.SubmissionSide`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfgate.refusal import Refusal, RunFailure
from perfgate.submission.load import SubmissionError, check_path, probe

# -- the command's options (perfgate/commands/ab.py) -----------------------------------------
BASE, HEAD = "--base-submission", "--head-submission"
REQUIRED_BASE = "the following arguments are required: --base (see perfgate ab --help)"


class SideError(Refusal, ValueError):
    """A submission side that cannot be used: the option and why, one line."""


def add_options(parser: Any) -> None:
    parser.add_argument(
        BASE,
        metavar="A.py",
        help="compare two submission files instead of two revisions: A.py's custom_kernel is "
        f"the base (with {HEAD}; not with --base/--head)",
    )
    parser.add_argument(HEAD, metavar="B.py", help=f"the submission file to gate against {BASE}'s")


def given(args: Any) -> bool:
    return args.base_submission is not None or args.head_submission is not None


def check_options(args: Any) -> None:
    """SideError (one line) when these options cannot run: revisions and files are exclusive,
    the two files go together, and without files ``--base`` is required (argparse's own words)."""
    if not given(args):
        if args.base is None:
            raise SideError(REQUIRED_BASE)
        return
    revisions = [o for o, v in (("--base", args.base), ("--head", args.head)) if v is not None]
    if revisions:
        raise SideError(
            f"{' and '.join(revisions)} cannot be combined with {BASE}/{HEAD}: an A/B compares "
            "two revisions or two submission files"
        )
    missing = [o for o, v in ((BASE, args.base_submission), (HEAD, args.head_submission)) if not v]
    if missing:
        raise SideError(f"{BASE} and {HEAD} go together; {missing[0]} is missing")


def check_files(args: Any) -> dict[str, Path]:
    """Both files, resolved, each loaded once in a fresh process; SideError naming the option
    for one that cannot be used (unusable input: exit 2, whichever side it is)."""
    out = {}
    for label, option, value in (("base", BASE, args.base_submission),
                                 ("head", HEAD, args.head_submission)):  # fmt: skip
        try:
            out[label] = check_path(value)
            probe(out[label])
        except SubmissionError as exc:
            raise SideError(f"{option}: {exc}") from None
    return out


def check_leaderboard_tier(files: dict[str, Path]) -> None:
    """The leaderboard tier on both files, each in a fresh process on the GPU, before any timing
    (:func:`perfgate.submission.tiers.check_file`), their lines printed when both pass: a head
    the leaderboard would reject is the change's fault (RunFailure, exit 1), a base it would
    reject is unusable input (SideError, exit 2). The strict tier is not checked: a departure
    from the suite's exact semantics is no reason not to time a file."""
    from perfgate.submission.tiers import TierFailure, check_file

    for label, option in (("base", BASE), ("head", HEAD)):
        try:
            print(f"perfgate ab: {label}: {check_file(files[label])}", flush=True)
        except TierFailure as exc:
            if label == "head":
                raise RunFailure(f"{option}: {exc}; not timed", 1) from None
            raise SideError(f"{option}: {exc}; not timed") from None
        except SubmissionError as exc:
            raise SideError(f"{option}: {exc}") from None


def gemm_cases(selected: list[dict], prog: str = "perfgate ab") -> list[dict]:
    """The GEMM cases of a selection: a submission has no reducer entry point, so reducer cases
    are left out, with a message; SideError when nothing is left."""
    kept = [c for c in selected if c["kind"] == "gemm"]
    dropped = len(selected) - len(kept)
    if not kept:
        raise SideError(
            "the selection holds no GEMM benchmark: a submission file has no reducer entry "
            "point (--groups leaderboard or grid)"
        )
    if dropped:
        print(
            f"{prog}: {dropped} reducer benchmark(s) left out: a submission file has no "
            "reducer entry point (only custom_kernel)",
            flush=True,
        )
    return kept


def labels(infos: dict[str, dict[str, Any]]) -> dict[str, str]:
    """How the report names each side: the file its worker loaded and the start of its sha256
    (:func:`perfgate.measure.ab.run_submissions`'s ``timed`` record)."""
    out = {}
    for label, info in infos.items():
        timed = info["timed"]
        out[label] = f"{label} {timed['path']} (sha256:{timed['sha256'][:12]})"
    return out
