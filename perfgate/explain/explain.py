"""One explanation: the benchmarks chosen, both revisions' facts gathered, compared and ranked.

:func:`explain` is what ``perfgate explain`` and the gates' "Why" sections call. It never
measures anything itself: the facts come from each revision's children
(:mod:`perfgate.explain.revision`), the comparison from :mod:`perfgate.explain.ranking`.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.explain import ranking, revision, source_facts
from perfgate.gate import paths
from perfgate.measure.ab import build_cache
from perfgate.refusal import Refusal
from perfgate.revisions import AbError, build, git, side_env, worktree

NOTHING = "same code and config: look at the machine or the inputs"
OTHER_TARGET = "gfx950"  # compiled for every benchmark on any CPU: the kernel's home target


class ExplainError(Refusal):
    """Input ``explain`` cannot use (an unknown revision, a -k matching no benchmark)."""


@dataclass(frozen=True)
class Benchmark:
    name: str  # the case id, m256-n3072-k1536
    shape: tuple[int, int, int]
    asked: str  # the benchmark as named (a reducer case names its GEMM shape's split)

    @property
    def key(self) -> str:
        return ",".join(map(str, self.shape))


@dataclass
class BenchmarkExplanation:
    benchmark: Benchmark
    sides: dict[str, dict[str, Any]]  # label -> {"targets", "host", "device"}
    ranked: list[ranking.Difference]
    notes: list[str]  # facts not compared, and why

    @property
    def nothing_changed(self) -> bool:
        return not [d for d in self.ranked if d.part != "device"]


@dataclass
class Explanation:
    base: str
    head: str | None  # None: the working tree
    targets: tuple[str, ...]
    own_target: str
    source: list[dict[str, str]]
    benchmarks: list[BenchmarkExplanation]
    device_measured: bool
    wall_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def head_label(self) -> str:
        return self.head[:12] if self.head else "the working tree"


def select(keyword: str | None) -> list[Benchmark]:
    """The GEMM benchmarks whose name (case id or pytest node id) holds ``keyword`` (None: the
    leaderboard's). A reducer benchmark (``s14-m16-n2112``) is explained by the GEMM shapes of
    the leaderboard whose split-K makes it (same M and N)."""
    from perfgate import catalog

    found: dict[str, Benchmark] = {}
    gemm_groups = [g for g in catalog.GROUPS.values() if g.kind == "gemm"]
    if keyword is None:
        return [Benchmark(s.id, tuple(s), s.id) for s in catalog.LEADERBOARD]
    for group in gemm_groups:
        for item in group.items:
            if keyword in item.id or keyword in group.nodeid(item):
                found.setdefault(item.id, Benchmark(item.id, tuple(item), item.id))
    reducer = catalog.GROUPS["reducer"]
    for case in reducer.items:
        if keyword in case.id or keyword in reducer.nodeid(case):
            for s in catalog.LEADERBOARD:
                if (s.m, s.n) == (case.m, case.n):
                    found.setdefault(s.id, Benchmark(s.id, tuple(s), case.id))
    if not found:
        raise ExplainError(f"-k {keyword!r} matches no benchmark of {', '.join(catalog.GROUPS)}")
    return list(found.values())


def default_target() -> str:
    """The benchmark's target: this GPU's registered target; without a GPU, sm90 (the card the
    timing baselines and the lent GPU are)."""
    import torch

    from kernels.device import device_info
    from kernels.targets import target_for_arch

    if torch.cuda.is_available():
        target = target_for_arch(device_info().arch)
        if target is not None and target.statically_compilable:
            return target.name
    return "sm90"


def _resolve(rev: str, repo: Path) -> str:
    if not rev or rev.startswith("-"):
        raise ExplainError(f"--base/--head must name a git revision, got {rev!r}")
    try:
        return git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=repo)
    except AbError:
        raise ExplainError(f"{rev!r} names no commit of {repo} (fetch it first?)") from None


def explain(
    base: str,
    head: str | None,
    benchmarks: list[Benchmark],
    *,
    own_target: str,
    repo: Path | None = None,
    device: bool = False,
    host: bool = True,
    budget_s: float | None = None,
    rounds: int = 30,
) -> Explanation:
    """``head`` (None: the working tree) against ``base`` for ``benchmarks``."""
    repo = Path(repo or paths.REPO)
    start = time.monotonic()
    base_sha = _resolve(base, repo)
    head_sha = _resolve(head, repo) if head is not None else None
    targets = tuple(dict.fromkeys((own_target, OTHER_TARGET)))
    deadline = revision.Deadline(budget_s)
    shapes = [b.shape for b in benchmarks]
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perfgate-explain-")))
        sides = [
            revision.Side(
                "base", base_sha, stack.enter_context(worktree(base_sha, tmp, "base", repo))
            )
        ]
        head_root = stack.enter_context(worktree(head_sha, tmp, "head", repo)) if head_sha else repo
        sides.append(revision.Side("head", head_sha, head_root))
        source = source_facts.source_facts(repo, base_sha, head_sha)
        facts = revision.static_and_host(sides, shapes, targets, deadline=deadline, host=host)
        measured = None
        if device:
            measured = _device(sides, shapes, deadline, rounds)
    out = []
    for b in benchmarks:
        per_side = {
            label: {
                "targets": facts[label]["static"].get(b.key, {"error": "no answer"}),
                "host": facts[label].get("host", {}).get(b.key) if host else None,
                "device": measured[label].get(b.key) if measured else None,
            }
            for label in ("base", "head")
        }
        out.append(compare(b, per_side, targets, own_target, source))
    return Explanation(
        base_sha, head_sha, targets, own_target, source, out, device, time.monotonic() - start
    )


def _device(sides, shapes, deadline, rounds) -> dict[str, dict[str, Any]]:
    """Both sides' device splits, each side's reducer built first (as ``ab`` builds them)."""
    envs = {}
    for side in sides:
        cache = build_cache(side.root) if side.commit else None
        build(side.root, cache, side.label)
        envs[side.label] = side_env(cache)
    passes = revision.device_facts(sides, shapes, deadline=deadline, rounds=rounds, envs=envs)
    return {label: merge_passes(runs) for label, runs in passes.items()}


def merge_passes(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's device splits of several children pooled per shape: each kernel's samples and
    the call's, medians again; a pass that failed is left out (all failed: its error)."""
    merged: dict[str, Any] = {}
    for key in dict.fromkeys(k for run in runs for k in run):
        usable = [run[key] for run in runs if ranking._usable(run.get(key))]
        if not usable:
            merged[key] = next((run[key] for run in runs if key in run), {"error": "no pass"})
            continue
        names = [[k["name"] for k in u["kernels"]] for u in usable]
        if any(n != names[0] for n in names):
            merged[key] = {"error": f"the passes launched different kernels: {names}"}
            continue
        kernels = []
        for i, k in enumerate(usable[0]["kernels"]):
            samples = [s for u in usable for s in u["kernels"][i]["samples_us"]]
            kernels.append({**k, "samples_us": samples, "median_us": statistics.median(samples)})
        calls = [s for u in usable for s in u["call_samples_us"]]
        merged[key] = {
            "kernels": kernels,
            "call_samples_us": calls,
            "call_median_us": statistics.median(calls),
            "rounds": sum(u["rounds"] for u in usable),
        }
    return merged


def compare(
    b: Benchmark,
    per_side: dict[str, dict[str, Any]],
    targets: tuple[str, ...],
    own_target: str,
    source: list[dict[str, str]],
) -> BenchmarkExplanation:
    """The ranked differences of one benchmark's two sides."""
    base, head = per_side["base"], per_side["head"]
    diffs: list[ranking.Difference] = []
    notes: list[str] = []

    def usable(what: str, x: Any, y: Any) -> bool:
        for label, fact in (("base", x), ("head", y)):
            if not ranking._usable(fact):
                notes.append(f"{what}: not compared ({label}: {ranking.why_not(fact)})")
                return False
        return True

    for t in targets:
        bt = base["targets"].get(t) if ranking._usable(base["targets"]) else None
        ht = head["targets"].get(t) if ranking._usable(head["targets"]) else None
        if bt is None or ht is None:
            usable(f"{t} launch and static compile", base["targets"], head["targets"])
            continue
        own = t == own_target
        if usable(f"{t} launch", bt.get("launch"), ht.get("launch")):
            diffs += ranking.launch_differences(bt["launch"], ht["launch"], t, own)
        if usable(f"{t} static compile", bt.get("static"), ht.get("static")):
            diffs += ranking.static_differences(bt["static"], ht["static"], t, own, source)
    if (base["host"] is not None or head["host"] is not None) and usable(
        "host path", base["host"], head["host"]
    ):
        diffs += ranking.host_differences(base["host"], head["host"])
    if (base["device"] is not None or head["device"] is not None) and usable(
        "device split", base["device"], head["device"]
    ):
        diffs += ranking.device_differences(base["device"], head["device"])
    return BenchmarkExplanation(b, per_side, ranking.rank(diffs), notes)
