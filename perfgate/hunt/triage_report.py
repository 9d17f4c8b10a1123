"""What ``perfgate triage`` writes: the job summary (markdown), one issue per culprit, the JSON.

A culprit's section (the same in the summary and in its issue): the benchmarks it made slower
(the gate's change against the baseline, and the culprit's against its parent), the merge on
main's first-parent line when the culprit is inside one, the good and bad commits, the command
that reproduces the conviction, and the convicting A/B's table. An issue's body starts with the
hidden marker that a rerun finds it by (:func:`marker`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.hunt import bisect as bs
from perfgate.hunt.culprits import Finding, Flagged, TriageError, ab_group

MAX_NAMED = 3  # benchmarks named in an issue's title


@dataclass(frozen=True)
class Context:
    bad: str
    run_url: str | None
    subject: Callable[[str], str]  # a commit's one-line subject
    steps_used: int
    step_limit: int
    stopped: str | None  # why the budget stopped the triage, if it did
    problems: tuple[str, ...] = ()  # what went wrong after the A/Bs (the API), one line each
    # culprit -> its "Why" section (perfgate.explain.wiring), markdown lines
    why: dict[str, list[str]] = dataclasses.field(default_factory=dict)


def marker(culprit: str) -> str:
    return f"<!-- perfgate-triage culprit={culprit} -->"


def short(benchmark: str) -> str:
    return benchmark.rpartition("::")[2] or benchmark


def _change(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio - 1:+.1%}"


def _ratio(ab: bs.ABResult | None, benchmark: str) -> float | None:
    for row in (ab.detail.get("benchmarks") or ()) if ab is not None else ():
        if isinstance(row, dict) and row.get("name") == benchmark:
            value = row.get("ratio")
            return float(value) if isinstance(value, int | float) else None
    return None


def _convicting(finding: Finding, flagged: Flagged) -> bs.ABResult:
    """The A/B of the culprit against its parent that convicted ``flagged``."""
    return finding.convicted_by.get(flagged) or finding.result.convicting


def _commit(sha: str, ctx: Context) -> str:
    subject = ctx.subject(sha)
    return f"`{sha[:12]}`" + (f" ({subject})" if subject else "")


def _run(ctx: Context) -> str:
    return f" ([run]({ctx.run_url}))" if ctx.run_url else ""


def culprit_section(finding: Finding, ctx: Context) -> list[str]:
    result, culprit = finding.result, finding.culprit
    convicting = result.convicting
    out = [
        f"### {_commit(culprit, ctx)}: {len(finding.benchmarks)} benchmark(s) slower",
        "",
        "| benchmark | mode | the gate (against the baseline) | the culprit against its parent |",
        "| --- | --- | --- | --- |",
    ]
    for f in finding.benchmarks:
        ab = _convicting(finding, f)
        verdict = ab.verdict_of(f.benchmark)
        out.append(
            f"| `{short(f.benchmark)}` | {f.mode} | {_change(f.ratio)} | "
            f"{verdict or ab.outcome} {_change(_ratio(ab, f.benchmark))} |"
        )
    out.append("")
    if len(result.chain) > 1:
        steps = [_commit(c, ctx) for c in result.chain]
        out.append(
            f"- on main's first-parent line: the merge {steps[0]}; inside it: "
            + "; inside that: ".join(steps[1:])
        )
    out += [
        f"- bisection: {result.message}",
        f"- good {_commit(finding.good.commit, ctx)}: {finding.good.why}",
        f"- bad `{ctx.bad[:12]}`: main's head, where the gate flagged it{_run(ctx)}",
        f"- reproduce: `python -m perfgate ab --base {convicting.base[:12]} --head "
        f"{culprit[:12]} --mode {finding.lead.mode} --groups {ab_group(finding.lead.benchmark)} "
        f"-k '{finding.lead.benchmark}'`",
        "",
        f"The A/B that convicts it (`{culprit[:12]}` against its parent `{convicting.base[:12]}`):",
        "",
        convicting.table.strip(),
        "",
        *ctx.why.get(culprit, []),
    ]
    return out


def unplaced_section(finding: Finding, ctx: Context) -> list[str]:
    names = ", ".join(f"`{short(f.benchmark)}` ({_change(f.ratio)})" for f in finding.benchmarks)
    why = finding.note or finding.result.message
    out = [f"### No culprit: {names}", "", f"- {why}"]
    if finding.good.commit is not None:
        out.append(f"- good {_commit(finding.good.commit, ctx)}: {finding.good.why}")
    return [*out, ""]


def summary(findings: list[Finding], ctx: Context) -> str:
    culprits = [f for f in findings if f.culprit]
    flagged = sum(len(f.benchmarks) for f in findings)
    out = [
        f"## perfgate triage: {len(culprits)} culprit(s) for {flagged} flagged benchmark(s)",
        "",
        f"Main at `{ctx.bad[:12]}`{_run(ctx)}: {ctx.steps_used} A/B(s) run, at most "
        f"{ctx.step_limit} allowed.",
        "",
    ]
    if ctx.stopped:
        out += [f"**Stopped early: {ctx.stopped}.** What was found until then is below.", ""]
    for problem in ctx.problems:
        out += [f"**{problem}**", ""]
    for f in findings:
        if f.culprit:
            out += culprit_section(f, ctx)
            if f.issue is not None:
                out += [
                    f"Issue [#{f.issue.issue.number}]({f.issue.issue.url}): {f.issue.action}.",
                    "",
                ]
        else:
            out += unplaced_section(f, ctx)
    return "\n".join(out).rstrip() + "\n"


def nothing_flagged(reports: list[str]) -> str:
    return (
        "## perfgate triage: nothing to triage\n\n"
        f"No benchmark has a regression verdict in {', '.join(reports)}.\n"
    )


@dataclass(frozen=True)
class IssueText:
    """A culprit's issue: found by ``marker``, opened with ``title`` and ``body``; on a rerun the
    body replaced and ``note`` added as a comment."""

    culprit: str
    marker: str
    title: str
    body: str
    note: str


def issue(finding: Finding, ctx: Context) -> IssueText:
    culprit, names = finding.culprit, [short(f.benchmark) for f in finding.benchmarks]
    named = ", ".join(names[:MAX_NAMED]) + (
        f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
    )
    title = f"perfgate: {culprit[:12]} made {named} slower on {finding.lead.device_key}"
    body = "\n".join(
        [
            marker(culprit),
            f"`perfgate triage` found the commit that made these benchmarks slower on "
            f"{finding.lead.device_key}, after the gate flagged main at `{ctx.bad[:12]}`"
            f"{_run(ctx)}.",
            "",
            *culprit_section(finding, ctx),
            "_This description is the newest triage: a rerun replaces it and adds a comment; "
            "the hidden marker above is how it finds this issue._",
        ]
    )
    note = (
        f"Triage of main at `{ctx.bad[:12]}`{_run(ctx)} found `{culprit[:12]}` again, for "
        f"{', '.join(f'`{n}`' for n in names)}. The description now holds this triage."
    )
    return IssueText(culprit, marker(culprit), title, body, note)


def issue_requests(path) -> list[IssueText]:
    """The issue texts a triage's JSON holds; TriageError when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        texts = [f["issue_text"] for f in data["findings"] if f.get("issue_text")]
        return [IssueText(**t) for t in texts]
    except OSError as exc:
        raise TriageError(f"--publish {path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise TriageError(f"--publish {path}: not the JSON of perfgate triage --json") from None


def issues_markdown(texts: list[IssueText], published: dict, problems: tuple[str, ...]) -> str:
    out = ["## perfgate triage: issues", ""]
    for t in texts:
        done = published.get(t.culprit)
        state = f"[#{done.issue.number}]({done.issue.url}) {done.action}" if done else "not opened"
        out.append(f"- `{t.culprit[:12]}`: {state}")
    out += [f"- **{p}**" for p in problems] or ([] if texts else ["- no culprit: no issue"])
    return "\n".join(out) + "\n"


def as_json(findings: list[Finding], ctx: Context, exit_code: int) -> dict[str, Any]:
    return {
        "bad": ctx.bad,
        "exit_code": exit_code,
        "steps_used": ctx.steps_used,
        "step_limit": ctx.step_limit,
        "stopped": ctx.stopped,
        "problems": list(ctx.problems),
        "findings": [
            {
                "culprit": f.culprit,
                "chain": list(f.result.chain) if f.result is not None else [],
                "benchmarks": [
                    {
                        "name": b.benchmark,
                        "mode": b.mode,
                        "device_key": b.device_key,
                        "gate_ratio": b.ratio,
                        "report": b.report,
                    }
                    for b in f.benchmarks
                ],
                "good": {"commit": f.good.commit, "why": f.good.why},
                "note": f.note or None,
                "bisection": bs.as_json(f.result) if f.result is not None else None,
                "checks": [
                    {"base": c.base, "head": c.head, "outcome": c.outcome, "report": c.detail}
                    for c in f.checks
                ],
                "issue_text": None if f.request is None else dataclasses.asdict(f.request),
                "issue": None
                if f.issue is None
                else {
                    "number": f.issue.issue.number,
                    "url": f.issue.issue.url,
                    "action": f.issue.action,
                },
            }
            for f in findings
        ],
    }
