"""The push gate against history on a GPU: runs appended with ``bench --history``, then one
``bench --against history``; its verdicts beside the stored baseline's on the same runs.

``python -m lab.scripts.history_gate_check --out DIR [--runs 3] [-k EXPR] [--rounds 100]
[--budget-s 200]``

In a temporary clean clone of this working tree (:mod:`tests.perfgate.history_clone`: on the GPU machine
the copied tree is dirty, and the history keeps no dirty run), from the clone:

1. ``--runs`` times ``python -m perfgate bench -k EXPR --rounds-device R --history
   --history-branch main --db DIR/h.sqlite --allow-missing-baseline``: each run appended, and
   judged against the stored baseline (``perf_baselines/<device>/device.json``) as the push gate
   does by default;
2. once ``bench ... --against history --db DIR/h.sqlite``: judged against those runs (it needs
   ``min_runs`` of ``[tool.perfgate-history]`` of them; fewer give the fallback warning);
3. offline (no GPU): that last run against the stored baseline (``perfgate compare
   --allow-missing``), ``history list``, ``history detect`` (needs ruptures) and ``history plot``.

Each step's output goes to ``DIR/logs/``, its reports to ``DIR/runs/<step>/``; the summary to
``DIR/history-gate.json`` and ``DIR/history-gate.md``: per run the verdict of every benchmark
against the stored baseline, and the final run's against the history and against the stored
baseline. A false alarm is a ``regression`` verdict here: the code is the same commit in every
run. GPU steps stop being started once ``--budget-s`` is spent (each is also stopped at the
remaining budget), and say so. Exit 0 when every step ran, 2 when one could not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfgate import spawn
from tests.perfgate.history_clone import CloneError, clean_clone, is_clean

DEFAULT_K = "m16-n2112 or m4-n2880 or m64-n7168"  # 3 GEMMs and 2 reducers, the 3.5 µs one too


def bench_command(out: Path, step: str, keyword: str, rounds: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "perfgate",
        "bench",
        "-k",
        keyword,
        "--rounds-device",
        str(rounds),
        "--results-dir",
        str(out / "runs" / step),
        "--db",
        str(out / "h.sqlite"),
        *extra,
    ]


def plan(out: Path, runs: int, keyword: str, rounds: int) -> list[tuple[str, list[str], bool]]:
    """``(step, command, needs the GPU)`` in order."""
    appended = ("--history", "--history-branch", "main", "--allow-missing-baseline")
    steps = [
        (f"run-{i + 1}", bench_command(out, f"run-{i + 1}", keyword, rounds, *appended), True)
        for i in range(runs)
    ]
    steps.append(
        ("against", bench_command(out, "against", keyword, rounds, "--against", "history"), True)
    )
    py = [sys.executable, "-m", "perfgate"]
    db = ["--db", str(out / "h.sqlite")]
    steps += [
        ("list", [*py, "history", "list", *db, "--json", str(out / "list.json")], False),
        ("detect", [*py, "history", "detect", *db, "--json", str(out / "detect.json")], False),
        ("plot", [*py, "history", "plot", *db, "--out", str(out / "history.png")], False),
    ]
    return steps


def stored_compare(out: Path, clone: Path) -> list[str] | None:
    """``perfgate compare`` of the final run against the stored baseline, or None without one."""
    current = out / "runs" / "against" / "device.json"
    try:
        device = json.loads(current.read_text())["machine_info"]["perfgate"]["device_key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    stored = clone / "perf_baselines" / device / "device.json"
    if not stored.is_file():
        return None
    vs = out / "runs" / "against" / "vs-stored"
    return [
        *(sys.executable, "-m", "perfgate", "compare", str(stored), str(current)),
        *("--allow-missing", "--json", f"{vs}.json", "--markdown", f"{vs}.md"),
    ]


def verdicts(report_path: Path) -> dict | None:
    """``{baseline, exit_code, counts, benchmarks: {name: (verdict, ratio, threshold)}}``."""
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        return None
    return {
        "baseline": report["summary"]["baseline"],
        "exit_code": report["summary"]["exit_code"],
        "counts": report["summary"]["counts"],
        "benchmarks": {
            b["name"]: [b["verdict"], b.get("ratio"), b.get("threshold")]
            for b in report["benchmarks"]
        },
    }


def markdown(summary: dict) -> str:
    lines = [
        "### Push gate against history: false-alarm check (same commit in every run)",
        "",
        f"commit `{summary['commit'][:12]}`, {summary['runs']} runs appended, `-k "
        f"{summary['keyword']}`, {summary['rounds']} rounds; GPU steps {summary['gpu_s']} s",
        "",
        "| step | exit | judged against | regression | unchanged | other | wall s |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for s in summary["steps"]:
        v = s.get("report")
        if v is None:
            lines.append(f"| {s['step']} | {s['rc']} | - | - | - | - | {s['wall_s']} |")
            continue
        c = v["counts"]
        other = sum(n for k, n in c.items() if k not in ("regression", "unchanged"))
        lines.append(
            f"| {s['step']} | {s['rc']} | `{Path(v['baseline']).name}` | "
            f"{c.get('regression', 0)} | {c.get('unchanged', 0)} | {other} | {s['wall_s']} |"
        )
    lines += ["", f"false alarms against history: {summary['false_alarms_history']}", ""]
    lines.append(f"false alarms against the stored baseline: {summary['false_alarms_stored']}")
    if summary["not_run"]:
        lines += ["", f"not run (budget): {', '.join(summary['not_run'])}"]
    return "\n".join(lines) + "\n"


def run_steps(
    clone: Path, out: Path, steps, budget_s: float
) -> tuple[list[dict], list[str], float]:
    done, skipped, gpu_s = [], [], 0.0
    (out / "logs").mkdir(parents=True, exist_ok=True)
    for name, cmd, gpu in steps:
        left = budget_s - gpu_s
        if gpu and left <= 0:
            skipped.append(name)
            continue
        start = time.monotonic()
        with (out / "logs" / f"{name}.log").open("w", encoding="utf-8") as log:
            log.write("$ " + " ".join(cmd[1:]) + "\n")
            log.flush()
            try:
                rc = spawn.run(
                    cmd,
                    cwd=clone,
                    stdout=log,
                    stderr=log,
                    timeout=left if gpu else 300,
                    env=dict(os.environ, PERFGATE_REQUIRE_GPU="1"),  # no GPU is an error here
                ).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        wall = time.monotonic() - start
        gpu_s += wall if gpu else 0.0
        step = {"step": name, "rc": rc, "wall_s": round(wall, 1)}
        report = out / "runs" / name / "device.compare.json"
        if gpu:
            step["report"] = verdicts(report)
        done.append(step)
        print(f"lab.scripts.history_gate_check: {name}: exit {rc} ({wall:.0f} s)", flush=True)
        if name == "against":
            compare = stored_compare(out, clone)
            if compare is not None:
                with (out / "logs" / "vs-stored.log").open("w", encoding="utf-8") as log:
                    rc = spawn.run(compare, cwd=clone, stdout=log, stderr=log).returncode
                done.append(
                    {
                        "step": "against-vs-stored",
                        "rc": rc,
                        "wall_s": 0.0,
                        "report": verdicts(out / "runs" / "against" / "vs-stored.json"),
                    }
                )
    return done, skipped, round(gpu_s, 1)


def false_alarms(steps: list[dict], names) -> str:
    judged = [s for s in steps if s["step"] in names and s.get("report")]
    alarms = sum(s["report"]["counts"].get("regression", 0) for s in judged)
    total = sum(len(s["report"]["benchmarks"]) for s in judged)
    return f"{alarms} in {total} judgements"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lab.scripts.history_gate_check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=3, help="runs appended (default: 3)")
    parser.add_argument("-k", dest="keyword", default=DEFAULT_K, help="bench -k")
    parser.add_argument("--rounds", type=int, default=100, help="--rounds-device of each run")
    parser.add_argument("--budget-s", type=float, default=200.0, help="GPU steps' time budget")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.rounds < 10:
        print(
            "lab.scripts.history_gate_check: error: --runs >= 1 and --rounds >= 10", file=sys.stderr
        )
        return 2
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if (out / "h.sqlite").exists():
        print(f"lab.scripts.history_gate_check: error: {out / 'h.sqlite'} exists", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="perfgate-history-gate-"))
    try:
        clone = work / "clone"
        try:
            commit = clean_clone(clone, message="history gate check: the working tree as is")
        except (CloneError, OSError) as exc:
            print(f"lab.scripts.history_gate_check: error: {exc}", file=sys.stderr)
            return 2
        steps = plan(out, args.runs, args.keyword, args.rounds)
        done, skipped, gpu_s = run_steps(clone, out, steps, args.budget_s)
        runs = [f"run-{i + 1}" for i in range(args.runs)]
        summary = {
            "commit": commit,
            "clean_after": is_clean(clone),
            "runs": args.runs,
            "keyword": args.keyword,
            "rounds": args.rounds,
            "gpu_s": gpu_s,
            "steps": done,
            "not_run": skipped,
            "false_alarms_history": false_alarms(done, ["against"]),
            "false_alarms_stored": false_alarms(done, [*runs, "against-vs-stored"]),
        }
        (out / "history-gate.json").write_text(json.dumps(summary, indent=2) + "\n")
        text = markdown(summary)
        (out / "history-gate.md").write_text(text, encoding="utf-8")
        print(text, end="")
        return 2 if skipped or any(s["rc"] in (2, 124) for s in done) else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
