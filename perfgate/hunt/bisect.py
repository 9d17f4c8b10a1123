"""Bisection of a slowdown with same-job A/B: which commit between GOOD and BAD made it slower.

The commits are GOOD's descendants on the first-parent path to BAD, oldest first. The first
step checks the premise (BAD against GOOD must be a regression); each later step measures the
midpoint of the undecided range against the last good commit: a regression moves the bad end to
it, anything else the good end. The first bad commit is then measured against its parent, and
that A/B is the table that convicts it (the bisection's own steps compared it with an older good
commit). A commit that cannot be measured (its A/B exited 2: it does not build, its outputs are
wrong, the run broke) or stays inconclusive is skipped, as ``git bisect skip`` does: the next
commit of the range is tried; when every commit left is skipped, the answer is the range.

**Into merges** (:func:`bisect_merges`). When the first bad commit is a merge, the bisection goes
on along the line it merged (:meth:`perfgate.hunt.lines.GitLines.merged_branch`: the commit
the branch starts from, usually the merge base, then the branch's own first-parent commits up
to the merge's second parent), the same way: first the branch's tip against its start, then
midpoints, then the culprit against its parent on the branch. Decision: the good end there is the
branch's start, not the merge's first parent. The first parent holds main's commits made since
the branch started and the branch's commits do not, so a branch commit measured against it would
be charged with (or credited for) main's changes; against the branch's own start, each A/B
compares a commit with its own ancestor. The merge's conviction (against its first parent) says
the merge made it slower; the inner conviction says which of the branch's commits did. When the
branch's tip is not slower than its start, no branch commit can be blamed: the slowdown appears
only at the merge (its conflict resolution, or the branch together with main's commits since it
started), and the answer says exactly that. A merge inside the branch is descended into in turn.

**Step limit.** A runner may raise :class:`StepLimit` instead of starting an A/B (the triage's
budget, :mod:`perfgate.hunt.triage`); the bisection then stops and its answer is the range
still undecided, with the reason.

The A/B runner is injected (:data:`ABRunner`): the command's runs ``python -m perfgate ab --base
A --head B`` in a subprocess (:func:`subprocess_runner`); tests give fakes.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from perfgate import spawn
from perfgate.hunt.lines import RevisionError

REGRESSION, UNCHANGED, UNMEASURED = "regression", "unchanged", "unmeasured"


@dataclass(frozen=True)
class ABResult:
    """One same-job A/B: ``head`` against ``base``."""

    base: str
    head: str
    outcome: str  # REGRESSION, UNCHANGED (no regression) or UNMEASURED
    table: str  # the A/B's markdown report (or why there is none)
    detail: dict[str, Any] = field(default_factory=dict)  # the A/B's JSON report, if any

    def verdict_of(self, benchmark: str) -> str | None:
        """The A/B report's verdict on one benchmark (None: not in the report)."""
        for row in self.detail.get("benchmarks") or ():
            if isinstance(row, dict) and row.get("name") == benchmark:
                return row.get("verdict")
        return None


ABRunner = Callable[[str, str], ABResult]  # (base commit, head commit) -> result


class StepLimit(Exception):
    """Raised by a runner instead of starting an A/B: the step limit is spent (the message says
    which limit)."""


class Lines(Protocol):
    def merged_branch(self, commit: str) -> list[str] | None: ...


@dataclass(frozen=True)
class BisectResult:
    first_bad: str | None  # None: the premise failed, skipped commits hide it, or it stopped
    last_good: str | None
    conviction: ABResult | None  # first_bad against its parent
    steps: tuple[ABResult, ...]
    skipped: tuple[str, ...]
    message: str  # one line: what was found
    stopped: str | None = None  # the step limit that ended it early
    inside: BisectResult | None = None  # first_bad is a merge: the bisection of its branch

    @property
    def found(self) -> bool:
        return self.first_bad is not None and self.conviction is not None

    @property
    def reproduced(self) -> bool:
        """Whether the premise held: BAD was slower than GOOD."""
        return bool(self.steps) and self.steps[0].outcome == REGRESSION

    @property
    def culprit(self) -> str | None:
        """The commit to blame: the one found inside a merge when its branch placed it, else
        the first bad commit of this line (the merge itself when its branch could not)."""
        if self.inside is not None and self.inside.culprit is not None:
            return self.inside.culprit
        return self.first_bad if self.found else None

    @property
    def convicting(self) -> ABResult | None:
        """The culprit against its parent."""
        if self.inside is not None and self.inside.culprit is not None:
            return self.inside.convicting
        return self.conviction if self.found else None

    @property
    def chain(self) -> tuple[str, ...]:
        """The first bad commit of each line descended, main's line first, ending with the
        culprit."""
        if not self.found:
            return ()
        return (self.first_bad, *(self.inside.chain if self.inside is not None else ()))

    @property
    def all_steps(self) -> tuple[ABResult, ...]:
        return self.steps + (self.inside.all_steps if self.inside is not None else ())


def bisect(commits: Sequence[str], run: ABRunner) -> BisectResult:
    """Bisect ``commits`` (GOOD first, BAD last, each the parent of the next)."""
    if len(commits) < 2:
        raise ValueError("need at least GOOD and BAD")
    state = _Bisection(list(commits), run)
    try:
        return state.result()
    except StepLimit as exc:
        return state.stopped(str(exc))


class _Bisection:
    def __init__(self, commits: list[str], run: ABRunner) -> None:
        self.commits, self.run = commits, run
        self.steps: list[ABResult] = []
        self.lo, self.hi = 0, len(commits) - 1  # commits[lo] good, commits[hi] bad
        self.skipped: set[int] = set()

    def measure(self, base: int, head: int) -> ABResult:
        step = self.run(self.commits[base], self.commits[head])
        self.steps.append(step)
        return step

    def result(self) -> BisectResult:
        commits = self.commits
        premise = self.measure(0, len(commits) - 1)
        if premise.outcome != REGRESSION:
            why = (
                "is not slower than"
                if premise.outcome == UNCHANGED
                else "could not be measured against"
            )
            return self._answer(
                None,
                None,
                None,
                f"--bad {commits[-1][:12]} {why} --good {commits[0][:12]} in a same-job A/B: "
                "nothing to bisect",
            )
        while True:
            candidates = [i for i in range(self.lo + 1, self.hi) if i not in self.skipped]
            if not candidates:
                break
            mid = min(candidates, key=lambda i: (abs(i - (self.lo + self.hi) / 2), i))
            step = self.measure(self.lo, mid)
            if step.outcome == REGRESSION:
                self.hi = mid
            elif step.outcome == UNCHANGED:
                self.lo = mid
            else:
                self.skipped.add(mid)
        lo, hi = self.lo, self.hi
        hidden = commits[lo + 1 : hi]
        if hidden:
            return self._answer(
                None,
                commits[lo],
                None,
                f"the first bad commit is one of {_short([*hidden, commits[hi]])} (after "
                f"{commits[lo][:12]}): {len(hidden)} could not be measured",
                skipped=hidden,
            )
        parent = commits[hi - 1]
        conviction = next(
            (s for s in self.steps if (s.base, s.head) == (parent, commits[hi])), None
        )
        if conviction is None:
            conviction = self.measure(hi - 1, hi)
        if conviction.outcome != REGRESSION:
            return self._answer(
                None,
                parent,
                conviction,
                f"{commits[hi][:12]} is slower than {commits[lo][:12]} ... but not than its "
                f"parent {parent[:12]} alone: the slowdown is spread over several commits",
            )
        return self._answer(
            commits[hi],
            parent,
            conviction,
            f"first bad commit: {commits[hi]} (its parent {parent[:12]} is good)",
        )

    def stopped(self, reason: str) -> BisectResult:
        commits = self.commits
        if not self.steps:
            where = f"before its first A/B ({commits[-1][:12]} against {commits[0][:12]})"
            return self._answer(None, None, None, f"stopped {where}: {reason}", stopped=reason)
        lo, hi = self.lo, self.hi  # the premise held: a failed one ends the bisection at once
        left = [commits[i] for i in range(lo + 1, hi + 1)]
        if len(left) == 1:
            text = (
                f"the first bad commit is {left[0][:12]} (after {commits[lo][:12]}), but the "
                f"A/B against its parent that would convict it was not run: {reason}"
            )
        else:
            text = (
                f"stopped with {len(left)} commits undecided: the first bad commit is one of "
                f"{_short(left)} (after {commits[lo][:12]}): {reason}"
            )
        return self._answer(None, commits[lo], None, text, stopped=reason)

    def _answer(self, first_bad, last_good, conviction, message, *, skipped=(), stopped=None):
        return BisectResult(
            first_bad,
            last_good,
            conviction,
            tuple(self.steps),
            tuple(skipped),
            message,
            stopped=stopped,
        )


def _short(commits: Sequence[str]) -> str:
    return ", ".join(c[:12] for c in commits)


def bisect_merges(commits: Sequence[str], run: ABRunner, lines: Lines) -> BisectResult:
    """:func:`bisect`, then, when the first bad commit is a merge, the line it merged (and so on
    into merges on that line): the module's docstring says which commits and why."""
    result = bisect(commits, run)
    if not result.found:
        return result
    try:
        branch = lines.merged_branch(result.first_bad)
    except RevisionError as exc:
        return dataclasses.replace(result, message=f"{result.message}; {exc}")
    if branch is None:
        return result
    inside = bisect_merges(branch, run, lines)
    return dataclasses.replace(result, inside=inside, message=_merge_message(result, inside))


def _merge_message(merge: BisectResult, inside: BisectResult) -> str:
    head = f"{merge.message}, a merge; "
    if inside.found:
        return f"{head}inside it, {inside.message}"
    why = inside.message
    if inside.stopped is None and inside.steps and not inside.reproduced:
        start, tip = inside.steps[0].base, inside.steps[0].head
        measured = (
            "is not slower than"
            if inside.steps[0].outcome == UNCHANGED
            else "could not be measured against"
        )
        why = (
            f"its tip {tip[:12]} {measured} {start[:12]}, where it starts: the slowdown "
            f"appears only at the merge (its conflict resolution, or the branch together with "
            f"main's commits since {start[:12]})"
        )
    return f"{head}the merged branch's commits cannot place it: {why}"


def as_json(result: BisectResult) -> dict[str, Any]:
    """A bisection's answer as ``bisect --json`` and ``triage --json`` write it."""
    return {
        "first_bad": result.first_bad,
        "culprit": result.culprit,
        "last_good": result.last_good,
        "message": result.message,
        "stopped": result.stopped,
        "skipped": list(result.skipped),
        "steps": [{"base": s.base, "head": s.head, "outcome": s.outcome} for s in result.steps],
        "conviction": None
        if result.conviction is None
        else {
            "base": result.conviction.base,
            "head": result.conviction.head,
            "outcome": result.conviction.outcome,
            "report": result.conviction.detail,
        },
        "inside": None if result.inside is None else as_json(result.inside),
    }


def announcing(run: ABRunner, prog: str, what: str = "") -> ABRunner:
    """``run``, printing each A/B as it starts and its outcome when it ends (an A/B takes
    minutes)."""
    label = f" ({what})" if what else ""

    def announced(base: str, head: str) -> ABResult:
        print(f"{prog}: A/B {head[:12]} against {base[:12]}{label}", flush=True)
        step = run(base, head)
        print(f"{prog}: {head[:12]}: {step.outcome}", flush=True)
        return step

    return announced


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
        rc = spawn.run(cmd, cwd=repo).returncode  # its output shown as it runs
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
