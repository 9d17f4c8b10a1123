"""Noise experiments for the gate, in one invocation: ``python -m perfgate.experiments OUTDIR``.

On a GPU it runs the default benchmark selection several times per timing mode (separate pytest
processes: honest run-to-run noise), once more per mode with ``MXFP4_BENCH_INJECT_SLOWDOWN``
(an extra memory pass inside the timed region, sized to the given fraction of the kernel time),
then writes under OUTDIR:

- ``runs/<mode>-<i>.json`` and ``runs/<mode>-inject.json``: the raw pytest-benchmark results;
- ``spread``: each benchmark's run-to-run spread of medians ((max - min) / min) per mode;
- ``false alarms``: every pair of unchanged runs compared with ``compare_files`` (regressions
  and improvements counted; both are false here);
- ``injection``: run 0 vs the injected run; how many benchmarks were flagged, with ratios;
- ``summary.md`` / ``summary.json``; ``compare/*.json``: every comparison's report;
- ``perf_baselines/<device_key>/<mode>.json``: run 0 of each mode, a baseline candidate to commit.

Runs are interleaved (device, leaderboard, device, ...) and a new run starts only if the time
budget (``--budget-s``) allows one more of the longest so far, so a cut-off still leaves balanced
data. Runs are never compared across modes.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from perfgate import bench
from perfgate.bench import REPO, SUITES
from perfgate.timing import INJECT_ENV


def spread(medians: list[float]) -> float:
    """(max - min) / min of a benchmark's per-run medians."""
    if len(medians) < 2 or min(medians) <= 0:
        raise ValueError(f"need >= 2 positive medians, got {medians!r}")
    return (max(medians) - min(medians)) / min(medians)


def medians_by_name(paths: list[Path]) -> dict[str, list[float]]:
    """Per benchmark fullname, the median of its samples in each file (in file order)."""
    from perfgate import baseline as bl

    out: dict[str, list[float]] = {}
    for path in paths:
        for name, samples in bl.samples(bl.load(path)).items():
            out.setdefault(name, []).append(statistics.median(samples))
    return out


def verdicts(compare_json: Path) -> dict[str, dict[str, Any]]:
    rows = json.loads(compare_json.read_text())["benchmarks"]
    return {r["name"]: r for r in rows}


def _run(mode: str, json_path: Path, *, inject: float | None, extra: list[str], log: Path) -> int:
    cmd = bench.pytest_command(mode, json_path, keyword=None, markers=None, extra=extra)
    env = dict(os.environ, PERFGATE_REQUIRE_GPU="1")
    env.pop(INJECT_ENV, None)
    if inject:
        env[INJECT_ENV] = str(inject)
    with log.open("w") as f:
        return subprocess.run(
            cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, check=False
        ).returncode


def _compare(base: Path, cur: Path, out: Path) -> int:
    from rich.console import Console

    from perfgate.compare import compare_files

    return compare_files(base, cur, json_out=out, console=Console(file=io.StringIO(), width=200))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m perfgate.experiments", description=__doc__.splitlines()[0]
    )
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--runs", type=int, default=3, help="unchanged runs per mode (default 3)")
    parser.add_argument(
        "--modes", default="device,leaderboard", help="comma-separated (default both)"
    )
    parser.add_argument(
        "--inject", type=float, default=0.05, help="injected slowdown (default 0.05)"
    )
    parser.add_argument(
        "--budget-s", type=float, default=450.0, help="stop starting runs after this"
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- extra pytest arguments")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in SUITES for m in modes) or not modes:
        parser.error(f"--modes must name some of {', '.join(SUITES)}")
    if args.runs < 2:
        parser.error("--runs must be >= 2 (a spread needs two runs)")
    if not 0 < args.inject < 1:
        parser.error("--inject must be in (0, 1)")
    if not bench.gpu_available():
        print("perfgate.experiments: no GPU; nothing to measure", file=sys.stderr)
        return 2
    extra = bench.passthrough(args.pytest_args)
    runs_dir = args.outdir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    (args.outdir / "compare").mkdir(exist_ok=True)

    # Interleaved plan: two plain runs per mode, then the injected runs, then the rest.
    plan = [(m, i) for i in range(2) for m in modes] + [(m, "inject") for m in modes]
    plan += [(m, i) for i in range(2, args.runs) for m in modes]
    start, longest, done, failures = time.monotonic(), 0.0, [], []
    for mode, tag in plan:
        elapsed = time.monotonic() - start
        if done and elapsed + longest > args.budget_s:
            print(f"budget: stopping before {mode}-{tag} ({elapsed:.0f} s used)", flush=True)
            break
        t0 = time.monotonic()
        path = runs_dir / f"{mode}-{tag}.json"
        rc = _run(mode, path, inject=args.inject if tag == "inject" else None, extra=extra,
                  log=runs_dir / f"{mode}-{tag}.log")  # fmt: skip
        longest = max(longest, time.monotonic() - t0)
        print(f"{mode}-{tag}: pytest exit {rc} in {time.monotonic() - t0:.0f} s", flush=True)
        (done if rc == 0 and path.is_file() else failures).append((mode, tag))

    summary: dict[str, Any] = {"failures": [f"{m}-{t}" for m, t in failures], "modes": {}}
    for mode in modes:
        plain = [runs_dir / f"{mode}-{t}.json" for m, t in done if m == mode and t != "inject"]
        result: dict[str, Any] = {"runs": len(plain)}
        summary["modes"][mode] = result
        if not plain:
            continue
        from perfgate import baseline as bl

        key = bl.device_key(bl.load(plain[0]))
        target = args.outdir / "perf_baselines" / key / f"{mode}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(plain[0], target)
        if len(plain) >= 2:
            meds = medians_by_name(plain)
            result["spread"] = {n: {"medians_us": [m * 1e6 for m in v], "spread": spread(v)}
                                for n, v in meds.items() if len(v) >= 2}  # fmt: skip
            alarms, compared = [], 0
            for a, b in itertools.combinations(range(len(plain)), 2):
                out = args.outdir / "compare" / f"{mode}-{a}-vs-{b}.json"
                _compare(plain[a], plain[b], out)
                for name, row in verdicts(out).items():
                    compared += 1
                    if row["verdict"] in ("regression", "improvement"):
                        alarms.append({"pair": f"{a}-{b}", "name": name, "verdict": row["verdict"],
                                       "ratio": row.get("ratio")})  # fmt: skip
            result["false_alarms"] = {
                "count": len(alarms),
                "comparisons": compared,
                "alarms": alarms,
            }
        injected = runs_dir / f"{mode}-inject.json"
        if (mode, "inject") in done:
            out = args.outdir / "compare" / f"{mode}-0-vs-inject.json"
            rc = _compare(plain[0], injected, out)
            rows = verdicts(out)
            extra_info = {
                b["fullname"]: b.get("extra_info", {}) for b in bl.load(injected)["benchmarks"]
            }
            result["injection"] = {
                "requested": args.inject,
                "exit_code": rc,
                "flagged": sum(r["verdict"] == "regression" for r in rows.values()),
                "benchmarks": len(rows),
                "rows": {
                    n: {
                        "verdict": r["verdict"],
                        "ratio": r.get("ratio"),
                        "estimated": extra_info.get(n, {}).get("injected_fraction_estimated"),
                    }
                    for n, r in rows.items()
                },
            }
    (args.outdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    md = render_summary(summary)
    (args.outdir / "summary.md").write_text(md)
    print(md)
    return 0 if not failures else 1


def render_summary(summary: dict[str, Any]) -> str:
    lines = ["# perfgate noise experiments", ""]
    if summary["failures"]:
        lines += [f"**failed runs:** {', '.join(summary['failures'])} (see runs/*.log)", ""]
    for mode, res in summary["modes"].items():
        lines += [f"## {mode} mode ({res['runs']} unchanged runs)", ""]
        if "spread" in res:
            lines += ["| benchmark | medians (us) | spread |", "| --- | --- | --- |"]
            for name, s in res["spread"].items():
                meds = ", ".join(f"{m:.3f}" for m in s["medians_us"])
                lines.append(f"| `{name.split('::')[-1]}` | {meds} | {s['spread']:.2%} |")
            fa = res["false_alarms"]
            lines += ["", f"False alarms (regression or improvement between unchanged runs): "
                      f"**{fa['count']} of {fa['comparisons']}** comparisons", ""]  # fmt: skip
            lines += [f"- {a['pair']} `{a['name'].split('::')[-1]}`: {a['verdict']} ratio {a['ratio']}"
                      for a in fa["alarms"]]  # fmt: skip
        if "injection" in res:
            inj = res["injection"]
            lines += ["", f"Injected {inj['requested']:.0%} slowdown: **{inj['flagged']} of "
                      f"{inj['benchmarks']}** flagged as regression (compare exit {inj['exit_code']})", "",
                      "| benchmark | verdict | ratio | injected (estimated) |", "| --- | --- | --- | --- |"]  # fmt: skip
            for name, r in inj["rows"].items():
                ratio = f"{r['ratio']:.4f}" if r["ratio"] is not None else "-"
                est = f"{r['estimated']:.2%}" if r["estimated"] is not None else "-"
                lines.append(f"| `{name.split('::')[-1]}` | {r['verdict']} | {ratio} | {est} |")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
