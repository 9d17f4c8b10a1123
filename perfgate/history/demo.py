"""Synthetic run histories made from a real results file: the runs ``python -m tools.history_demo``
writes for trying ``perfgate history``, and the histories the store's tests are built on.

Run ``i`` is the source file at a fake commit (a 40-hex id, one hour after run ``i - 1``), each
benchmark's samples scaled by the run's level and 0.5% run-to-run noise, and reshuffled.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from perfgate import atomic
from perfgate.checkout import REPO
from perfgate.gate import baseline as bl

DEFAULT_SOURCE = REPO / "perf_baselines/nvidia-h200/device.json"
NOISE = 0.005
START = datetime(2026, 11, 1, tzinfo=timezone.utc)


def fake_commit(i: int) -> str:
    return hashlib.sha1(f"demo commit {i}".encode()).hexdigest()


def make_run(
    source: dict[str, Any],
    i: int,
    *,
    level: dict[str, float],
    rng: np.random.Generator,
    torch: str | None = None,
    max_rounds: int | None = None,
) -> dict[str, Any]:
    """Run ``i`` of the history: ``source`` at fake commit ``i``, each benchmark's samples scaled
    by ``level[fullname]`` (default 1) and by this run's noise."""
    data = copy.deepcopy(source)
    commit = fake_commit(i)
    when = START + timedelta(hours=i)
    fp = bl.fingerprint(data)
    fp["git_commit"] = commit
    fp["git_dirty"] = False
    if torch is not None:
        fp["torch"] = torch
    data["commit_info"] = {"id": commit, "time": when.isoformat(), "branch": "main", "dirty": False}
    data["datetime"] = (when + timedelta(minutes=20)).isoformat()
    for b in data["benchmarks"]:
        samples = np.asarray(b["stats"]["data"], dtype=float)
        if max_rounds is not None:
            samples = samples[:max_rounds]
        factor = level.get(b["fullname"], 1.0) * float(np.exp(rng.normal(0.0, NOISE)))
        values = [float(x) for x in rng.permutation(samples) * factor]
        b["stats"].update(bl.stats_block(values))
        b.setdefault("extra_info", {}).pop(bl.RUNS_KEY, None)
        b["extra_info"].pop(bl.PROCESSES_KEY, None)
    return data


def write_history(
    out: Path,
    source: Path = DEFAULT_SOURCE,
    *,
    runs: int = 24,
    step_at: int | None = 14,
    step: float = 0.05,
    keyword: str = "m16-n2112-k7168",
    new_torch_at: int | None = 6,
    seed: int = 0,
    max_rounds: int | None = None,
) -> list[Path]:
    """Write the history's files into ``out``; their paths, oldest first."""
    base = bl.load(source)
    rng = np.random.default_rng(seed)
    names = [b["fullname"] for b in base["benchmarks"]]
    paths = []
    for i in range(runs):
        slow = step_at is not None and i >= step_at
        level = {n: 1.0 + step for n in names if slow and keyword in n}
        torch = "2.99.0+demo" if new_torch_at is not None and i >= new_torch_at else None
        run = make_run(base, i, level=level, rng=rng, torch=torch, max_rounds=max_rounds)
        path = out / f"run-{i:02d}.json"
        atomic.write_json(path, run)
        paths.append(path)
    return paths
