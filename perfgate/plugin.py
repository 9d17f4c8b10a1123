"""perfgate's pytest plugin: the benchmark options, the machine_info block and the harness.

Every benchmark it runs is a pytest-benchmark benchmark timed with
:func:`perfgate.measure.clock.device_clock` (collection refuses one that is not). ``--perfgate-mode``
(one of :data:`perfgate.modes.MODES`) picks what a sample is:

- ``device``: kernel time. The GEMM (``gemm_a16wfp4``) or the reducer runs once per input copy
  inside one CUDA/HIP graph; a sample is the replay's device time / number of copies.
- ``leaderboard``: events around one ``custom_kernel(data)`` call (the reducer: one direct call),
  rotating through input sets of different seeds, each output checked after its round. Each call
  follows a flush long enough that the host path ends before the GPU reaches the call, as in the
  task's harness (:func:`perfgate.measure.flush.leaderboard_flush`), so a sample is device time.
- ``host``: the ``host`` group only: host time per ``custom_kernel`` call, batches of
  back-to-back calls on an idle GPU, each call interleaved with a fixed reference path and the
  sample their ratio x 10 us (:class:`perfgate.measure.host_timer.HostTimed`, :func:`perfgate.measure.host_timer.reference_path`:
  the lent VM's CPU speed moves by up to 1.8x, the ratio cancels it); no other mode times it.

Before any timing every output is checked against the reference, so a wrong kernel cannot make a
baseline. See docs/perfgate-bench.md.

``--perfgate-submission FILE`` times FILE's ``custom_kernel`` instead of the package's
(``python -m perfgate bench --submission FILE`` passes it; docs/submission.md): the file is
loaded once at session start (one line and a usage error when it cannot be), device mode captures
one ``custom_kernel(data)`` per input copy, the ``reducer`` group is deselected with a message (a
submission has no reducer entry point), and the results' ``machine_info["perfgate"]`` records
``submission`` (path, sha256, POPCORN directives) so that they are never taken for the package's.

How it is loaded (decided here, once): ``python -m perfgate bench`` passes ``-p perfgate.plugin``,
and every pytest run of the suite gets it from ``pytest_plugins`` in the root ``tests/conftest.py``
(pytest reads that before parsing options; the same name is registered once). There is
no ``pytest11`` entry point: from a checkout without ``pip install -e .`` it would not exist, and
where it does it loads the plugin into every pytest run of the environment under the entry
point's name, so that a later ``-p perfgate.plugin`` would register the same module a second time
(pluggy refuses that).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from perfgate import modes, variants
from perfgate.catalog import GemmShape, ReducerCase, gemm_set_bytes, reducer_set_bytes
from perfgate.gate.paths import SCHEMA
from perfgate.gate.settings import MAX_LOOK_ROUNDS, defaults
from perfgate.measure import fingerprint, host_timer
from perfgate.measure.clock import Timed, device_clock, measure
from perfgate.measure.flush import for_mode, rotation_count
from perfgate.measure.harness import Work, batched_launch, prepare
from perfgate.measure.launch import probe_median

PLUGIN_NAME = "perfgate.plugin"
DEFAULT_WARMUP = 5
MAX_WARMUP = 1000  # untimed rounds: JIT, autotune and clocks settle in far fewer
# Fixtures that make a test a perfgate benchmark: it must then be timed with the device clock.
BENCHMARK_FIXTURES = ("benchmark", "harness")
SUBMISSION_OPTION = "--perfgate-submission"
_SUBMISSION = pytest.StashKey[Any]()
_DESELECTED_REDUCER = pytest.StashKey[int]()


# -- options ------------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfgate")
    group.addoption(
        "--perfgate-mode",
        choices=modes.MODE_NAMES,
        default=modes.DEFAULT_MODE,
        help="; ".join(f"{m.name}: {m.description}" for m in modes.MODES),
    )
    group.addoption(
        "--perfgate-rounds",
        type=int,
        default=None,
        help=f"measured rounds per benchmark, from min_samples to {MAX_LOOK_ROUNDS} (default: "
        + ", ".join(f"{_default_rounds(m.name)} in {m.name} mode" for m in modes.MODES)
        + ")",
    )
    group.addoption(
        "--perfgate-warmup",
        type=int,
        default=DEFAULT_WARMUP,
        help=f"untimed warm-up rounds before measuring, in [0, {MAX_WARMUP}]",
    )
    group.addoption(
        SUBMISSION_OPTION,
        metavar="FILE",
        default=None,
        help="time FILE's custom_kernel (a one-file submission) instead of the package's; the "
        "reducer group is deselected (a submission has no reducer entry point)",
    )
    group.addoption(
        "--perfgate-no-graph",
        action="store_true",
        help="device mode: launch directly instead of capturing a graph (for diagnosis)",
    )


def _default_rounds(mode: str) -> int:
    """Measured rounds per benchmark when ``--perfgate-rounds`` is not given: the mode's
    ``[tool.perfgate.rounds]`` entry in pyproject.toml, the one home of gate settings."""
    return defaults().rounds[mode]


@dataclass(frozen=True)
class Settings:
    """The harness's options, validated, with the mode's default rounds filled in."""

    mode: modes.Mode
    rounds: int
    warmup: int
    use_graph: bool

    @classmethod
    def from_options(
        cls, mode: str, rounds: int | None, warmup: int, no_graph: bool = False
    ) -> Settings:
        """Raises ValueError for an unknown mode, fewer than 2 rounds or a negative warm-up."""
        chosen = modes.get(mode)

        # fewer rounds than the gate's min_samples could never be judged (compare: exit 2)
        minimum = defaults().stats.min_samples
        if rounds is not None and rounds < minimum:
            raise ValueError(
                f"--perfgate-rounds must be >= {minimum} (min_samples), got {rounds}: "
                f"rerun with at least {minimum} rounds"
            )
        if rounds is not None and rounds > MAX_LOOK_ROUNDS:
            raise ValueError(
                f"--perfgate-rounds must be <= {MAX_LOOK_ROUNDS} (the most any look measures), "
                f"got {rounds}"
            )
        if not 0 <= warmup <= MAX_WARMUP:
            raise ValueError(f"--perfgate-warmup must be in [0, {MAX_WARMUP}], got {warmup}")
        return cls(
            mode=chosen,
            rounds=_default_rounds(chosen.name) if rounds is None else rounds,
            warmup=warmup,
            use_graph=not no_graph,
        )

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        try:
            return cls.from_options(
                config.getoption("--perfgate-mode"),
                config.getoption("--perfgate-rounds"),
                config.getoption("--perfgate-warmup"),
                config.getoption("--perfgate-no-graph"),
            )
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_configure(config: pytest.Config) -> None:
    Settings.from_config(config)  # bad options stop the run before anything is collected


def pytest_sessionstart(session: pytest.Session) -> None:
    from perfgate.submission.pytest_plugin import load_option

    submission = load_option(session.config, SUBMISSION_OPTION)
    if submission is not None:
        session.config.stash[_SUBMISSION] = submission


def submission_of(config: pytest.Config) -> Any:
    """The loaded submission (:class:`perfgate.submission.load.Submission`) whose
    ``custom_kernel`` the benchmarks time, or None for the package's."""
    stash = getattr(config, "stash", None)  # a stand-in config without one times the package
    return None if stash is None else stash.get(_SUBMISSION, None)


# -- collection ---------------------------------------------------------------------------------
def is_benchmark(item: pytest.Item) -> bool:
    return any(name in BENCHMARK_FIXTURES for name in getattr(item, "fixturenames", ()))


def has_device_clock(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("benchmark")
    return marker is not None and marker.kwargs.get("timer") is device_clock


def clockless_benchmarks(items: Iterable[pytest.Item]) -> list[str]:
    """Node ids of the benchmarks that would store host time under device-time names."""
    return [item.nodeid for item in items if is_benchmark(item) and not has_device_clock(item)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bad = clockless_benchmarks(items)
    if bad:
        raise pytest.UsageError(
            f"{bad[0]}: every perfgate benchmark must be marked "
            "@pytest.mark.benchmark(timer=perfgate.measure.clock.device_clock, group=...)"
            + (f" ({len(bad) - 1} more)" if len(bad) > 1 else "")
        )
    other = other_modes_benchmarks(items, config.getoption("--perfgate-mode"))
    if config.getoption(SUBMISSION_OPTION) is not None:
        reducer = package_only_benchmarks(items)
        config.stash[_DESELECTED_REDUCER] = len(reducer)
        other += [item for item in reducer if item not in other]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]


def package_only_benchmarks(items: Iterable[pytest.Item]) -> list[pytest.Item]:
    """Benchmarks of a group that times something other than ``custom_kernel`` (the reducer
    group, :data:`perfgate.catalog.GROUPS` kind ``reducer``): a submission has no such entry."""
    from perfgate.catalog import GROUPS

    out = []
    for item in items:
        marker = item.get_closest_marker("benchmark")
        group = GROUPS.get(marker.kwargs.get("group")) if marker is not None else None
        if is_benchmark(item) and group is not None and group.kind != "gemm":
            out.append(item)
    return out


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    count = config.stash.get(_DESELECTED_REDUCER, 0)
    if not count:
        return []
    return [
        f"perfgate: {count} reducer benchmark(s) deselected: a submission file has no reducer "
        f"entry point ({SUBMISSION_OPTION} times custom_kernel only)"
    ]


def other_modes_benchmarks(items: Iterable[pytest.Item], mode: str) -> list[pytest.Item]:
    """Benchmarks whose group ``mode`` does not time (the host group outside host mode, and the
    device-time groups in it): deselected, never a sample of the wrong quantity."""
    out = []
    for item in items:
        marker = item.get_closest_marker("benchmark")
        timed = marker is None or modes.times_group(mode, marker.kwargs.get("group"))
        if is_benchmark(item) and not timed:
            out.append(item)
    return out


# -- machine_info -------------------------------------------------------------------------------
def machine_info_block(mode: str, fingerprint: dict, submission: dict | None = None) -> dict:
    """``machine_info["perfgate"]`` of a result file (docs/CONTRACTS.md); ``submission``, what
    :meth:`perfgate.submission.load.Submission.describe` says of a timed submission file, is
    recorded under that key (a package run has none)."""
    block = {
        "schema": SCHEMA,
        "device_key": fingerprint["device_key"],
        "mode": modes.get(mode).name,
        "fingerprint": fingerprint,
    }
    if submission is not None:
        block["submission"] = submission
    return block


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    submission = submission_of(config)
    machine_info["perfgate"] = machine_info_block(
        config.getoption("--perfgate-mode"),
        fingerprint.collect(),
        None if submission is None else submission.describe(),
    )


class RoundRobin:
    """Leaderboard mode's untimed setup and teardown around each round.

    ``setup`` flushes the cache and hands over the next input set; ``teardown`` checks the
    output of the round (``target.last``) against that set's reference.
    """

    def __init__(
        self,
        arg_sets: Sequence[tuple],
        refs: Sequence[Any],
        check: Callable[[Any, Any, str], None],
        flush: Callable[[], None],
        target: Timed,
        synchronize: Callable[[], None],
    ) -> None:
        if len(arg_sets) != len(refs) or not arg_sets:
            raise ValueError(
                f"need one reference per input set, got {len(arg_sets)} and {len(refs)}"
            )
        self.arg_sets, self.refs, self.check = arg_sets, refs, check
        self.flush, self.target, self.synchronize = flush, target, synchronize
        self._order = itertools.cycle(range(len(arg_sets)))
        self.current = -1

    def setup(self) -> tuple[tuple, dict]:
        self.current = next(self._order)
        self.flush()
        return self.arg_sets[self.current], {}

    def teardown(self, *args: Any) -> None:
        self.synchronize()
        self.check(self.target.last, self.refs[self.current], f"round on input set {self.current}")


def with_extra(fn: Callable, extra: Callable[[], None]) -> Callable:
    """``fn`` followed by an extra pass (a lab run's slowdown, perfgate.variants; never the
    kernel's)."""

    def work(*args: Any) -> Any:
        out = fn(*args)
        extra()
        return out

    return work


# -- the harness --------------------------------------------------------------------------------
class Harness:
    """Prepares a case (perfgate.measure.harness) and has the selected mode time it (needs a GPU).
    ``submission``: a loaded submission file whose ``custom_kernel`` the GEMM cases time."""

    def __init__(self, settings: Settings, submission: Any = None) -> None:
        import torch

        from kernels.device import device_info

        self.settings = settings
        self.submission = submission
        # None unless a lab run plugged an extra pass in (perfgate.variants)
        self.extra_pass = variants.harness_pass()
        self.device = torch.device("cuda")
        self.info = device_info()
        self.flush = for_mode(settings.mode, self.info.last_level_cache_bytes, self.device)

    def copies(self, set_bytes: int) -> int:
        return rotation_count(set_bytes, self.info.last_level_cache_bytes)

    def gemm(self, benchmark: Any, shape: GemmShape) -> None:
        copies = self.copies(gemm_set_bytes(shape))
        work = prepare(shape, copies, self.device, self.submission)
        benchmark.extra_info.update(m=shape.m, n=shape.n, k=shape.k, copies_rotated=copies)
        self.settings.mode.time(self, benchmark, work)

    def host(self, benchmark: Any, shape: GemmShape) -> None:
        """Host mode: host seconds per ``custom_kernel`` call, back to back on an idle GPU.
        Distinct input sets per batch, as the task's harness regenerates inputs: a cache keyed
        on pointers would miss there, so it must miss here too."""
        work = prepare(shape, 4, self.device, self.submission)
        benchmark.extra_info.update(m=shape.m, n=shape.n, k=shape.k)
        self.settings.mode.time(self, benchmark, work)

    def reducer(self, benchmark: Any, case: ReducerCase) -> None:
        from kernels.splitk import reducer_backend

        copies = self.copies(reducer_set_bytes(case))
        work = prepare(case, copies, self.device, self.submission)
        benchmark.extra_info.update(
            splits=case.splits,
            m=case.m,
            n=case.n,
            reducer_backend=reducer_backend(),
            copies_rotated=copies,
        )
        self.settings.mode.time(self, benchmark, work)

    # -- how the modes time a prepared case (perfgate.modes) ----------------------------
    def batched(self, benchmark: Any, work: Work, *, graph: bool | None = None) -> None:
        """Device mode: all copies in one graph replay (``graph=False``: direct launches); a
        sample is per-call device time."""
        graph = self.settings.use_graph if graph is None else graph
        launch = batched_launch(work, graph=graph)
        calls = len(work.calls)
        if self.extra_pass is not None:
            plain = probe_median(launch.run, self.flush, calls=calls, rounds=15)
            extra = self.extra_pass.make(plain * calls, self.flush)
            launch = batched_launch(work, graph=graph, extra=extra, what=", injected")
            benchmark.extra_info.update(self.extra_pass.record(extra, plain * calls, self.flush))
        benchmark.extra_info.update(
            mode=self.settings.mode.name,
            launch=launch.kind,
            launch_note=launch.note,
            calls_per_sample=calls,
        )
        self.finish(benchmark, Timed(launch.run, calls=calls), self.flush)

    def per_call(self, benchmark: Any, work: Work) -> None:
        """Leaderboard mode: events around one call after a flush; inputs rotate, outputs checked."""
        import torch

        fn, arg_sets = work.fn, work.arg_sets
        for i, (args, ref) in enumerate(zip(arg_sets, work.refs, strict=True)):
            out = fn(*args)
            torch.cuda.synchronize()
            work.check(out, ref, f"input set {i}")
        call: Callable = fn
        if self.extra_pass is not None:
            plain = probe_median(lambda: fn(*arg_sets[0]), self.flush, calls=1, rounds=15)
            extra = self.extra_pass.make(plain, self.flush)
            call = with_extra(fn, extra)
            benchmark.extra_info.update(self.extra_pass.record(extra, plain, self.flush))
        target = Timed(call)
        rounds = RoundRobin(arg_sets, work.refs, work.check, self.flush, target,
                            torch.cuda.synchronize)  # fmt: skip
        benchmark.extra_info.update(mode="leaderboard", launch="direct", calls_per_sample=1)
        self.finish(benchmark, target, rounds.setup, rounds.teardown)

    def host_time(self, benchmark: Any, work: Work) -> None:
        """Host mode: batches of back-to-back calls over the reference path, the GPU idle."""
        import torch

        for i, (args, ref) in enumerate(zip(work.arg_sets, work.refs, strict=True)):
            work.check(work.fn(*args), ref, f"input set {i}")
        delay = host_timer.host_delay_seconds()
        fn = host_timer.with_host_delay(work.fn, delay) if delay else work.fn
        reference = host_timer.reference_path(work.arg_sets[0][0], self.device)
        target = host_timer.HostTimed(fn, work.arg_sets, reference=reference)
        last_ref = work.refs[(host_timer.HOST_BATCH - 1) % len(work.arg_sets)]

        def teardown(*_: Any) -> None:
            torch.cuda.synchronize()
            work.check(target.last, last_ref, "the last call of a batch")

        benchmark.extra_info.update(
            mode="host", launch="direct",
            calls_per_sample=target.calls, injected_host_us=delay * 1e6,
            sample_unit=f"host time per call / reference path x {host_timer.REFERENCE_SCALE_S:g} s",
        )  # fmt: skip
        self.finish(benchmark, target, lambda: torch.cuda.synchronize(), teardown)
        benchmark.extra_info["flush_bytes"] = 0  # host mode never flushes: no device time here
        work_s, ref_s = zip(*target.history, strict=True)
        benchmark.extra_info.update(  # the plain microseconds behind the normalised samples
            host_us_per_call_median=statistics.median(work_s) * 1e6,
            reference_us_per_call_median=statistics.median(ref_s) * 1e6,
        )

    def finish(
        self, benchmark: Any, target: Any, setup: Callable, teardown: Callable | None = None
    ) -> None:
        benchmark.extra_info.update(
            flush_bytes=self.flush.nbytes,
            rounds=self.settings.rounds,
            warmup_rounds=self.settings.warmup,
        )
        measure(
            benchmark,
            target,
            setup=setup,
            teardown=teardown,
            rounds=self.settings.rounds,
            warmup_rounds=self.settings.warmup,
        )
        # clocks right after the rounds: a throttled card shows here
        benchmark.extra_info["clocks_after"] = fingerprint.clock_readings()


@pytest.fixture(scope="session")
def harness(request: pytest.FixtureRequest) -> Harness:
    return Harness(Settings.from_config(request.config), submission_of(request.config))
