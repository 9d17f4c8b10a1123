"""The parent's side of a revision's facts: its tree (a git worktree, or this working tree), the
children that compute its facts (:mod:`perfgate.explain.child`), each under the time left.

One child per part computes the facts of every revision, each in a process of its own that it
forks (the child's docstring says why); the static and the host child run at once, sharing the
usable cores among their forks. A revision whose tree holds no ``kernels`` package is answered
here, without a child. Children are started through :mod:`perfgate.spawn`, so an interrupted
command takes them with it and a child past the deadline is stopped; what it could not finish is
then ``{"error": "not finished within ..."}``, never a hang. The device split (a GPU) runs after
them, one child per pass, the two sides' alternated base, head, head, base (ABBA) so that drift
cancels.
"""

from __future__ import annotations

import contextlib
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
from perfgate.measure.worker import has_kernels

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


def run_children(
    roots: Sequence[Path],
    part: str,
    shapes: Sequence[Sequence[int]],
    targets: Sequence[str] = (),
    *,
    deadline: Deadline,
    rounds: int = 30,
    env: dict[str, str] | None = None,
    jobs: int = 1,
) -> dict[Path, dict[str, Any]]:
    """Each root's facts, by shape key, from one child; a root that failed has every shape's
    entry ``{"error": ...}``."""

    def failed(why: str) -> dict[str, Any]:
        return {_key(s): {"error": why} for s in shapes}

    left = deadline.left()
    if left is not None and left < 1.0:
        why = f"not started: the time budget of {deadline.budget_s:g} s was spent"
        return {root: failed(why) for root in roots}
    out = {
        root: failed(f"{root} has no kernels package") for root in roots if not has_kernels(root)
    }
    todo = [root for root in roots if root not in out]
    if not todo:
        return out
    cmd = [sys.executable, "-m", "perfgate.explain.child"]
    for root in todo:
        cmd += ["--kernels-root", str(root)]
    cmd += ["--part", part, "--rounds", str(rounds), "--jobs", str(jobs)]
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
        child_env.update(dict.fromkeys(HIDE_GPUS, ""), TRITON_INTERPRET="1")
    late = None
    try:
        proc = spawn.run(
            cmd, cwd=PERFGATE_ROOT, env=child_env, capture_output=True, text=True, timeout=left
        )
        stdout, stderr = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:  # the revisions it finished still count
        late = f"not finished within the time budget of {deadline.budget_s:g} s"
        stdout, stderr = _text(exc.stdout), _text(exc.stderr)
    answers = {}
    for line in stdout.splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            answer = json.loads(line)
            answers[answer["root"]] = answer
    for root in todo:
        answer = answers.get(str(root))
        if answer is None:
            tail = " ".join(stderr.split())[-300:]
            why = (
                late or f"the {part} child {spawn.describe(proc.returncode)}: {tail or 'no output'}"
            )
            out[root] = failed(why)
        elif not answer.get("ok"):
            out[root] = failed(f"the {part} child: {answer.get('error')}")
        else:
            out[root] = answer["facts"]
    return out


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def static_and_host(
    sides: Sequence[Side],
    shapes: Sequence[Sequence[int]],
    targets: Sequence[str],
    *,
    deadline: Deadline,
    host: bool = True,
    jobs: int | None = None,
) -> dict[str, dict[str, Any]]:
    """``{side label: {"static": facts, "host": facts}}``, both parts' children run at once,
    ``jobs`` (default: the usable cores) revisions computed at once between them."""
    parts = ["static", "host"] if host else ["static"]
    jobs = jobs or cores.usable()
    roots = list(dict.fromkeys(side.root for side in sides))
    with ThreadPoolExecutor(max_workers=len(parts)) as pool:
        futures = {
            part: pool.submit(
                run_children,
                roots,
                part,
                shapes,
                targets,
                deadline=deadline,
                jobs=max(1, jobs // len(parts)),
            )
            for part in parts
        }
    out: dict[str, dict[str, Any]] = {side.label: {} for side in sides}
    for part, future in futures.items():
        by_root = future.result()
        for side in sides:
            out[side.label][part] = by_root[side.root]
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
        facts = run_children(
            [side.root], "device", shapes, deadline=deadline, rounds=rounds, env=env
        )
        out[label].append(facts[side.root])
    return out
