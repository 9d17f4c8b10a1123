"""Same-job A/B: base and head measured on one GPU in worker processes of their own, several a
side, the worker process being the unit the verdict replicates over (docs/ab-process-level.md).

Each worker (:mod:`perfgate.measure.worker`) imports its side's ``kernels`` while the timer, the
flush, the inputs and the output checks are this checkout's. The verdict is
:mod:`perfgate.gate.process_ab`'s, look by look (:func:`perfgate.gate.process_ab.decide`):

- **a look** starts its new workers in one wave (``processes`` a side at the first look, as many
  again at each later one, so the total doubles), which warm up side by side (imports, GPU
  context, Triton runtime); it prepares every pending benchmark in each of them one worker at a
  time (15 prepares at once took 3-7x longer on the H200), measures ``WARMUP_ROUNDS`` discarded
  and then ``rounds`` rounds of every worker, alternated A1 B1 A2 B2 ... in ABBA blocks
  (:func:`perfgate.measure.interleave.alternate`), and closes its workers together. A worker
  is measured in one look only: each look's workers are balanced between the sides and
  interleaved among themselves, so drift between looks cancels.
- **the next wave starts ahead** (:class:`WorkerPool`): while a look prepares, the next look's
  workers warm up; they are waited for before the look times a round, and closed unused when
  nothing is left undecided.
- only the benchmarks still undecided go on to the next look.

:func:`measure_look` is shared with ``lab experiment`` (which adds injected variants on one
side); :func:`measure_ab` is ``perfgate ab``'s loop; :func:`run` sets up and tears down both
sides (worktrees, builds, workers).
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.gate import paths
from perfgate.gate.settings import SettingsError, key
from perfgate.measure import interleave
from perfgate.measure.submission_side import SubmissionSide
from perfgate.revisions import AbError, build, side_env, worktree

# Discarded rounds of every worker after a benchmark is prepared (the pytest harness's warm-up
# pass is min_samples = 10 rounds).
WARMUP_ROUNDS = 10


@dataclass(frozen=True)
class SideSpec:
    """What one side's workers run: their tree and environment, the variants each measures
    (``plain`` and, in the experiment, injected levels) and the levels to prepare."""

    label: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    variants: tuple[str, ...] = ("plain",)
    levels: tuple[float, ...] = ()
    submission: Path | None = None  # a submission file the workers time instead of root's kernels


class PrepareError(RuntimeError):
    """A benchmark that a side's worker could not prepare (a wrong output, a broken build)."""

    def __init__(self, side: str, message: str) -> None:
        super().__init__(message)
        self.side = side


# label -> case -> variant -> one list of round times per worker process, in look order
Store = dict[str, dict[str, dict[str, list[list[float]]]]]


def measure_look(
    specs: Sequence[SideSpec],
    new: int,
    cases: Sequence[dict],
    rounds: int,
    store: Store,
    *,
    start: Callable[[SideSpec, int], Any],
    first: int = 0,
    cycles: dict[str, dict[str, int]] | None = None,
    on_prepared: Callable[[SideSpec, Any, str, dict], None] | None = None,
    timings: dict[str, float] | None = None,
) -> None:
    """One look: ``new`` fresh workers a side (``start(spec, index)``, index from ``first``),
    each benchmark of ``cases`` prepared in every worker in turn, then its warm-up and
    ``rounds`` interleaved rounds, appended to ``store`` as one process per worker; the
    workers closed together whatever happens. ``cycles`` (case -> variant -> cycles) is passed
    to the prepares of a side with levels; ``on_prepared(spec, worker, case, answer)`` sees
    every prepare's answer. ``timings`` receives the seconds spent starting, preparing,
    measuring and closing."""
    if new < 1 or rounds < 1:
        raise ValueError(f"need new >= 1 workers and rounds >= 1, got {new} and {rounds}")
    clock = _Clock(timings)
    started: list[Any] = []
    take = getattr(start, "take", start)  # a WorkerPool, or a plain start(spec, index)
    try:
        by_side = []
        for spec in specs:
            workers = []
            for i in range(first, first + new):
                worker = take(spec, i)
                started.append(worker)
                workers.append(worker)
            by_side.append(workers)
        _call(start, "ahead")  # the next look's wave warms up beside this one, then as it prepares
        clock.lap("start_s")
        for worker in started:
            _wait_ready(worker)
        clock.lap("ready_s")
        order = interleave.alternate(by_side)
        spec_of = {id(w): spec for spec, ws in zip(specs, by_side, strict=True) for w in ws}
        for case in cases:
            name = case["name"]
            for worker in order:
                spec = spec_of[id(worker)]
                request: dict[str, Any] = {"op": "prepare", "cases": [case], "levels": []}
                if spec.levels:
                    request["levels"] = list(spec.levels)
                    known = (cycles or {}).get(name)
                    if known:
                        request["cycles"] = dict(known)
                try:
                    answer = worker.ask(request)
                except interleave.WorkerError as exc:
                    raise PrepareError(spec.label, str(exc)) from None
                if on_prepared is not None:
                    on_prepared(spec, worker, name, answer)
            clock.lap("prepare_s")
            _call(start, "settle")  # no worker warms up while rounds are timed
            clock.lap("settle_s")
            streams = [
                interleave.Stream(w, name, v) for w in order for v in spec_of[id(w)].variants
            ]
            interleave.measure(streams, WARMUP_ROUNDS, {})
            got: dict[tuple, list[float]] = {}
            interleave.measure(streams, rounds, got)
            for stream in streams:
                spec = spec_of[id(stream.side)]
                by_case = store.setdefault(spec.label, {}).setdefault(name, {})
                by_case.setdefault(stream.variant, []).append(got[stream.key])
            clock.lap("rounds_s")
    finally:
        retire = getattr(start, "retire", None)
        if retire is not None:
            retire(started)  # asked to quit now, their exits waited for before the next rounds
        else:
            interleave.close_all(started)
        clock.lap("close_s")


def _wait_ready(worker: Any) -> None:
    wait = getattr(worker, "wait_ready", None)
    if wait is not None:
        wait()


def _call(obj: Any, name: str) -> None:
    method = getattr(obj, name, None)
    if method is not None:
        method()


# The most workers a side started ahead of their look: each holds a GPU context and 1-2 GB of
# host memory, and the waves double (3, 3, 6, 12 new a side by default): at most 36 processes
# are alive at once (the third look's 12 and the fourth's 24).
AHEAD_MAX = 12


class WorkerPool:
    """The workers of one verdict, as :func:`measure_look` takes them (``start=pool``).

    ``start(spec, index)`` makes a worker; a worker starts warming up (imports, GPU context) at
    once. :meth:`plan` names the next look's wave; :meth:`ahead` (called by measure_look as
    soon as this look's workers are started) starts it, so that its start-up overlaps this
    look's own and its prepares, which time nothing; :meth:`settle` waits for it before any
    round is timed. The wave is started whether or not a benchmark stays undecided: workers
    never taken are closed by :meth:`close`. A wave larger than :data:`AHEAD_MAX` a side starts
    at its own look. When a look ends its workers are retired (:meth:`retire`): asked to quit
    at once, their exits (a second or two of teardown) waited for by the next :meth:`settle`, while the
    next look prepares."""

    def __init__(self, start: Callable[[SideSpec, int], Any], specs: Sequence[SideSpec]) -> None:
        self._start, self._specs = start, list(specs)
        self._next: tuple[int, int] | None = None
        self._ahead: dict[tuple[str, int], Any] = {}
        self._closing: list[Any] = []

    def plan(self, first: int, new: int) -> None:
        self._next = (first, new) if 0 < new <= AHEAD_MAX else None

    def take(self, spec: SideSpec, index: int) -> Any:
        worker = self._ahead.pop((spec.label, index), None)
        return worker if worker is not None else self._start(spec, index)

    def ahead(self) -> None:
        if self._next is None:
            return
        first, new = self._next
        self._next = None
        for spec in self._specs:
            for i in range(first, first + new):
                self._ahead[(spec.label, i)] = self._start(spec, i)

    def retire(self, workers: Sequence[Any]) -> None:
        for worker in workers:
            _call(worker, "begin_close")
        self._closing.extend(workers)

    def settle(self) -> None:
        for worker in self._ahead.values():
            _wait_ready(worker)
        self._reap()

    def close(self) -> None:
        interleave.close_all(list(self._ahead.values()))
        self._ahead.clear()
        self._reap()

    def _reap(self) -> None:
        closing, self._closing = self._closing, []
        interleave.close_all(closing)


def next_wave(design: Any, processes: int) -> int:
    """Workers a side that the look after the one reaching ``processes`` starts (0: none)."""
    plan = [p for p, _ in design.schedule()]
    later = [p for p in plan if p > processes]
    return later[0] - processes if later else 0


class _Clock:
    """Seconds spent per named step, added into ``into`` (when given)."""

    def __init__(self, into: dict[str, float] | None) -> None:
        self.into, self.last = into, time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        if self.into is not None:
            self.into[name] = self.into.get(name, 0.0) + now - self.last
        self.last = now


def processes_of(store: Store, label: str, case: str, variant: str = "plain") -> list[list[float]]:
    return store.get(label, {}).get(case, {}).get(variant, [])


# -- perfgate ab --------------------------------------------------------------------------------
def measure_ab(
    specs: dict[str, SideSpec],
    cases: list[dict],
    design,
    start: Callable[[SideSpec, int], Any],
    *,
    on_prepared: Callable | None = None,
    timings: list | None = None,
):
    """The adaptive looks of ``perfgate ab``: (decisions by benchmark, the store). A benchmark
    that the head cannot prepare is the pull request's fault (AbError, exit 1); the base's is
    unusable input (exit 2)."""
    from perfgate.gate import process_ab

    by_name = {c["name"]: c for c in cases}
    store: Store = {}
    measured = [0]  # workers a side so far
    sides = [specs["base"], specs["head"]]
    pool = start if isinstance(start, WorkerPool) else WorkerPool(start, sides)

    def extend(pending: list[str], processes: int, rounds: int) -> None:
        spent: dict[str, float] = {}
        pool.plan(processes, next_wave(design, processes))
        try:
            measure_look(
                sides,
                processes - measured[0],
                [by_name[n] for n in pending],
                rounds,
                store,
                start=pool,
                first=measured[0],
                on_prepared=on_prepared,
                timings=spent,
            )
        except PrepareError as exc:
            raise AbError(str(exc), 1 if exc.side == "head" else 2) from None
        measured[0] = processes
        if timings is not None:
            timings.append({"processes": processes, "pending": len(pending), **spent})

    def collect(name: str):
        return processes_of(store, "base", name), processes_of(store, "head", name)

    try:
        decisions = process_ab.decide(list(by_name), design, extend, collect)
    finally:
        pool.close()
    return decisions, store


def run(base_sha: str, head_sha: str | None, selected: list[dict], gate, mode: str = "device"):
    """Both sides set up (worktrees, builds), measured in fresh workers look by look, and torn
    down whatever happens; (decisions, store, each side's info, the looks' timings)."""
    from perfgate.gate import process_ab

    design = process_ab.design_for(gate, mode)
    infos: dict[str, dict] = {"base": {}, "head": {}}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perfgate-ab-")))
        base_root = stack.enter_context(worktree(base_sha, tmp, "base"))
        head_root = stack.enter_context(worktree(head_sha, tmp, "head")) if head_sha else paths.REPO
        roots = {"base": (base_root, build_cache(base_root)), "head": (head_root, None)}
        if head_sha:
            roots["head"] = (head_root, build_cache(head_root))
        specs = {}
        for label, (root, cache) in roots.items():
            env = {k: v for k, v in side_env(cache).items() if k == "MXFP4_CACHE_DIR"}
            specs[label] = SideSpec(label, root, env)

        def start(spec: SideSpec, index: int):
            return interleave.SideProcess(f"{spec.label}{index + 1}", spec.root, spec.env,
                                          mode=mode)  # fmt: skip

        # the first look's workers warm up while the reducers build (a worker loads its side's
        # reducer at its first split-K call, in a prepare, after the build)
        pool = WorkerPool(start, [specs["base"], specs["head"]])
        stack.callback(pool.close)
        pool.plan(0, design.processes[0])
        pool.ahead()
        build_both(roots)
        return _measure_sides(specs, selected, design, pool, infos)


# -- submission files as the sides (ab --base-submission A.py --head-submission B.py) ----------
def run_submissions(
    base_file: Path, head_file: Path, selected: list[dict], gate, mode: str = "device"
):
    """:func:`run` for two submission files: each side's workers (``--submission FILE``) run in
    this checkout; (decisions, store, each side's info with what its workers timed, timings)."""
    from perfgate.gate import process_ab

    design = process_ab.design_for(gate, mode)
    infos: dict[str, dict] = {"base": {}, "head": {}}
    specs = {
        label: SideSpec(label, paths.REPO, submission=Path(path))
        for label, path in (("base", base_file), ("head", head_file))
    }

    def start(spec: SideSpec, index: int):
        return SubmissionSide(f"{spec.label}{index + 1}", spec.submission, mode=mode)

    return _measure_sides(specs, selected, design, start, infos, describe=True)


def _measure_sides(specs, selected, design, start, infos, *, describe: bool = False):
    """:func:`measure_ab` with each side's reducer (and, for files, what its worker timed)
    recorded in ``infos``; a worker that fails is AbError, exit 2."""

    def on_prepared(spec: SideSpec, worker, case: str, answer: dict) -> None:
        if "reducer_backend" in answer:
            infos[spec.label]["reducer_backend"] = answer["reducer_backend"]
        if describe and "timed" not in infos[spec.label]:
            infos[spec.label]["timed"] = worker.describe()

    timings: list[dict] = []
    try:
        decisions, store = measure_ab(
            specs, selected, design, start, on_prepared=on_prepared, timings=timings
        )
    except interleave.WorkerError as exc:
        raise AbError(str(exc), 2) from None
    return decisions, store, infos, timings


def build_cache(root: Path) -> Path:
    """Where a revision's native reducer is built: one cache per content of its
    ``kernels/reducer/`` (sources, build script, loader), kept between runs. A cache serves one
    build per architecture, so two differing reducers never share one; identical ones always
    do: a base built once is not built again, and the two sides of ``--base X --head X`` share
    a build."""
    from kernels.reducer.cache import cache_root

    digest = hashlib.sha256()
    source = root / "kernels" / "reducer"
    for path in sorted(source.glob("*")) if source.is_dir() else ():
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return cache_root() / "ab" / digest.hexdigest()[:20]


def build_both(roots: dict[str, tuple[Path, Path | None]]) -> None:
    """Each side's native reducer built at once (separate trees and caches): the slower build
    is the wait, not their sum. The base's failure is reported first."""
    with ThreadPoolExecutor(max_workers=len(roots)) as pool:
        futures = [pool.submit(build, root, cache, label) for label, (root, cache) in roots.items()]
    for future in futures:
        future.result()


def default_groups(mode: str) -> str:
    """The benchmarks an A/B times unless ``--groups`` says: the leaderboard shapes and the
    reducers in device mode; in leaderboard mode the whole calls the leaderboard times."""
    return "leaderboard,reducer" if mode == "device" else "leaderboard"


def check_mode_options(overrides: dict[str, Any], mode: str) -> None:
    """SettingsError for an override of another mode's A/B section (``--ab-leaderboard-rounds``
    with ``--mode device``): it would be ignored, and an ignored option is refused."""
    for name in overrides:
        section = name.split(".", 1)[0]
        if section.startswith("ab_") and section != f"ab_{mode}":
            raise SettingsError(
                f"{key(name).flag} sets the {section[3:]}-mode A/B; this run is --mode {mode} "
                f"(its options are --ab-{mode}-...)"
            )
