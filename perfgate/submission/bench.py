"""``bench`` and ``update-baselines`` with ``--submission FILE``: the package's timer and gate,
timing FILE's ``custom_kernel``.

What the commands do with the option (perfgate/commands/bench.py calls these):

- :func:`add_option` adds ``--submission FILE``;
- :func:`configure` checks the option before anything is measured (FILE must load in a fresh
  process, :func:`perfgate.submission.load.probe`; a bad tag is refused), files the run under
  its own tag and returns the context in which the benchmark session runs: every pytest process
  of it (the warm-up pass, each process of a run, the adaptive reruns) gets
  ``--perfgate-submission FILE`` through ``PYTEST_ADDOPTS`` (pytest's own variable, appended to
  whatever the user set), so the pytest command lines, the selection and the gate stay the
  package's;
- :func:`leaderboard_tier` runs the leaderboard tier (:mod:`perfgate.submission.tiers`) on FILE
  in a fresh process on the GPU before anything is timed: a file the leaderboard would reject
  is never timed nor recorded as a baseline (exit 1, the failing check named); the strict
  tier is not checked (a departure from the suite's exact semantics is no reason not to time);
  every timed output is then checked with the same rule, as for the package;
- :func:`check_source` refuses to compare a submission's results with a package baseline, or
  with one of a submission recorded from the package, and names both files' sha256 otherwise.

Decision, the tag: a submission run is always tagged ``submission`` or ``submission-*``
(``--tag`` may name one, e.g. ``-m slow --tag submission-grid``; any other tag is refused). Its
results are ``<mode>-submission.json`` and its baseline ``perf_baselines/<device>/<mode>-
submission.json``, which ``update-baselines --submission FILE`` records: a submission run never
meets the package's baseline by name, and :func:`check_source` catches one that does by content
(a package run filed under a submission tag). Two submissions of different sha256 are compared:
an older export as the baseline and a newer one as the run is what the gate is for.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfgate.gate.baseline import BaselineError
from perfgate.refusal import Refusal
from perfgate.submission import load
from perfgate.submission.load import sha256_of

OPTION = "--submission"
PLUGIN_OPTION = "--perfgate-submission"  # perfgate.plugin.SUBMISSION_OPTION (no pytest import)
TAG = "submission"
ADDOPTS = "PYTEST_ADDOPTS"


class OptionError(Refusal, ValueError):
    """A ``--submission`` (or its ``--tag``) that cannot be used; one line naming the option."""


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        OPTION,
        metavar="FILE",
        default=None,
        help="time FILE's custom_kernel (a one-file submission) instead of the package's, with "
        f"the same timer and gate; results and baseline are tagged {TAG!r} (or --tag "
        f"{TAG}-NAME); the reducer group is left out (a submission has no reducer entry point)",
    )


def submission_tag(tag: str | None) -> str:
    """The tag a submission run is filed under: ``submission`` by default; a given tag must be
    ``submission`` or start with ``submission-`` (OptionError otherwise)."""
    if tag is None:
        return TAG
    if tag != TAG and not tag.startswith(TAG + "-"):
        raise OptionError(
            f"--tag must be {TAG!r} or start with '{TAG}-' with {OPTION} (got {tag!r}), so that "
            "a submission's results and baseline never share a name with the package's"
        )
    return tag


def configure(args: argparse.Namespace) -> contextlib.AbstractContextManager[Any]:
    """Check ``--submission`` and set ``args.tag``; the context the session then runs in. Without
    the option: nothing changes. Raises OptionError (one line) for an unusable option."""
    path = getattr(args, "submission", None)
    if path is None:
        return contextlib.nullcontext()

    args.tag = submission_tag(args.tag)
    try:
        resolved = load.check_path(path)
        load.probe(resolved)
    except load.SubmissionError as exc:
        raise OptionError(f"{OPTION}: {exc}") from None
    args.submission = str(resolved)
    return pytest_option(resolved)


def leaderboard_tier(args: argparse.Namespace, prog: str) -> int:
    """0 when ``--submission`` is not given or FILE passes the leaderboard tier on this device
    (its one line printed); 1 when it fails it (one line); OptionError when it cannot be used."""
    path = getattr(args, "submission", None)
    if path is None:
        return 0
    from perfgate.submission import load, tiers

    print(f"perfgate {prog}: the leaderboard tier on {path} first", flush=True)
    try:
        print(tiers.check_file(path), flush=True)
    except tiers.TierFailure as exc:
        print(f"perfgate {prog}: {exc}; not timed", file=sys.stderr)
        return 1
    except load.SubmissionError as exc:
        raise OptionError(f"{OPTION}: {exc}") from None
    return 0


def hint(args: argparse.Namespace) -> str:
    """What ``update-baselines`` needs besides ``--mode`` to record the baseline this run
    lacks: nothing for the package."""
    path = getattr(args, "submission", None)
    if path is None:
        return ""
    tag = "" if args.tag == TAG else f" --tag {args.tag}"
    return f" {OPTION} {shlex.quote(str(path))}{tag}"


@contextlib.contextmanager
def pytest_option(path: Path) -> Iterator[None]:
    """``PYTEST_ADDOPTS`` holds ``--perfgate-submission=PATH`` (after the user's own) inside the
    context and is restored after it; says once what is timed."""
    before = os.environ.get(ADDOPTS)
    option = shlex.quote(f"{PLUGIN_OPTION}={path}")
    os.environ[ADDOPTS] = f"{before} {option}" if before else option
    print(f"perfgate: timing custom_kernel of {path} (sha256:{sha256_of(path)[:16]})", flush=True)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ADDOPTS, None)
        else:
            os.environ[ADDOPTS] = before


def source(data: dict[str, Any]) -> dict[str, Any] | None:
    """The submission a loaded results or baseline file timed, or None (the package)."""
    return data["machine_info"]["perfgate"].get("submission")


def check_source(base_path: Path, base_data: dict[str, Any], data: dict[str, Any]) -> None:
    """Refuse (BaselineError, one line) to compare a submission's run with a package baseline or
    a package run with a submission's baseline; for two submissions, print what each timed."""
    base, current = source(base_data), source(data)
    if base is None and current is None:
        return
    if base is None or current is None:
        what = "a submission file's" if current is not None else "the package's"
        other = "the package's" if base is None else "a submission file's"
        raise BaselineError(
            f"{base_path}: a baseline of {other} custom_kernel, the run timed {what}; record a "
            f"baseline of the same kind (update-baselines {OPTION} FILE for a submission)"
        )
    same = " (the same file content)" if base.get("sha256") == current.get("sha256") else ""
    print(
        f"perfgate: submission {current.get('path')} sha256:{str(current.get('sha256'))[:16]} "
        f"against the baseline of {base.get('path')} sha256:{str(base.get('sha256'))[:16]}{same}",
        flush=True,
    )
