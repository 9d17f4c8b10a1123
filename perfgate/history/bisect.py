"""Bisection of a slowdown with same-job A/B: which commit between GOOD and BAD made it slower.

The commits are GOOD's descendants on the first-parent path to BAD, oldest first. The first
step checks the premise (BAD against GOOD must be a regression); each later step measures the
midpoint of the undecided range against the last good commit: a regression moves the bad end to
it, anything else the good end. The first bad commit is then measured against its parent, and
that A/B is the table that convicts it (the bisection's own steps compared it with an older good
commit). A commit that cannot be measured (its A/B exited 2: it does not build, its outputs are
wrong, the run broke) or stays inconclusive is skipped, as ``git bisect skip`` does: the next
commit of the range is tried; when every commit left is skipped, the answer is the range.

The A/B runner is injected (:data:`ABRunner`): the command's runs ``python -m perfgate ab --base
A --head B`` in a subprocess (:func:`subprocess_runner`); tests give fakes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGRESSION, UNCHANGED, UNMEASURED = "regression", "unchanged", "unmeasured"


@dataclass(frozen=True)
class ABResult:
    """One same-job A/B: ``head`` against ``base``."""

    base: str
    head: str
    outcome: str  # REGRESSION, UNCHANGED (no regression) or UNMEASURED
    table: str  # the A/B's markdown report (or why there is none)
    detail: dict[str, Any] = field(default_factory=dict)  # the A/B's JSON report, if any


ABRunner = Callable[[str, str], ABResult]  # (base commit, head commit) -> result


@dataclass(frozen=True)
class BisectResult:
    first_bad: str | None  # None: the premise failed, or skipped commits hide it
    last_good: str | None
    conviction: ABResult | None  # first_bad against its parent
    steps: tuple[ABResult, ...]
    skipped: tuple[str, ...]
    message: str  # one line: what was found

    @property
    def found(self) -> bool:
        return self.first_bad is not None and self.conviction is not None


def bisect(commits: Sequence[str], run: ABRunner) -> BisectResult:
    """Bisect ``commits`` (GOOD first, BAD last, each the parent of the next)."""
    if len(commits) < 2:
        raise ValueError("need at least GOOD and BAD")
    commits = list(commits)
    steps: list[ABResult] = []
    premise = run(commits[0], commits[-1])
    steps.append(premise)
    if premise.outcome != REGRESSION:
        why = (
            "is not slower than"
            if premise.outcome == UNCHANGED
            else "could not be measured against"
        )
        return BisectResult(
            None,
            None,
            None,
            tuple(steps),
            (),
            f"--bad {commits[-1][:12]} {why} --good {commits[0][:12]} in a same-job A/B: "
            "nothing to bisect",
        )
    lo, hi = 0, len(commits) - 1  # commits[lo] good, commits[hi] bad
    skipped: set[int] = set()
    while True:
        candidates = [i for i in range(lo + 1, hi) if i not in skipped]
        if not candidates:
            break
        mid = min(candidates, key=lambda i: (abs(i - (lo + hi) / 2), i))
        step = run(commits[lo], commits[mid])
        steps.append(step)
        if step.outcome == REGRESSION:
            hi = mid
        elif step.outcome == UNCHANGED:
            lo = mid
        else:
            skipped.add(mid)
    hidden = [commits[i] for i in range(lo + 1, hi)]
    if hidden:
        return BisectResult(
            None,
            commits[lo],
            None,
            tuple(steps),
            tuple(hidden),
            f"the first bad commit is one of {', '.join(c[:12] for c in [*hidden, commits[hi]])}"
            f" (after {commits[lo][:12]}): {len(hidden)} could not be measured",
        )
    parent = commits[hi - 1]
    conviction = next((s for s in steps if (s.base, s.head) == (parent, commits[hi])), None)
    if conviction is None:
        conviction = run(parent, commits[hi])
        steps.append(conviction)
    if conviction.outcome != REGRESSION:
        return BisectResult(
            None,
            parent,
            conviction,
            tuple(steps),
            (),
            f"{commits[hi][:12]} is slower than {commits[lo][:12]} ... but not than its parent "
            f"{parent[:12]} alone: the slowdown is spread over several commits",
        )
    return BisectResult(
        commits[hi],
        parent,
        conviction,
        tuple(steps),
        (),
        f"first bad commit: {commits[hi]} (its parent {parent[:12]} is good)",
    )


# -- git -----------------------------------------------------------------------------------------
class RevisionError(ValueError):
    """A revision or range that cannot be bisected; one line."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)


def resolve(repo: Path, rev: str, option: str) -> str:
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RevisionError(f"{option} {rev}: not a commit of {repo}")
    return proc.stdout.strip()


def commit_range(repo: Path, good: str, bad: str) -> list[str]:
    """GOOD, then the first-parent path from it to BAD, oldest first."""
    g, b = resolve(repo, good, "--good"), resolve(repo, bad, "--bad")
    if g == b:
        raise RevisionError(f"--good {good} and --bad {bad} are the same commit")
    if _git(repo, "merge-base", "--is-ancestor", g, b).returncode != 0:
        raise RevisionError(f"--good {good} is not an ancestor of --bad {bad}")
    proc = _git(repo, "rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{g}..{b}")
    path = proc.stdout.split()
    if proc.returncode != 0 or not path or path[-1] != b:
        raise RevisionError(f"--bad {bad}: no first-parent path from --good {good}")
    first = _git(repo, "rev-parse", f"{path[0]}^").stdout.strip()
    if first != g:
        raise RevisionError(
            f"--good {good} is not on the first-parent line of --bad {bad} (a merged branch); "
            "give a commit of that line"
        )
    return [g, *path]


def subprocess_runner(
    repo: Path,
    *,
    keyword: str | None = None,
    extra: Sequence[str] = (),
    out_dir: Path | None = None,
) -> ABRunner:
    """A runner calling ``python -m perfgate ab --base A --head B`` in ``repo`` (its output shown)."""
    work = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="perfgate-bisect-"))

    def run(base: str, head: str) -> ABResult:
        step = work / f"{base[:12]}-{head[:12]}"
        step.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "perfgate",
            "ab",
            "--base",
            base,
            "--head",
            head,
            "--results-dir",
            str(step),
            "--json",
            str(step / "ab.json"),
            "--markdown",
            str(step / "ab.md"),
            *extra,
        ]
        if keyword:
            cmd += ["-k", keyword]
        rc = subprocess.run(cmd, cwd=repo, check=False).returncode
        return read_ab(base, head, rc, step / "ab.json", step / "ab.md")

    return run


def read_ab(base: str, head: str, rc: int, json_path: Path, md_path: Path) -> ABResult:
    """An A/B's outcome from its exit code and reports: a regression verdict is REGRESSION;
    exit 0 is UNCHANGED; anything else (exit 2, or 1 for inconclusive or wrong outputs) cannot
    place the commit and is UNMEASURED."""
    try:
        detail = json.loads(json_path.read_text(encoding="utf-8"))
        counts = detail["summary"]["counts"]
    except (OSError, ValueError, KeyError, TypeError):
        return ABResult(base, head, UNMEASURED, f"(the A/B exited {rc} without a report)")
    try:
        table = md_path.read_text(encoding="utf-8")
    except OSError:
        table = "(no markdown report)"
    if counts.get("regression", 0) > 0:
        outcome = REGRESSION
    elif rc == 0:
        outcome = UNCHANGED
    else:
        outcome = UNMEASURED
    return ABResult(base, head, outcome, table, detail)
