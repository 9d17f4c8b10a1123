"""GPU benchmarks with device time: options, the perfgate machine_info block, the harness.

Every test here is a pytest-benchmark benchmark timed with :func:`perfgate.timing.device_clock`
(collection refuses one that is not), marked ``bench`` and ``gpu``. ``--perfgate-mode`` picks
what a sample is:

- ``device``: kernel time. The GEMM (``gemm_a16wfp4``) or the reducer runs once per input copy
  inside one CUDA/HIP graph; a sample is the replay's device time / number of copies.
- ``leaderboard``: events around one ``custom_kernel(data)`` call (the reducer: one direct call),
  rotating through input sets of different seeds, each output checked after its round.

Before any timing every output is checked against the reference, so a wrong kernel cannot make
a baseline. Run through ``python -m perfgate bench``; see docs/perfgate-bench.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from perfgate import timing
from perfgate.shapes import GemmShape, ReducerCase

MODES = ("device", "leaderboard")
DEFAULT_ROUNDS = {"device": 200, "leaderboard": 100}
SEED_BASE = 20250


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfgate")
    group.addoption(
        "--perfgate-mode",
        choices=MODES,
        default="device",
        help="device: kernel time via graph replay; leaderboard: events around custom_kernel",
    )
    group.addoption(
        "--perfgate-rounds",
        type=int,
        default=None,
        help="measured rounds per benchmark (default: 200 in device mode, 100 in leaderboard)",
    )
    group.addoption(
        "--perfgate-warmup", type=int, default=5, help="untimed warm-up rounds before measuring"
    )
    group.addoption(
        "--perfgate-no-graph",
        action="store_true",
        help="device mode: launch directly instead of capturing a graph (for diagnosis)",
    )


def pytest_configure(config: pytest.Config) -> None:
    rounds = config.getoption("--perfgate-rounds")
    if rounds is not None and rounds < 2:
        raise pytest.UsageError(f"--perfgate-rounds must be >= 2, got {rounds}")
    if config.getoption("--perfgate-warmup") < 0:
        raise pytest.UsageError("--perfgate-warmup must be >= 0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/perf/" not in item.nodeid.replace("\\", "/"):
            continue
        marker = item.get_closest_marker("benchmark")
        if marker is None or marker.kwargs.get("timer") is not timing.device_clock:
            raise pytest.UsageError(
                f"{item.nodeid}: every benchmark under tests/perf must be marked "
                "@pytest.mark.benchmark(timer=perfgate.timing.device_clock, group=...)"
            )


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    from perfgate import fingerprint

    fp = fingerprint.collect()
    machine_info["perfgate"] = {
        "schema": 1,
        "device_key": fp["device_key"],
        "mode": config.getoption("--perfgate-mode"),
        "fingerprint": fp,
    }


class Harness:
    """Builds inputs, checks outputs and times them in the selected mode."""

    def __init__(self, config: pytest.Config) -> None:
        import torch

        from kernels.device import device_info

        self.mode: str = config.getoption("--perfgate-mode")
        self.rounds: int = config.getoption("--perfgate-rounds") or DEFAULT_ROUNDS[self.mode]
        self.warmup: int = config.getoption("--perfgate-warmup")
        self.use_graph = not config.getoption("--perfgate-no-graph")
        self.inject = timing.slowdown_fraction()
        self.device = torch.device("cuda")
        self.info = device_info()
        self.flush = timing.CacheFlush(
            timing.flush_bytes(self.info.last_level_cache_bytes), self.device
        )

    # -- GEMM ---------------------------------------------------------------------------------
    def gemm(self, benchmark: Any, shape: GemmShape) -> None:
        import torch

        from kernels.reference import generate_input, reference_gemm

        copies = timing.rotation_count(_gemm_set_bytes(shape), self.info.last_level_cache_bytes)
        sets, refs = [], []
        for i in range(copies):
            data = generate_input(*shape, seed=SEED_BASE + i, device=self.device)
            refs.append(reference_gemm(data[0], data[3], data[4]))
            sets.append(data)
        benchmark.extra_info.update(m=shape.m, n=shape.n, k=shape.k, copies_rotated=copies)
        if self.mode == "device":
            from kernels.gemm import gemm_a16wfp4

            outs = [torch.empty_like(ref) for ref in refs]
            calls = [
                _bind(gemm_a16wfp4, (d[0], d[3], d[4]), {"out": o})
                for d, o in zip(sets, outs, strict=True)
            ]
            del sets  # the calls hold what the kernel reads; B and B_q (bf16/fp4 B) are freed
            self._batched(benchmark, calls, refs, _check_gemm)
        else:
            from kernels.gemm import custom_kernel

            self._per_call(benchmark, custom_kernel, [(d,) for d in sets], refs, _check_gemm)

    # -- split-K reducer ----------------------------------------------------------------------
    def reducer(self, benchmark: Any, case: ReducerCase) -> None:
        import torch

        from kernels.splitk import reduce_partials, reducer_backend

        set_bytes = case.splits * case.m * case.n * 4 + case.m * case.n * 2
        copies = timing.rotation_count(set_bytes, self.info.last_level_cache_bytes)
        partials, refs = [], []
        for i in range(copies):
            gen = torch.Generator(device=self.device).manual_seed(SEED_BASE + i)
            p = torch.randn((case.splits, case.m, case.n), generator=gen, device=self.device)
            partials.append(p)
            refs.append(_sum_in_order(p))
        benchmark.extra_info.update(
            splits=case.splits,
            m=case.m,
            n=case.n,
            reducer_backend=reducer_backend(),
            copies_rotated=copies,
        )
        outs = [torch.empty_like(r) for r in refs]
        if self.mode == "device":
            calls = [
                _bind(reduce_partials, (p, o), {}) for p, o in zip(partials, outs, strict=True)
            ]
            self._batched(benchmark, calls, refs, _check_exact)
        else:
            self._per_call(
                benchmark,
                reduce_partials,
                list(zip(partials, outs, strict=True)),
                refs,
                _check_exact,
            )

    # -- the two timing modes -----------------------------------------------------------------
    def _batched(self, benchmark: Any, calls: list, refs: list, check: Callable) -> None:
        """Device mode: all copies in one graph replay; a sample is per-call device time."""
        import torch

        eager = [call() for call in calls]  # JIT, autotune and module load happen here
        torch.cuda.synchronize()
        for i, (out, ref) in enumerate(zip(eager, refs, strict=True)):
            check(out, ref, f"eager call on input copy {i}")
        launch = timing.build_launch(calls, graph=self.use_graph)
        launch.run()
        torch.cuda.synchronize()
        for i, (out, ref) in enumerate(zip(launch.outputs, refs, strict=True)):
            check(out, ref, f"{launch.kind} launch on input copy {i}")
        if self.inject:
            plain = timing.probe_median(launch.run, self.flush, calls=len(calls), rounds=15)
            extra = timing.calibrate_extra_pass(
                self.inject * plain * len(calls), self.flush, self.device
            )
            launch = timing.build_launch(calls, extra, graph=self.use_graph)
            self._record_injection(benchmark, extra, plain, calls=len(calls))
        benchmark.extra_info.update(
            mode="device", launch=launch.kind, launch_note=launch.note, calls_per_sample=len(calls)
        )
        self._finish(benchmark, timing.Timed(launch.run, calls=len(calls)), self.flush)

    def _per_call(
        self, benchmark: Any, fn: Callable, arg_sets: list, refs: list, check: Callable
    ) -> None:
        """Leaderboard mode: events around one call after a flush; inputs rotate, outputs checked."""
        import torch

        for i, (args, ref) in enumerate(zip(arg_sets, refs, strict=True)):
            out = fn(*args)
            torch.cuda.synchronize()
            check(out, ref, f"input set {i}")
        work: Callable = fn
        if self.inject:
            plain = timing.probe_median(lambda: fn(*arg_sets[0]), self.flush, calls=1, rounds=15)
            extra = timing.calibrate_extra_pass(self.inject * plain, self.flush, self.device)

            def work(*args: Any) -> Any:
                out = fn(*args)
                extra()
                return out

            self._record_injection(benchmark, extra, plain, calls=1)
        order = itertools.cycle(range(len(arg_sets)))
        current = [0]

        def setup() -> tuple[tuple, dict]:
            current[0] = next(order)
            self.flush()
            return arg_sets[current[0]], {}

        target = timing.Timed(work)

        def teardown(*args: Any) -> None:
            torch.cuda.synchronize()
            check(target.last, refs[current[0]], f"round on input set {current[0]}")

        benchmark.extra_info.update(mode="leaderboard", launch="direct", calls_per_sample=1)
        self._finish(benchmark, target, setup, teardown)

    def _finish(
        self,
        benchmark: Any,
        target: timing.Timed,
        setup: Callable,
        teardown: Callable | None = None,
    ) -> None:
        from perfgate import fingerprint

        benchmark.extra_info.update(
            flush_bytes=self.flush.nbytes,
            rounds=self.rounds,
            warmup_rounds=self.warmup,
        )
        timing.measure(
            benchmark,
            target,
            setup=setup,
            teardown=teardown,
            rounds=self.rounds,
            warmup_rounds=self.warmup,
        )
        # clocks right after the rounds: a throttled card shows here
        benchmark.extra_info["clocks_after"] = fingerprint.clock_readings()

    def _record_injection(
        self, benchmark: Any, extra: timing.ExtraPass, plain: float, *, calls: int
    ) -> None:
        cost = timing.probe_median(extra, self.flush, calls=1, rounds=7)
        benchmark.extra_info.update(
            injected_fraction_requested=self.inject,
            injected_bytes=extra.nbytes,
            injected_fraction_estimated=cost / (plain * calls),
        )


def _bind(fn: Callable, args: tuple, kwargs: dict) -> Callable[[], Any]:
    def call() -> Any:
        return fn(*args, **kwargs)

    return call


def _gemm_set_bytes(shape: GemmShape) -> int:
    m, n, k = shape
    a, b_shuffle, b_scales, out = m * k * 2, n * k // 2, n * k // 32, m * n * 2
    return a + b_shuffle + b_scales + out


def _sum_in_order(partials: Any) -> Any:
    """The reducer's contract: fp32 sum of partials 0..S-1 in that order, then bf16 RNE."""
    import torch

    acc = partials[0].clone()
    for s in range(1, partials.shape[0]):
        acc += partials[s]
    return acc.to(torch.bfloat16)


def _check_gemm(out: Any, ref: Any, what: str) -> None:
    from kernels.reference import check_leaderboard

    report = check_leaderboard(out, ref)
    if not report:
        raise AssertionError(f"wrong GEMM output ({what}); refusing to time it: {report}")


def _check_exact(out: Any, ref: Any, what: str) -> None:
    import torch

    if out.shape != ref.shape or out.dtype != ref.dtype or not torch.equal(out, ref):
        bad = int((out != ref).sum()) if out.shape == ref.shape else "all"
        raise AssertionError(
            f"wrong reducer output ({what}): {bad} elements differ from the in-order fp32 sum"
        )


@pytest.fixture(scope="session")
def harness(request: pytest.FixtureRequest) -> Harness:
    return Harness(request.config)
