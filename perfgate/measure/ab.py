"""Same-job A/B: base and head measured interleaved on one GPU, in worker processes of their own.

Each side's worker (:mod:`perfgate.measure.worker`) imports that side's ``kernels`` while the
timer, the flush, the inputs and the output checks are this checkout's; the two take turns in ABBA
blocks of rounds (:mod:`perfgate.measure.interleave`), with adaptive looks
(:mod:`perfgate.measure.adaptive`).
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from perfgate.gate import paths
from perfgate.revisions import AbError, build, side_env, worktree


# -- measuring ----------------------------------------------------------------------------------
def measure_ab(sides: dict[str, Any], cases: list[dict], settings, rounds: int):
    """Adaptive interleaved rounds of both sides; (decisions, samples by stream key)."""
    from perfgate.gate.stats import compare_samples
    from perfgate.measure import adaptive, interleave
    from perfgate.measure.worker import PLAIN

    base, head = sides["base"], sides["head"]
    samples: dict[tuple, list[float]] = {}

    def pair(name: str) -> list[interleave.Stream]:
        return [interleave.Stream(base, name, PLAIN), interleave.Stream(head, name, PLAIN)]

    def extend(pending: list[str], total: int) -> None:
        for name in pending:
            streams = pair(name)
            have = len(samples.get(streams[0].key, []))
            interleave.measure(streams, total - have, samples)

    def judge(name: str):
        a, b = (samples[s.key] for s in pair(name))
        return compare_samples(a, b, settings, ab=True, looks=settings.looks)

    totals = adaptive.schedule(rounds, settings.looks)
    decisions = {}
    for case in cases:  # one case at a time on each side, every look of it before the next
        for label, side in sides.items():
            try:
                side.ask({"op": "prepare", "cases": [case], "levels": []})
            except interleave.WorkerError as exc:
                # a wrong or broken head is the pull request's fault: that fails the gate
                raise AbError(str(exc), 1 if label == "head" else 2) from None
        decisions.update(adaptive.decide([case["name"]], totals, extend, judge))
    return decisions, samples


def run(base_sha: str, head_sha: str | None, selected: list[dict], gate):
    """Both sides set up (worktrees, builds, workers), measured, and torn down whatever
    happens; (decisions, samples, each side's prepare info)."""
    from perfgate.measure import interleave

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perfgate-ab-")))
        base_root = stack.enter_context(worktree(base_sha, tmp, "base"))
        head_root = stack.enter_context(worktree(head_sha, tmp, "head")) if head_sha else paths.REPO
        roots = {"base": (base_root, tmp / "cache-base"), "head": (head_root, None)}
        if head_sha:
            roots["head"] = (head_root, tmp / "cache-head")
        for label, (root, cache) in roots.items():
            build(root, cache, label)
        sides = {}
        for label, (root, cache) in roots.items():
            env = {k: v for k, v in side_env(cache).items() if k == "MXFP4_CACHE_DIR"}
            side = interleave.SideProcess(label, root, env)
            stack.callback(side.close)
            sides[label] = side
        try:
            decisions, samples = measure_ab(sides, selected, gate.stats, gate.rounds["device"])
        except interleave.WorkerError as exc:
            raise AbError(str(exc), 2) from None
        infos = {label: {"reducer_backend": side.reducer_backend} for label, side in sides.items()}
    return decisions, samples, infos


# -- submission files as the sides (ab --base-submission A.py --head-submission B.py) ----------
def run_submissions(base_file: Path, head_file: Path, selected: list[dict], gate):
    """:func:`run` for two submission files: one worker each (``--submission FILE``), both in
    this checkout; (decisions, samples, each side's prepare info and what its worker timed)."""
    from perfgate.measure import interleave
    from perfgate.submission.sides import SubmissionSide

    with contextlib.ExitStack() as stack:
        sides = {}
        for label, path in (("base", base_file), ("head", head_file)):
            side = SubmissionSide(label, path)
            stack.callback(side.close)
            sides[label] = side
        try:
            described = {label: side.describe() for label, side in sides.items()}
            decisions, samples = measure_ab(sides, selected, gate.stats, gate.rounds["device"])
        except interleave.WorkerError as exc:
            raise AbError(str(exc), 2) from None
        infos = {
            label: {"reducer_backend": side.reducer_backend, "timed": described[label]}
            for label, side in sides.items()
        }
    return decisions, samples, infos
