"""Triage of a red main: which commit made each flagged benchmark slower (``perfgate triage``).

After the gate flagged regressions, :func:`triage`:

1. reads the gate's comparison reports (``<mode>.compare.json``, as ``bench`` writes them): the
   benchmarks whose verdict is ``regression``, the run each report judged (its results file:
   device key, mode, fingerprint segment, commit) and the commit of the baseline it was judged
   against. Only device and leaderboard mode: those are what ``perfgate ab`` measures;
2. picks, for each flagged benchmark, the good commit: the newest run of ``branch`` (main) in
   the history store on this device, in this mode and fingerprint segment, that measured the
   benchmark and **passed** the gate (the run's verdict, :mod:`perfgate.history.verdicts`), and
   whose commit is on BAD's first-parent line. With none (no store, an older store without
   verdicts, no passing run), one line says so and the good commit is the one the report's
   baseline was recorded at, when that is on the line; else the benchmark is not bisected;
3. bisects the first flagged benchmark (the largest regression first) from its good commit to
   BAD, into merges (:func:`perfgate.hunt.bisect.bisect_merges`), then measures the culprit
   against its parent once for every other flagged benchmark of the same mode: those that
   regress there share the culprit and are not bisected again; the rest are bisected in turn.
   Decision: a benchmark joins a culprit only when that A/B convicts it by the same rule as the
   bisection's own conviction, and only when the culprit is not already in its good commit;
4. stops starting A/Bs once the :class:`Budget` is spent (a step count and a time budget that
   fits the job's timeout), saying so; what was found so far is reported;
5. opens or updates one GitHub issue per culprit (:mod:`perfgate.hunt.github`) and writes
   the summary (markdown for ``$GITHUB_STEP_SUMMARY``) and the JSON
   (:mod:`perfgate.hunt.triage_report`).

The pieces live in :mod:`perfgate.hunt.culprits` (1 to 4), :mod:`perfgate.hunt.github`
and :mod:`perfgate.hunt.triage_report` (5); :func:`triage` runs them in turn. The A/B runners
are injected as :data:`~perfgate.hunt.culprits.RunnerFactory` (tests give fakes; the command
:func:`~perfgate.hunt.culprits.subprocess_factory`, which runs ``python -m perfgate ab``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path

from perfgate import atomic
from perfgate.explain import wiring as explain
from perfgate.hunt import github, lines
from perfgate.hunt import triage_report as tr
from perfgate.hunt.culprits import (
    PROG,
    Budget,
    Flagged,
    Good,
    Line,
    RunnerFactory,
    TriageError,
    bisect_all,
    default_max_steps,
    pick_good,
    read_gate_report,
)
from perfgate.refusal import RunFailure


# -- the whole triage -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """What ``perfgate triage`` was asked (its options, checked by the command)."""

    reports: tuple[Path, ...]
    repo: Path
    db: str | Path
    branch: str
    bad: str = "HEAD"
    good: str | None = None
    max_steps: int | None = None  # None: default_max_steps
    time_budget_s: float = 3600.0
    ab_seconds: float = 120.0
    summary: Path | None = None
    json_out: Path | None = None
    run_url: str | None = None
    explain_budget_s: float = 120.0  # each culprit explained (perfgate.explain.wiring); 0: none


def triage(
    req: Request, factory: RunnerFactory, api: github.IssuesAPI | None, clock=time.monotonic
) -> int:
    """The whole triage (the module's docstring), printed as it goes; the exit code: 0 every
    flagged benchmark has its answer (a culprit, or why none) and every culprit its issue; 2 a
    benchmark without a good commit, or the GitHub API failed (after the summary and JSON are
    written). Unusable input raises TriageError (or RevisionError) before any A/B."""
    runs = [read_gate_report(p) for p in req.reports]
    bad = lines.resolve(req.repo, req.bad, "--bad")
    for run in runs:
        if run.commit != bad:
            raise TriageError(
                f"{run.report}: its run measured {run.commit[:12]}, not --bad {req.bad} "
                f"({bad[:12]}); give --bad {run.commit[:12]}"
            )
    run_of = {f: run for run in runs for f in run.flagged}
    flagged = list(dict.fromkeys(run_of))  # one each, in report order
    if not flagged:
        names = [str(p) for p in req.reports]
        print(f"{PROG}: no benchmark has a regression verdict in {', '.join(names)}: nothing to do")
        if req.summary is not None:
            atomic.write_text(req.summary, tr.nothing_flagged(names))
        if req.json_out is not None:
            ctx = tr.Context(bad, req.run_url, lambda c: "", 0, 0, None)
            atomic.write_json(req.json_out, tr.as_json([], ctx, 0))
        return 0
    line, git = Line(req.repo, bad), lines.GitLines(req.repo)
    goods = _goods(req, flagged, run_of, line)
    for why in dict.fromkeys(g.why for g in goods.values()):
        print(f"{PROG}: good: {why}")
    longest = max((len(line.commits(g.commit)) for g in goods.values() if g.commit), default=2)
    limit = req.max_steps or default_max_steps(
        len(flagged), longest - 1, req.time_budget_s, req.ab_seconds
    )
    budget = Budget(limit, req.time_budget_s, req.ab_seconds, clock)
    print(
        f"{PROG}: {len(flagged)} flagged benchmark(s) at {bad[:12]}, up to {longest - 1} commits "
        f"after their good commit; at most {limit} A/Bs within {req.time_budget_s:g} s"
    )
    findings = bisect_all(flagged, goods, line, factory, git, budget)
    if budget.spent:
        print(f"{PROG}: stopped early: {budget.spent}")
    ctx = tr.Context(
        bad, req.run_url, git.subject, budget.used, limit, budget.spent, why=_why(req, findings)
    )
    for f in findings:
        if f.culprit:
            f.request = tr.issue(f, ctx)
    published, problems = publish(api, [f.request for f in findings if f.culprit])
    for f in findings:
        f.issue = published.get(f.culprit)
    ctx = dataclasses.replace(ctx, problems=problems)
    code = 2 if problems or any(g.commit is None for g in goods.values()) else 0
    for f in findings:
        if f.culprit:
            where = (
                f" (inside the merge {f.result.chain[0][:12]})" if len(f.result.chain) > 1 else ""
            )
            names = ", ".join(tr.short(b.benchmark) for b in f.benchmarks)
            print(f"{PROG}: culprit {f.culprit[:12]}{where}: {names}")
        else:
            print(
                f"{PROG}: no culprit for {tr.short(f.lead.benchmark)}: {f.note or f.result.message}"
            )
    if req.summary is not None:
        atomic.write_text(req.summary, tr.summary(findings, ctx))
    if req.json_out is not None:
        atomic.write_json(req.json_out, tr.as_json(findings, ctx, code))
    _fail_on(problems)
    return code


def _why(req: Request, findings, clock=time.monotonic) -> dict[str, list[str]]:
    """Each culprit's "Why" section: its flagged benchmarks explained, the culprit against the
    parent its conviction measured, within what is left of ``req.explain_budget_s``."""
    out: dict[str, list[str]] = {}
    end = clock() + req.explain_budget_s
    for f in findings:
        if not f.culprit or f.culprit in out:
            continue
        left = req.explain_budget_s and max(end - clock(), 0.001)
        out[f.culprit] = explain.why_section(
            f.result.convicting.base,
            f.culprit,
            [b.benchmark for b in f.benchmarks],
            budget_s=left,
            repo=req.repo,
        )
    return out


def _goods(req: Request, flagged, run_of, line: Line) -> dict[Flagged, Good]:
    if req.good is None:
        return {f: pick_good(run_of[f], f.benchmark, req.db, req.branch, line) for f in flagged}
    good = lines.resolve(req.repo, req.good, "--good")
    if good == line.bad or line.commits(good) is None:
        raise TriageError(f"--good {req.good}: not an older commit of --bad's first-parent line")
    return dict.fromkeys(flagged, Good(good, f"--good {req.good}"))


def publish(api: github.IssuesAPI | None, requests) -> tuple[dict, tuple[str, ...]]:
    """Open or update the issue of each request (:class:`~perfgate.hunt.triage_report.IssueText`);
    ``({culprit: Published}, problems)``: the first API failure ends it, named in one line."""
    published: dict[str, github.Published] = {}
    if api is None:
        return published, ()
    for r in requests:
        try:
            published[r.culprit] = done = github.publish(api, r.marker, r.title, r.body, r.note)
        except github.GitHubError as exc:
            return published, (
                f"{exc}: the issue of {r.culprit[:12]} (and any after it) not opened",
            )
        print(f"{PROG}: issue #{done.issue.number} {done.action}: {done.issue.url}")
    return published, ()


def publish_saved(path: Path, api: github.IssuesAPI, summary: Path | None = None) -> int:
    """``triage --publish``: open or update the issues of a triage made elsewhere with
    --no-issues (the GPU container, which gets no token), from its --json; 0, or a RunFailure
    (one line, exit 2) when the API failed. ``summary``: the issues' lines as markdown."""
    requests = tr.issue_requests(path)  # TriageError for a file that is not a triage's JSON
    published, problems = publish(api, requests)
    if not requests:
        print(f"{PROG}: {path} names no culprit: no issue to open")
    if summary is not None:
        atomic.write_text(summary, tr.issues_markdown(requests, published, problems))
    _fail_on(problems)
    return 0


def _fail_on(problems: tuple[str, ...]) -> None:
    """An API failure, once everything else is written: one line and exit 2 (``main``)."""
    if problems:
        raise RunFailure(problems[0], code=2)


def run_url(env=os.environ) -> str | None:
    """This Actions run's address, when run by Actions."""
    parts = [env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}" if all(parts) else None
