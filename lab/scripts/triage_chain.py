"""The planted-chain triage on a GPU: ``perfgate triage`` end to end on the chain of
:mod:`lab.scripts.bisect_chain`, with a local stand-in of the GitHub issues API (no network needed).

``python -m lab.scripts.triage_chain --out DIR [--shape 16,2112,7168] [--rounds 100] [--timeout-s 540]``

In a temporary clean clone of this working tree, the chain C0 (the tree), C1 (the shape unsplit:
the planted slowdown), C2 (a text file), then, as main's push job and its triage would:

1. at C0: ``perfgate bench -k <shape> --history --history-branch main`` into a new store: the
   run of main that passed the gate (it must: C0 is the tree as it is, against its baselines);
2. at C2: the same ``bench`` without the history: the gate flags the shape (exit 1), writing
   the report the triage reads;
3. ``perfgate triage REPORT --db STORE`` at C2 with ``GITHUB_API_URL`` pointing at the stand-in
   (:mod:`tests.perfgate.github_standin`, in this process) and a stand-in token: good = C0 from the store,
   bad = C2; it must name C1 and open one issue for it.

Written to DIR: each step's log (``bench-c0.log``, ``bench-c2.log``, ``triage.log``), their
results (``bench-c0/``, ``bench-c2/``, ``triage-steps/``: every A/B's reports), ``triage.md``
and ``triage.json`` (the triage's summary and answer), ``issues.json`` (what the stand-in
received), and ``triage-chain.json`` / ``triage-chain.md`` (the chain, the expected and found
culprit, the issue it would open, the exit codes, wall time). Exit 0 when the triage names C1
and opens exactly one issue for it; 1 when it names anything else or nothing; 2 when the chain
or a precondition fails (C0 does not pass the gate, C2 is not flagged). The clone is removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lab.scripts.bisect_chain import chain_parser, on_chain, shape_id
from perfgate import spawn
from tests.perfgate.github_standin import Standin
from tests.perfgate.history_clone import git

REPO_NAME = "perfgate/triage-chain"
TOKEN = "standin-token"


def bench_command(shape, results: Path, rounds: int, db: Path | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "perfgate", "bench", "-k", shape_id(shape)]
    cmd += ["--rounds-device", str(rounds), "--results-dir", str(results)]
    return cmd + (["--history", "--history-branch", "main", "--db", str(db)] if db else [])


def triage_command(out: Path, budget_s: float) -> list[str]:
    return [
        sys.executable,
        "-m",
        "perfgate",
        "triage",
        str(out / "bench-c2" / "device.compare.json"),
        "--db",
        str(out / "history.sqlite"),
        "--results-dir",
        str(out / "triage-steps"),
        "--summary",
        str(out / "triage.md"),
        "--json",
        str(out / "triage.json"),
        "--time-budget-s",
        str(round(budget_s)),
        "--max-steps",  # premise and conviction: 2; room for the worst case of 2 commits
        "4",
    ]


def summarize(commits, exits: dict, out: Path, issues: list, wall_s: float) -> dict:
    try:
        answer = json.loads((out / "triage.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        answer = None
    findings = answer.get("findings", []) if answer else []
    found = findings[0]["culprit"] if findings else None
    marker = f"<!-- perfgate-triage culprit={commits[1]} -->"
    ours = [i for i in issues if i["body"].startswith(marker)]
    return {
        "commits": {"C0 (good)": commits[0], "C1 (slow)": commits[1], "C2 (bad)": commits[2]},
        "expected_culprit": commits[1],
        "found_culprit": found,
        "good": findings[0]["good"] if findings else None,
        "issues_opened": len(issues),
        "issue": {"title": ours[0]["title"], "body": ours[0]["body"]} if ours else None,
        "correct": found == commits[1] and len(issues) == 1 and len(ours) == 1,
        "exits": exits,
        "steps_used": answer.get("steps_used") if answer else None,
        "wall_s": round(wall_s, 1),
    }


def markdown(summary: dict, shape) -> str:
    found = (summary["found_culprit"] or "-")[:12]
    lines = [
        f"### Planted-chain triage: {shape_id(shape)}",
        "",
        "| commit | sha |",
        "| --- | --- |",
        *(f"| {k} | `{v[:12]}` |" for k, v in summary["commits"].items()),
        "",
        f"- culprit found: `{found}`, expected C1 `{summary['expected_culprit'][:12]}`: "
        f"**{'correct' if summary['correct'] else 'WRONG'}**",
        f"- good: {(summary['good'] or {}).get('why', '-')}",
        f"- exits: {', '.join(f'{k} {v}' for k, v in summary['exits'].items())}; "
        f"{summary['steps_used']} A/Bs; {summary['wall_s']} s wall",
        f"- issues the stand-in received: {summary['issues_opened']}",
    ]
    if summary["issue"]:
        lines += ["", f"The issue it would open: **{summary['issue']['title']}**", "", "````"]
        lines += [summary["issue"]["body"], "````"]
    return "\n".join(lines) + "\n"


def _step(cmd: list[str], cwd: Path, log: Path, deadline: float, env=None) -> int:
    """Run one step (its output to ``log``) until ``deadline``; 124 when it ran out of time."""
    print(f"lab.scripts.triage_chain: {' '.join(cmd[1:])}", flush=True)
    with log.open("w", encoding="utf-8") as f:
        try:
            left = max(deadline - time.monotonic(), 1.0)
            return spawn.run(cmd, cwd=cwd, stdout=f, stderr=f, timeout=left, env=env).returncode
        except subprocess.TimeoutExpired:  # spawn.run stopped it and its children
            return 124


def run_chain(clone: Path, commits: list[str], shape, out: Path, rounds: int, timeout_s: float):
    """Steps 1 to 3 of the module's docstring; ``(summary, why it could not be judged or None)``."""
    start = time.monotonic()
    deadline = start + timeout_s
    exits: dict[str, int] = {}
    git(clone, "checkout", "-q", commits[0])
    exits["bench C0"] = _step(
        bench_command(shape, out / "bench-c0", rounds, out / "history.sqlite"),
        clone,
        out / "bench-c0.log",
        deadline,
    )
    git(clone, "checkout", "-q", commits[2])
    exits["bench C2"] = _step(
        bench_command(shape, out / "bench-c2", rounds), clone, out / "bench-c2.log", deadline
    )
    issues: list = []
    why = None
    if exits["bench C0"] != 0:
        why = f"C0's bench exited {exits['bench C0']} (see bench-c0.log): no passing run of main"
    elif exits["bench C2"] != 1:
        why = f"C2's bench exited {exits['bench C2']}, not 1: the gate did not flag the shape"
    else:
        with Standin(repo=REPO_NAME, token=TOKEN) as server:
            env = dict(
                os.environ,
                GITHUB_API_URL=server.url,
                GITHUB_TOKEN=TOKEN,
                GITHUB_REPOSITORY=REPO_NAME,
                PERFGATE_REQUIRE_GPU="1",
            )
            budget = deadline - time.monotonic() - 30.0  # the triage stops itself before this
            exits["triage"] = _step(
                triage_command(out, max(budget, 1.0)), clone, out / "triage.log", deadline, env
            )
            issues = [dict(i) for i in server.issues]
        (out / "issues.json").write_text(json.dumps(issues, indent=2) + "\n", encoding="utf-8")
    return summarize(commits, exits, out, issues, time.monotonic() - start), why


def main(argv: list[str] | None = None) -> int:
    parser = chain_parser("lab.scripts.triage_chain", __doc__)
    parser.add_argument("--rounds", type=int, default=100, help="bench --rounds-device")
    parser.add_argument(
        "--timeout-s", type=float, default=540.0, help="stop every step after this long in all"
    )
    args = parser.parse_args(argv)

    def run(clone: Path, commits: list[str], out: Path) -> int:
        print(f"lab.scripts.triage_chain: chain {' '.join(c[:12] for c in commits)}")
        summary, why = run_chain(clone, commits, args.shape, out, args.rounds, args.timeout_s)
        (out / "triage-chain.json").write_text(json.dumps(summary, indent=2) + "\n")
        text = markdown(summary, args.shape)
        (out / "triage-chain.md").write_text(text, encoding="utf-8")
        print(text, end="")
        if why is not None:
            print(f"lab.scripts.triage_chain: error: {why}", file=sys.stderr)
            return 2
        return 0 if summary["correct"] else 1

    return on_chain("lab.scripts.triage_chain", args.out, args.shape, run)


if __name__ == "__main__":
    raise SystemExit(main())
