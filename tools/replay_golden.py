"""Record the golden outputs that tests/perfgate/test_replay.py replays perfgate's commands against.

    python tools/replay_golden.py            # record golden/ for every case (refuses to overwrite)
    python tools/replay_golden.py --force    # re-record: only after a deliberate change of output
    python tools/replay_golden.py --inputs --force   # rewrite the synthetic input fixtures too

The cases, the runner and the normalisation live in the test module, so that recording and
replaying cannot drift apart. Record with the code whose behaviour is the reference (for issue 21:
the old layout, before the restructure), in the env the test runs in (golden/ENV.json names it).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST = REPO / "tests" / "perfgate" / "test_replay.py"
sys.path.insert(0, str(REPO))  # this checkout's perfgate, not one installed in the env


def _replay_module():
    spec = importlib.util.spec_from_file_location("perfgate_replay_cases", TEST)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# -- synthetic inputs ------------------------------------------------------------------------------
FINGERPRINT = {
    "gpu_name": "NVIDIA H200",
    "arch": "sm90",
    "compute_units": 132,
    "driver": "570.124.06",
    "runtime": "cuda 12.8",
    "torch": "2.11.0+cu128",
    "triton": "3.6.0",
    "git_commit": "0123abc",
    "clocks": {"sm_mhz": 1980, "mem_mhz": 3201},
}
LB = "tests/perf/test_leaderboard.py::test_leaderboard[m{}-n2880-k512]"
RED = "tests/perf/test_reducer.py::test_reducer[s4-m64-n7168]"


def _samples(seed: int, median: float, factor: float = 1.0, n: int = 30, noise: float = 0.01):
    """GPU-like samples: gaussian noise and a few spikes (seconds), fixed by ``seed``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = median * factor * (1 + noise * rng.standard_normal(n))
    spikes = rng.random(n) < 0.05
    x[spikes] *= rng.uniform(1.2, 2.0, spikes.sum())
    return [float(f"{v:.6g}") for v in x]  # six digits: a small fixture, the same statistics


def _stats(data: list[float]) -> dict:
    import statistics

    q1, _, q3 = statistics.quantiles(data, n=4)
    mean = statistics.fmean(data)
    return {
        "min": min(data),
        "max": max(data),
        "mean": mean,
        "stddev": statistics.stdev(data),
        "rounds": len(data),
        "median": statistics.median(data),
        "iqr": q3 - q1,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": 0,
        "stddev_outliers": 0,
        "outliers": "0;0",
        "ld15iqr": min(data),
        "hd15iqr": max(data),
        "ops": 1 / mean,
        "total": sum(data),
        "data": data,
        "iterations": 1,
    }


def _result(benchmarks: dict, *, device_key="nvidia-h200", mode="device", when=None, **fp) -> dict:
    fingerprint = {**copy.deepcopy(FINGERPRINT), **fp}
    commit_info = {"id": fingerprint["git_commit"], "dirty": False, "project": "mxfp4"}
    commit_info["branch"] = "main"
    if when is not None:
        commit_info["time"] = when
    return {
        "machine_info": {
            "node": "ci-runner",
            "machine": "x86_64",
            "python_version": "3.11.7",
            "system": "Linux",
            "perfgate": {
                "schema": 1,
                "device_key": device_key,
                "mode": mode,
                "fingerprint": fingerprint,
            },
        },
        "commit_info": commit_info,
        "benchmarks": [
            {
                "group": "leaderboard" if "leaderboard" in name else "reducer",
                "name": name.split("::")[-1],
                "fullname": name,
                "params": None,
                "param": None,
                "extra_info": {},
                "options": {"timer": "perfgate-device", "min_rounds": len(samples)},
                "stats": _stats(samples),
            }
            for name, samples in benchmarks.items()
        ],
        "datetime": when or "2026-11-30T11:28:39.536020+00:00",
        "version": "5.2.3",
    }


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _compare_inputs(out: Path) -> None:
    """Every verdict of ``compare`` in one pair, and the pairs each refusal needs."""
    names = {key: LB.format(m) for key, m in zip("ruicm", (4, 16, 32, 64, 256), strict=True)}
    base = {name: _samples(i, 20e-6) for i, name in enumerate(names.values())}
    factors = {"r": 1.10, "u": 0.90, "i": 1.0, "c": 1.03}
    cur = {names[k]: _samples(100 + i, 20e-6, f) for i, (k, f) in enumerate(factors.items())}
    cur[RED] = _samples(200, 5e-6)  # new: not in the baseline; names["m"] is missing
    _write(out / "base.json", _result(base))
    _write(out / "current.json", _result(cur))
    rerun = {name: _samples(300 + i, 20e-6) for i, name in enumerate(names.values())}
    # improvement, unchanged and new only: exit 0
    better = {**rerun, names["u"]: cur[names["u"]], RED: cur[RED]}
    _write(out / "current_better.json", _result(better))
    _write(
        out / "current_missing.json", _result({k: v for k, v in rerun.items() if k != names["m"]})
    )
    _write(out / "current_inconclusive.json", _result({**rerun, names["c"]: cur[names["c"]]}))
    _write(out / "current_driver.json", _result(base, driver="575.51.03", git_commit="4567def"))
    _write(out / "current_other_key.json", _result(base, device_key="amd-mi355x"))
    _write(out / "current_other_cus.json", _result(base, compute_units=114))
    _write(out / "current_leaderboard.json", _result(base, mode="leaderboard"))
    _write(out / "current_short.json", _result({n: s[:5] for n, s in base.items()}))
    (out / "malformed.json").write_text('{"machine_info": {"perfgate": ', encoding="utf-8")
    _write(out / "no_perfgate.json", {"benchmarks": [], "machine_info": {}})


def _pooled_inputs(out: Path) -> None:
    """A real pooled H200 baseline (three of its benchmarks), and a run made from its samples:
    the drift-based threshold of a stored baseline."""
    device = json.loads((REPO / "perf_baselines/nvidia-h200/device.json").read_text())
    keep = device["benchmarks"][:2] + device["benchmarks"][-1:]
    for bench in keep:  # every third sample of each of its three runs: a small fixture
        bench["stats"] = _stats(bench["stats"]["data"][::3])
    device["benchmarks"] = keep
    device["machine_info"] = {
        k: device["machine_info"][k] for k in ("node", "machine", "python_version", "perfgate")
    }
    _write(out / "pooled_base.json", device)
    run = copy.deepcopy(device)
    for bench, factor in zip(run["benchmarks"], (1.0, 1.06, 0.97), strict=True):
        data = [float(f"{x * factor:.6g}") for x in bench["stats"]["data"][1::2]]
        bench["stats"] = _stats(data)
        bench["extra_info"].pop("perfgate_runs", None)
    _write(out / "pooled_current.json", run)


def _history_inputs(out: Path) -> None:
    """Eight runs of two benchmarks on successive commits: a 10% step up at run 5 in one."""
    for i in range(8):
        factor = 1.10 if i >= 4 else 1.0
        when = f"2026-11-{10 + i:02d}T08:00:00+00:00"
        benchmarks = {
            LB.format(16): _samples(300 + i, 20e-6, factor, noise=0.003),
            RED: _samples(400 + i, 5e-6, noise=0.003),
        }
        _write(out / f"run{i}.json", _result(benchmarks, git_commit=f"c{i:06d}", when=when))
    dirty = _result({RED: _samples(500, 5e-6)}, git_commit="d000000")
    dirty["machine_info"]["perfgate"]["fingerprint"]["git_dirty"] = True
    _write(out / "run_dirty.json", dirty)


def _other_inputs(out: Path) -> None:
    (out / "host_counts_bad.json").write_text('{"schema": 1, "shapes": {}}\n', encoding="utf-8")
    (out / "isa_bad.json").write_text('{"schema": 1, "target": "gfx950"}\n', encoding="utf-8")
    shutil.copy(REPO / "perf_baselines/isa/sm90.json", out / "isa_sm90.json")
    (out / "no_kernel.py").write_text('"""A submission without custom_kernel."""\n\nX = 1\n')
    (out / "not_python.txt").write_text("custom_kernel = None\n", encoding="utf-8")


def write_inputs(inputs: Path) -> None:
    if inputs.exists():
        shutil.rmtree(inputs)
    inputs.mkdir(parents=True)
    for make in (_compare_inputs, _pooled_inputs, _history_inputs):
        make(inputs)
    _other_inputs(inputs)


# -- golden outputs --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite existing golden files")
    parser.add_argument("--inputs", action="store_true", help="also rewrite the input fixtures")
    parser.add_argument("-k", dest="only", metavar="TEXT", help="only cases whose id holds TEXT")
    args = parser.parse_args(argv)
    import os

    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton loads, as tests/conftest.py
    replay = _replay_module()
    if args.inputs:
        if replay.INPUTS.exists() and not args.force:
            parser.error(f"{replay.INPUTS} exists; pass --force to rewrite the inputs")
        write_inputs(replay.INPUTS)
    cases = [c for c in replay.CASES if args.only is None or args.only in c.id]
    existing = [c.id for c in cases if (replay.GOLDEN / c.id).exists()]
    if existing and not args.force:
        parser.error(f"golden files exist for {len(existing)} case(s) ({existing[0]}, ...); "
                     "pass --force to re-record them")  # fmt: skip
    import tempfile
    import time

    for case in cases:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="replay-") as tmp:
            outcome = replay.run_case(case, Path(tmp))
        target = replay.GOLDEN / case.id
        if target.exists():
            shutil.rmtree(target)
        replay.write_outcome(outcome, target)
        codes = ",".join(str(s["rc"]) for s in outcome["steps"])
        print(f"{case.id}: exit {codes}, {len(outcome['files'])} file(s), "
              f"{time.perf_counter() - start:.1f} s")  # fmt: skip
    _write(replay.GOLDEN / "ENV.json", replay.environment())
    return 0


if __name__ == "__main__":
    sys.exit(main())
