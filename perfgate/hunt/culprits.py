"""The culprits of a red main: the flagged benchmarks, their good commits, the step budget, and
the bisections that find who made them slower. :mod:`perfgate.hunt.triage` runs them; the
steps are those of its docstring (1 to 4).

The A/B runners are injected as :data:`RunnerFactory` (tests give fakes; the command
:func:`subprocess_factory`, which runs ``python -m perfgate ab`` per A/B).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfgate import catalog
from perfgate.gate import baseline as bl
from perfgate.history import store
from perfgate.history.records import PASS, segment_key
from perfgate.hunt import bisect as bs
from perfgate.hunt import github, lines
from perfgate.modes import AB_MODE_NAMES
from perfgate.refusal import Refusal

PROG = "perfgate triage"
AB_MODES = AB_MODE_NAMES  # what perfgate ab measures
RunnerFactory = Callable[[str, tuple[str, ...]], bs.ABRunner]  # (mode, benchmarks) -> runner


class TriageError(Refusal, ValueError):
    """Input the triage cannot use; the message is one line naming it."""


# -- the gate's reports ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Flagged:
    benchmark: str
    mode: str
    ratio: float | None  # the gate's current / baseline median
    report: str
    device_key: str


@dataclass(frozen=True)
class GateRun:
    """One comparison report of the gate and the run it judged."""

    report: Path
    results: Path
    device_key: str
    mode: str
    commit: str
    segment: str
    baseline: str
    baseline_commit: str | None
    flagged: tuple[Flagged, ...]


def read_gate_report(path: Path) -> GateRun:
    """The report at ``path`` (``bench``'s ``<mode>.compare.json``) and its run."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        summary, rows = data["summary"], list(data["benchmarks"])
        mode, device_key = summary["mode"], summary["device_key"]
        current, baseline = str(summary["current"]), str(summary["baseline"])
        flagged = tuple(
            Flagged(r["name"], mode, _number(r.get("ratio")), str(path), device_key)
            for r in rows
            if r["verdict"] == "regression"
        )
    except OSError as exc:
        raise TriageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise TriageError(
            f"{path}: not a perfgate comparison report (bench's <mode>.compare.json)"
        ) from None
    if mode not in AB_MODES:
        raise TriageError(
            f"{path}: a {mode}-mode report; perfgate ab measures {' and '.join(AB_MODES)} mode "
            "only, so triage can bisect only those reports"
        )
    results = _results_file(Path(path), current)
    try:
        run = bl.load(results)
    except bl.BaselineError as exc:
        raise TriageError(f"{path}: the run it judged: {exc}") from None
    fp = bl.fingerprint(run)
    if not fp.get("git_commit") or fp.get("git_dirty"):
        raise TriageError(
            f"{path}: the run it judged ({results}) was not recorded at a clean commit: it "
            "belongs to no commit of main"
        )
    if (bl.device_key(run), bl.mode(run)) != (device_key, mode):
        raise TriageError(f"{path}: {results} is not the run it judged (device or mode differs)")
    for f in flagged:
        ab_group(f.benchmark, path)
    return GateRun(
        Path(path),
        results,
        device_key,
        mode,
        fp["git_commit"],
        segment_key(fp),
        baseline,
        _baseline_commit(Path(baseline)),
        flagged,
    )


def _results_file(report: Path, current: str) -> Path:
    """The run a report judged: as it names it (relative to here), else beside the report
    (where a CI artifact puts it)."""
    named = Path(current)
    for candidate in (named, report.parent / named.name):
        if candidate.is_file():
            return candidate
    raise TriageError(f"{report}: the run it judged, {current}, is neither there nor beside it")


def _baseline_commit(path: Path) -> str | None:
    try:
        return bl.fingerprint(bl.load(path)).get("git_commit") or None
    except bl.BaselineError:
        return None


def _number(value) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def ab_group(benchmark: str, report: Path | str = "") -> str:
    """The catalog group ``perfgate ab`` times ``benchmark`` in; TriageError when it has none."""
    for name, group in catalog.GROUPS.items():
        if name != "host" and benchmark in {group.nodeid(i) for i in group.items}:
            return name
    raise TriageError(f"{report}: {benchmark} is not a benchmark perfgate ab can time")


# -- the good commit ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Good:
    commit: str | None  # None: nothing to bisect from
    why: str  # one line


class Line:
    """The first-parent line of BAD in a repository, and which commits are on it."""

    def __init__(self, repo: Path, bad: str) -> None:
        self.repo, self.bad = Path(repo), bad
        self._ranges: dict[str, list[str] | None] = {}

    def commits(self, good: str) -> list[str] | None:
        """GOOD, then the first-parent line up to BAD; None when GOOD is not on that line."""
        if good not in self._ranges:
            try:
                self._ranges[good] = lines.commit_range(self.repo, good, self.bad)
            except lines.RevisionError:
                self._ranges[good] = None
        return self._ranges[good]


def pick_good(run: GateRun, benchmark: str, db: str | Path, branch: str, line: Line) -> Good:
    """The good commit of one flagged benchmark (the module's docstring, 2)."""
    where = f"{branch} on {run.device_key} ({run.mode} mode, this fingerprint segment)"
    passing, why_none = _passing_commits(run, benchmark, db, branch)
    off_line = 0
    for commit, when in passing:  # newest first
        if commit == line.bad:
            continue
        if line.commits(commit) is not None:
            return Good(
                commit,
                f"the newest run of {where} that passed the gate: {commit[:12]} (run {when})",
            )
        off_line += 1
    if why_none is None:
        why_none = f"no run of {where} that measured it passed the gate in {store.display(db)}"
        if off_line:
            why_none += f" ({off_line} did, at commits not on --bad's first-parent line)"
    b = run.baseline_commit
    if b and b != line.bad and line.commits(b) is not None:
        return Good(b, f"{why_none}; good = {b[:12]}, the commit {run.baseline} was recorded at")
    baseline = (
        f"the baseline's commit {b[:12]} is not on --bad's first-parent line"
        if b
        else f"{run.baseline} records no commit"
    )
    return Good(None, f"{why_none}, and {baseline}: nothing to bisect from; give --good REV")


def _passing_commits(run: GateRun, benchmark: str, db, branch: str):
    """``([(commit, run time), ...] newest first, why there are none or None)``."""
    try:
        if not store.exists(db):
            return [], f"no history store at {store.display(db)}"
        with store.open_store(db, write=False) as s:
            rows = s.rows(
                store.Query(
                    device_key=run.device_key, mode=run.mode, branch=branch, segment=run.segment
                )
            )
    except store.OlderSchemaError:
        return [], f"{store.display(db)} is of an older schema, whose runs carry no verdict"
    except store.StoreError as exc:
        raise TriageError(f"--db: {exc}") from None
    ordered = [r for r in rows if r.benchmark == benchmark and r.verdict == PASS]
    return [(r.commit, r.run_time or "-") for r in reversed(ordered)], None


# -- the step budget ------------------------------------------------------------------------------
def default_max_steps(flagged: int, commits: int, seconds: float, ab_seconds: float) -> int:
    """What a full triage may need, bounded by what the time budget fits: per flagged
    benchmark a premise, ceil(log2(commits)) midpoints and a conviction, twice over (a merge
    descended into costs about as much again), plus one shared-culprit A/B each."""
    per_bisect = 2 + math.ceil(math.log2(max(commits, 2)))
    need = flagged * (2 * per_bisect + 1)
    return max(1, min(need, math.floor(seconds / ab_seconds)))


class Budget:
    """The A/Bs the triage may still start: at most ``max_steps``, and none that would end after
    ``seconds`` (judged by the slowest A/B so far, ``ab_seconds`` before the first)."""

    def __init__(self, max_steps: int, seconds: float, ab_seconds: float, clock=time.monotonic):
        self.max_steps, self.seconds, self.ab_seconds, self.clock = (
            max_steps,
            seconds,
            ab_seconds,
            clock,
        )
        self.start = clock()
        self.used = 0
        self.durations: list[float] = []
        self.spent: str | None = None  # why no more A/Bs start

    def wrap(self, run: bs.ABRunner) -> bs.ABRunner:
        def limited(base: str, head: str) -> bs.ABResult:
            self._check()
            started = self.clock()
            try:
                return run(base, head)
            finally:
                self.used += 1
                self.durations.append(self.clock() - started)

        return limited

    def _check(self) -> None:
        if self.spent is None and self.used >= self.max_steps:
            self.spent = f"the step limit of {self.max_steps} A/Bs (--max-steps) was reached"
        if self.spent is None:
            expected = max(self.durations, default=self.ab_seconds)
            if self.clock() - self.start + expected > self.seconds:
                self.spent = (
                    f"the time budget of {self.seconds:g} s (--time-budget-s) leaves no room for "
                    f"another A/B (about {expected:.0f} s each)"
                )
        if self.spent is not None:
            raise bs.StepLimit(self.spent)


# -- the triage -----------------------------------------------------------------------------------
@dataclass
class Finding:
    """One culprit and the benchmarks it made slower; or one benchmark left without a culprit."""

    lead: Flagged
    good: Good
    result: bs.BisectResult | None = None  # the lead's bisection (None: not bisected)
    joined: list[Flagged] = field(default_factory=list)  # others that share the culprit
    checks: list[bs.ABResult] = field(default_factory=list)  # the shared-culprit A/Bs run
    # the A/B of the culprit against its parent that convicted each joined benchmark
    convicted_by: dict[Flagged, bs.ABResult] = field(default_factory=dict)
    note: str = ""  # why not bisected
    request: object | None = None  # the culprit's issue text (triage_report.IssueText)
    issue: github.Published | None = None  # once opened or updated

    @property
    def culprit(self) -> str | None:
        return self.result.culprit if self.result is not None else None

    @property
    def benchmarks(self) -> list[Flagged]:
        return [self.lead, *self.joined]


def bisect_all(
    flagged: Sequence[Flagged],
    goods: dict[Flagged, Good],
    line: Line,
    factory: RunnerFactory,
    git: lines.GitLines,
    budget: Budget,
) -> list[Finding]:
    """Steps 3 and 4 of the module's docstring: the findings, culprits first found first."""
    pending = sorted(flagged, key=lambda f: -(f.ratio or 0.0))
    findings: list[Finding] = []
    while pending:
        lead = pending.pop(0)
        good = goods[lead]
        if good.commit is None:
            findings.append(Finding(lead, good, note=good.why))
            continue
        if budget.spent is not None:
            findings.append(Finding(lead, good, note=f"not bisected: {budget.spent}"))
            continue
        runner = budget.wrap(factory(lead.mode, (lead.benchmark,)))
        result = bs.bisect_merges(line.commits(good.commit), runner, git)
        same = next((f for f in findings if result.culprit and f.culprit == result.culprit), None)
        if same is not None:  # the shared-culprit A/B missed it; its own bisection did not
            same.joined.append(lead)
            same.convicted_by[lead] = result.convicting
            finding = same
        else:
            finding = Finding(lead, good, result)
            findings.append(finding)
        if result.culprit is not None:
            pending = _join_others(finding, result, pending, goods, factory, git, budget)
    return findings


def _join_others(finding, result, pending, goods, factory, git, budget) -> list[Flagged]:
    """One A/B of the culprit against its parent for the pending benchmarks of its mode whose
    good commit does not already hold it; those it convicts join the finding. The pending left."""
    culprit, parent = result.culprit, result.convicting.base
    others = [
        f
        for f in pending
        if f.mode == finding.lead.mode
        and goods[f].commit is not None
        and not git.is_ancestor(culprit, goods[f].commit)
    ]
    if not others:
        return pending
    try:
        check = budget.wrap(factory(finding.lead.mode, tuple(f.benchmark for f in others)))(
            parent, culprit
        )
    except bs.StepLimit:
        return pending
    finding.checks.append(check)
    joined = [f for f in others if check.verdict_of(f.benchmark) == bs.REGRESSION]
    finding.joined.extend(joined)
    finding.convicted_by.update(dict.fromkeys(joined, check))
    return [f for f in pending if f not in joined]


# -- the real runners -----------------------------------------------------------------------------
def subprocess_factory(repo: Path, out_dir: Path, announce=None) -> RunnerFactory:
    """Runners calling ``python -m perfgate ab`` in ``repo``: one benchmark selected exactly
    (``-k`` its full name, ``--groups`` its group); several by their groups (``ab -k`` takes one
    substring), each read from the A/B's per-benchmark verdicts. Each factory call keeps its
    reports under ``out_dir/<n>-<label>/``."""
    made = [0]

    def make(mode: str, benchmarks: tuple[str, ...]) -> bs.ABRunner:
        made[0] += 1
        groups = sorted({ab_group(b) for b in benchmarks})
        one = benchmarks[0] if len(benchmarks) == 1 else None
        label = one.rpartition("[")[2].rstrip("]") if one else f"{len(benchmarks)}-benchmarks"
        run = bs.subprocess_runner(
            repo,
            keyword=one,
            extra=["--groups", ",".join(groups), "--mode", mode],
            out_dir=Path(out_dir) / f"{made[0]:02d}-{label}",
        )
        return run if announce is None else announce(run, benchmarks)

    return make
