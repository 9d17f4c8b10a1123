"""The parent's side of a revision's facts: its tree (a git worktree, or this working tree), the
children that compute its facts (:mod:`perfgate.explain.child`), each under the time left.

Children run at once up to ``jobs`` (static and host of both sides: four on a runner's many
cores, two on a 2-core box), started through :mod:`perfgate.spawn`, so an interrupted command
takes them with it and a child past the deadline is stopped; what it could not finish is then
``{"error": "not finished within ..."}``, never a hang. The device split (a GPU) runs after them,
the two sides' children alternated base, head, head, base (ABBA) so that drift cancels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import perfgate
from perfgate import cores, spawn

# The checkout whose perfgate runs this command: the children's working directory, so that
# ``python -m perfgate.explain.child`` imports this very perfgate (the package docstring).
PERFGATE_ROOT = Path(perfgate.__file__).resolve().parents[1]

HIDE_GPUS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


@dataclass(frozen=True)
class Side:
    label: str  # "base" or "head"
    commit: str | None  # None: this working tree as it is
    root: Path  # the tree whose kernels/ the children import


class Deadline:
    """When the explanation must be done (``budget_s`` from now; None: no limit)."""

    def __init__(self, budget_s: float | None, clock=time.monotonic) -> None:
        self.clock = clock
        self.budget_s = budget_s
        self.end = None if budget_s is None else clock() + budget_s

    def left(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - self.clock())


def _key(shape: Sequence[int]) -> str:
    return ",".join(map(str, shape))


def run_child(
    root: Path,
    part: str,
    shapes: Sequence[Sequence[int]],
    targets: Sequence[str] = (),
    *,
    deadline: Deadline,
    rounds: int = 30,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One child's facts, by shape key; on failure every shape's entry is ``{"error": ...}``."""
    cmd = [sys.executable, "-m", "perfgate.explain.child", "--kernels-root", str(root)]
    cmd += ["--part", part, "--rounds", str(rounds)]
    for s in shapes:
        cmd += ["--shape", _key(s)]
    for t in targets:
        cmd += ["--target", t]
    child_env = dict(os.environ if env is None else env)
    if part == "static":
        child_env.pop("TRITON_INTERPRET", None)  # an interpreted function cannot be compiled
    if part == "host":
        # counted on the CPU, launches counted and not run, on a GPU box too: no device, no
        # reducer build, the same counts on every machine (perfgate host's interpreter counts)
        child_env.update(dict.fromkeys(HIDE_GPUS, ""))
    left = deadline.left()

    def failed(why: str) -> dict[str, Any]:
        return {_key(s): {"error": why} for s in shapes}

    if left is not None and left < 1.0:
        return failed(f"not started: the time budget of {deadline.budget_s:g} s was spent")
    try:
        proc = spawn.run(
            cmd, cwd=PERFGATE_ROOT, env=child_env, capture_output=True, text=True, timeout=left
        )
    except subprocess.TimeoutExpired:
        return failed(f"not finished within the time budget of {deadline.budget_s:g} s")
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = " ".join((proc.stderr or "").split())[-300:]
        return failed(f"the {part} child {spawn.describe(proc.returncode)}: {tail or 'no output'}")
    if not answer.get("ok"):
        return failed(f"the {part} child: {answer.get('error')}")
    return answer["facts"]


def static_and_host(
    sides: Sequence[Side],
    shapes: Sequence[Sequence[int]],
    targets: Sequence[str],
    *,
    deadline: Deadline,
    host: bool = True,
    jobs: int | None = None,
) -> dict[str, dict[str, Any]]:
    """``{side label: {"static": facts, "host": facts}}``, the children run at once."""
    work = [(side, "static") for side in sides]
    if host:
        work += [(side, "host") for side in sides]
    jobs = jobs or max(1, min(len(work), cores.usable()))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            (side.label, part): pool.submit(
                run_child, side.root, part, shapes, targets, deadline=deadline
            )
            for side, part in work
        }
    out: dict[str, dict[str, Any]] = {side.label: {} for side in sides}
    for (label, part), future in futures.items():
        out[label][part] = future.result()
    return out


def device_facts(
    sides: Sequence[Side],
    shapes: Sequence[Sequence[int]],
    *,
    deadline: Deadline,
    rounds: int = 30,
    envs: dict[str, dict[str, str]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Each side's device splits, its children alternated ABBA: ``{label: [facts, facts]}``."""
    by_label = {side.label: side for side in sides}
    order = ["base", "head", "head", "base"]
    out: dict[str, list[dict[str, Any]]] = {label: [] for label in by_label}
    for label in order:
        side = by_label[label]
        env = (envs or {}).get(label)
        out[label].append(
            run_child(side.root, "device", shapes, deadline=deadline, rounds=rounds, env=env)
        )
    return out
