"""Device time for pytest-benchmark: a clock that reads GPU time, cache flushes, graph batches.

pytest-benchmark times a round as ``timer()`` after the call minus ``timer()`` before it. Here the
timer is :func:`device_clock`, whose reading is *cumulative device seconds*: the benchmarked
callable (made by :func:`timed`) records two CUDA/HIP events around its work, synchronises, and
adds the elapsed event time to the clock. The difference pytest-benchmark takes is then exactly the
device time of that round, so its rounds, statistics and JSON (``stats.data``) hold device time.
A benchmark opts in with ``@pytest.mark.benchmark(timer=perfgate.timing.device_clock)``, the hook
pytest-benchmark supports per test (its ``--benchmark-timer`` option accepts only ``time.*``).

Two ways to run the work, picked by the timing mode (see :mod:`perfgate.plugin`):

- batched (mode ``device``): one CUDA/HIP graph replays the call on each of several input copies
  back to back, so host launch gaps vanish and event resolution is spread over the copies; a
  sample is the replay's device time divided by the number of calls. If capture fails the calls
  are launched directly and the benchmark records ``launch="direct"`` and why.
- per call (mode ``leaderboard``): events around one ``custom_kernel(data)`` call, as the task's
  harness times it, rotating through input sets made with different seeds.

Either way ``setup`` (untimed) first overwrites a buffer of twice the last-level cache (L2, plus
the Infinity Cache on MI355X), so every round starts from a cold cache, and warm-up rounds (JIT,
autotune, module load) run before any measured round.

This is the project's one GPU timer: the benchmarks (through pytest-benchmark), the config tuner
(``python -m tools.tune``) and the reducer benchmark (``python -m tools.reducer_bench``, both
through :func:`median_per_call` and :func:`probe_median`) use the same events, flush and rotation,
so tuned tables are made with the timer that gates them.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Samples are stored as multiples of 2**-40 s (about 0.9 ps, far below event resolution). With
# the clock reset per benchmark, every reading stays below 2**12 s, so sums and the differences
# pytest-benchmark takes are exact in float64: a round's sample is exactly what was measured.
SECONDS_QUANTUM = 2.0**-40
_EXACT_LIMIT_S = 2.0**12

INJECT_ENV = "MXFP4_BENCH_INJECT_SLOWDOWN"


def quantize_seconds(seconds: float) -> float:
    """``seconds`` rounded to the clock's quantum (2**-40 s)."""
    return round(seconds / SECONDS_QUANTUM) * SECONDS_QUANTUM


class DeviceClock:
    """Cumulative device seconds; pytest-benchmark reads it before and after each round."""

    def __init__(self) -> None:
        self._seconds = 0.0

    def read(self) -> float:
        return self._seconds

    def add(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"seconds must be a float, got {type(seconds).__name__}")
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"seconds must be finite and >= 0, got {seconds!r}")
        total = self._seconds + quantize_seconds(seconds)
        if total >= _EXACT_LIMIT_S:
            raise OverflowError(
                f"device clock reached {total:.0f} s; call reset() between benchmarks "
                "so round differences stay exact"
            )
        self._seconds = total

    def reset(self) -> None:
        """Start again from zero (between benchmarks, never inside a round)."""
        self._seconds = 0.0


CLOCK = DeviceClock()


def device_clock() -> float:
    """pytest-benchmark's timer: the cumulative device seconds added by :func:`timed` callables."""
    return CLOCK.read()


def cuda_event() -> Any:
    """A timing CUDA/HIP event (torch maps ``torch.cuda`` onto HIP on ROCm)."""
    import torch

    return torch.cuda.Event(enable_timing=True)


class Timed:
    """``work`` wrapped so that each call adds its device time (per call) to ``clock``.

    ``calls`` is how many kernel calls one invocation of ``work`` makes (a graph replay over
    ``calls`` input copies): the sample added is the elapsed time divided by it. The return
    value of the last invocation is kept in ``last`` (the per-call mode checks it untimed).
    """

    def __init__(
        self,
        work: Callable[..., Any],
        *,
        calls: int = 1,
        clock: DeviceClock = CLOCK,
        event: Callable[[], Any] = cuda_event,
    ) -> None:
        if not callable(work):
            raise TypeError(f"work must be callable, got {type(work).__name__}")
        if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
            raise ValueError(f"calls must be an int >= 1, got {calls!r}")
        self.work = work
        self.calls = calls
        self.clock = clock
        self.event = event
        self.last: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start, end = self.event(), self.event()
        start.record()
        result = self.work(*args, **kwargs)
        end.record()
        end.synchronize()
        elapsed_ms = start.elapsed_time(end)
        self.clock.add(elapsed_ms / 1000.0 / self.calls)
        self.last = result
        return result


def flush_bytes(last_level_cache_bytes: int, factor: int = 2) -> int:
    """Size of the buffer overwritten between rounds: ``factor`` x the last-level cache.

    Twice the cache, because caches are not perfectly LRU: writing exactly the cache size leaves
    lines of the previous round behind (nvbench flushes exactly L2; do_bench writes 256 MB).
    """
    for name, v in (("last_level_cache_bytes", last_level_cache_bytes), ("factor", factor)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if last_level_cache_bytes <= 0:
        raise ValueError(
            f"last_level_cache_bytes must be > 0, got {last_level_cache_bytes} "
            "(the interpreter has no cache to flush; benchmarks need a GPU)"
        )
    if factor < 2:
        raise ValueError(f"factor must be >= 2 so the flush exceeds the cache, got {factor}")
    return factor * last_level_cache_bytes


def rotation_count(set_bytes: int, cache_bytes: int, *, minimum: int = 4, maximum: int = 16) -> int:
    """How many input copies to rotate through: enough to exceed the cache, within limits.

    The flush already makes every round cold; rotation adds distinct addresses (and, in the
    leaderboard mode, distinct data) per call. ``minimum`` keeps several calls per graph replay
    so that event resolution (~0.5 us) is spread over them; ``maximum`` bounds memory and
    capture time for tiny shapes, whose copies could never fill a 256 MB cache.
    """
    for name, v in (("set_bytes", set_bytes), ("cache_bytes", cache_bytes)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
        if v <= 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if not 1 <= minimum <= maximum:
        raise ValueError(f"need 1 <= minimum <= maximum, got minimum={minimum} maximum={maximum}")
    return max(minimum, min(maximum, -(-cache_bytes // set_bytes)))


# GPU cycles the gate's flush holds the device for after its write (torch.cuda._sleep, CUDA and
# ROCm): ~250 us at the H200's 1.98 GHz, ~210 us at the MI355X's 2.4 GHz. The events around a
# timed replay measure from the moment the GPU reaches the start event; if the GPU has already
# finished the flush (2x L2: ~40 us on the H200) before the CPU has queued the start event and
# the graph launch, the GPU idles inside the timed region and the CPU's speed leaks into device
# time. On the lent H200 the guest's CPU speed moves up to 1.8x for seconds at a time (docs/
# views.md), and one worker of an A/B pair ran 2-3% slower for such stretches (docs/
# perfgate-compare.md); a hold far longer than the CPU's submission keeps the queue ahead.
HOLD_CYCLES = 500_000


def gate_flush(last_level_cache_bytes: int, device: Any) -> CacheFlush:
    """The flush every timed round starts with, in the gate and in the tools alike: the cache
    write, then (on a GPU) a device-side hold of :data:`HOLD_CYCLES` so that the timed work is
    queued before the GPU reaches it."""
    import torch

    hold = None
    if torch.device(device).type == "cuda":
        hold = functools.partial(torch.cuda._sleep, HOLD_CYCLES)
    return CacheFlush(flush_bytes(last_level_cache_bytes), device, hold=hold)


# Leaderboard mode's flush. The task's harness fills ~62.5 GiB before each timed call, so the GPU
# is still busy when the host has queued the whole call: its events then measure the call's
# device time (kernels and the gaps between them) and none of the host path. What matters is
# that the flush outlasts the host path by a wide margin, not its size: 2 GiB is ~0.5 ms of GPU
# work on an H200 (~0.4 ms on an MI355X) against a 10-90 us host path, and on the H200 it
# matched the harness's own fill within 1.2% on every ranked shape (0.0-0.6% spread). 2x the
# last-level cache (125 MB on the H200, ~40 us) is shorter than the host path: host latency
# leaked into every sample (0.4-21% spread).
LEADERBOARD_FLUSH_BYTES = 2 << 30


def leaderboard_flush(last_level_cache_bytes: int, device: Any) -> CacheFlush:
    """The flush before each leaderboard-mode call: long enough to hide the host path, and at
    least the gate's cache flush."""
    nbytes = max(LEADERBOARD_FLUSH_BYTES, flush_bytes(last_level_cache_bytes))
    return CacheFlush(nbytes, device)


class CacheFlush:
    """Overwrites ``nbytes`` of device memory; called in pytest-benchmark's untimed ``setup``."""

    def __init__(self, nbytes: int, device: Any, *, hold: Callable[[], None] | None = None) -> None:
        import torch

        if nbytes <= 0 or nbytes % 4:
            raise ValueError(f"nbytes must be a positive multiple of 4, got {nbytes}")
        if hold is not None and not callable(hold):
            raise TypeError(f"hold must be callable or None, got {type(hold).__name__}")
        self.nbytes = nbytes
        self.hold = hold
        self._buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self._count = 0

    def __call__(self) -> None:
        # A new value each time: a write the hardware cannot skip as unchanged.
        self._count = (self._count + 1) % (2**31 - 1)
        self._buffer.fill_(self._count)
        if self.hold is not None:
            self.hold()


def env_number(environ: Mapping[str, str], name: str, example: str, upper: float) -> float:
    """The number in environment variable ``name``, in [0, upper) (0 when unset or blank); a
    one-line error naming the variable, with ``example``, for anything else."""
    raw = environ.get(name, "").strip()
    if not raw:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be {example}, got {raw!r}") from None
    if not 0.0 <= value < upper:  # also refuses nan
        raise ValueError(f"{name} must be in [0, {upper:g}), got {raw!r}")
    return value


def slowdown_fraction(environ: Mapping[str, str] = os.environ) -> float:
    """The injected slowdown asked for with ``MXFP4_BENCH_INJECT_SLOWDOWN`` (0 when unset)."""
    return env_number(environ, INJECT_ENV, "a fraction such as 0.05", 1.0)


def pass_bytes(
    target_seconds: float,
    small: tuple[int, float],
    large: tuple[int, float],
    *,
    minimum: int = 4096,
    align: int = 4096,
) -> int:
    """Bytes of the extra copy whose device time is ``target_seconds``, from two timed sizes.

    A copy costs ``a + b * bytes`` (launch floor plus bandwidth); ``small`` and ``large`` are
    ``(bytes, seconds)`` measurements that fix ``a`` and ``b``. The result is rounded to
    ``align`` and never below ``minimum`` (the floor ``a`` cannot be undercut; the benchmark
    records the copy's estimated time so a report shows what was really injected).
    """
    (s1, t1), (s2, t2) = small, large
    if not s2 > s1 > 0:
        raise ValueError(f"need 0 < small bytes < large bytes, got {s1} and {s2}")
    if not t2 > t1 > 0:
        raise ValueError(f"the larger copy must take longer: got {t1!r} s and {t2!r} s")
    if not target_seconds > 0:
        raise ValueError(f"target_seconds must be > 0, got {target_seconds!r}")
    slope = (t2 - t1) / (s2 - s1)
    intercept = t1 - slope * s1
    raw = (target_seconds - intercept) / slope
    return max(minimum, round(raw / align) * align)


class ExtraPass:
    """The injected slowdown: a device copy of ``nbytes`` bytes (harness only, never the kernel)."""

    def __init__(self, nbytes: int, device: Any) -> None:
        import torch

        self.nbytes = nbytes
        self._src = torch.ones(nbytes, dtype=torch.uint8, device=device)
        self._dst = torch.empty_like(self._src)

    def __call__(self) -> None:
        self._dst.copy_(self._src)


@dataclass
class Launch:
    """How a batch of calls runs: ``run()`` executes them; ``outputs`` are their results."""

    kind: str  # "graph" or "direct"
    run: Callable[[], None]
    outputs: list[Any]
    note: str | None = None  # why capture failed, for the record
    _keep: list[Any] = field(default_factory=list)  # the graph object must outlive the replays


def build_launch(
    calls: Sequence[Callable[[], Any]],
    extra: Callable[[], None] | None = None,
    *,
    graph: bool = True,
) -> Launch:
    """Run ``calls`` (then ``extra``) as one CUDA/HIP graph, or directly if capture fails.

    Every call must already have run once eagerly (JIT compile and autotune cannot happen
    inside a capture).
    """
    import torch

    def work() -> list[Any]:
        outs = [call() for call in calls]
        if extra is not None:
            extra()
        return outs

    if graph:
        try:
            # Warm up on a side stream first, as torch's graph docs ask (allocator, handles).
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                work()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cuda_graph):
                outputs = work()
            torch.cuda.synchronize()
            return Launch("graph", cuda_graph.replay, outputs, None, [cuda_graph])
        except Exception as exc:  # capture unsupported by some op: measure directly instead
            torch.cuda.synchronize()
            note = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    else:
        note = "graph capture disabled"

    outputs: list[Any] = []

    def run_direct() -> None:
        outputs[:] = work()

    run_direct()
    torch.cuda.synchronize()
    return Launch("direct", run_direct, outputs, note)


def probe_median(
    run: Callable[[], Any], flush: Callable[[], None], *, calls: int, rounds: int
) -> float:
    """Median per-call device seconds of ``run`` over ``rounds`` flushed rounds (untimed clock)."""
    clock = DeviceClock()
    timed = Timed(run, calls=calls, clock=clock)
    samples = []
    for _ in range(rounds):
        flush()
        before = clock.read()
        timed()
        samples.append(clock.read() - before)
    return statistics.median(samples)


def median_per_call(
    calls: Sequence[Callable[[], Any]],
    flush: Callable[[], None],
    *,
    rounds: int,
    graph: bool = True,
) -> tuple[float, Launch]:
    """Median per-call device seconds of ``calls`` (one per input copy) launched together, each
    round after ``flush``: the gate's device-mode timer for tools that want a number rather than
    a pytest-benchmark run (``tools.tune``, ``tools.reducer_bench``). The calls run eagerly first
    (JIT and autotune outside the numbers); the :class:`Launch` says whether a graph ran."""
    import torch

    if not calls:
        raise ValueError("need at least one call to time")
    for call in calls:
        call()
    torch.cuda.synchronize()
    launch = build_launch(calls, graph=graph)
    return probe_median(launch.run, flush, calls=len(calls), rounds=rounds), launch


def calibrate_extra_pass(
    target_seconds: float, flush: Callable[[], None], device: Any
) -> ExtraPass:
    """An :class:`ExtraPass` whose device time is about ``target_seconds``."""
    small, large = 1 << 20, 64 << 20
    t_small = probe_median(ExtraPass(small, device), flush, calls=1, rounds=7)
    t_large = probe_median(ExtraPass(large, device), flush, calls=1, rounds=7)
    return ExtraPass(pass_bytes(target_seconds, (small, t_small), (large, t_large)), device)


def measure(
    benchmark: Any,
    target: Timed,
    *,
    setup: Callable[[], Any],
    teardown: Callable[..., None] | None = None,
    rounds: int,
    warmup_rounds: int,
) -> Any:
    """Run ``target`` under pytest-benchmark with the device clock: ``rounds`` samples kept.

    Refuses a benchmark whose timer is not :func:`device_clock` (a missing
    ``@pytest.mark.benchmark(timer=device_clock)`` would store host time under device names).
    """
    timer = getattr(benchmark, "_timer", None)
    if timer is not None and timer is not device_clock:
        raise RuntimeError(
            f"benchmark timer is {timer!r}, expected perfgate.timing.device_clock; "
            "mark the test @pytest.mark.benchmark(timer=perfgate.timing.device_clock)"
        )
    if target.clock is not CLOCK:
        raise ValueError("target must add to perfgate.timing.CLOCK, the clock device_clock reads")
    CLOCK.reset()
    return benchmark.pedantic(
        target,
        setup=setup,
        teardown=teardown,
        rounds=rounds,
        warmup_rounds=warmup_rounds,
        iterations=1,
    )
