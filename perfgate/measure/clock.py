"""The device clock for pytest-benchmark, and the one flushed-round loop.

pytest-benchmark times a round as ``timer()`` after the call minus ``timer()`` before it. Here the
timer is :func:`device_clock`, whose reading is *cumulative device seconds*: the benchmarked
callable (a :class:`Timed`) records two CUDA/HIP events around its work, synchronises, and adds
the elapsed event time to the clock. The difference pytest-benchmark takes is then exactly the
device time of that round, so its rounds, statistics and JSON (``stats.data``) hold device time.
A benchmark opts in with ``@pytest.mark.benchmark(timer=perfgate.measure.clock.device_clock)``,
the hook pytest-benchmark supports per test (its ``--benchmark-timer`` accepts only ``time.*``).

Outside pytest-benchmark (the A/B workers, the injection's calibration, the tools) rounds are
taken by :func:`flushed_rounds`: the same flush before each round, the same events around it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# Samples are stored as multiples of 2**-40 s (about 0.9 ps, far below event resolution). With
# the clock reset per benchmark, every reading stays below 2**12 s, so sums and the differences
# pytest-benchmark takes are exact in float64: a round's sample is exactly what was measured.
SECONDS_QUANTUM = 2.0**-40


_EXACT_LIMIT_S = 2.0**12


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
            f"benchmark timer is {timer!r}, expected perfgate.measure.clock.device_clock; "
            "mark the test @pytest.mark.benchmark(timer=perfgate.measure.clock.device_clock)"
        )
    if target.clock is not CLOCK:
        raise ValueError(
            "target must add to perfgate.measure.clock.CLOCK, the clock device_clock reads"
        )
    CLOCK.reset()
    return benchmark.pedantic(
        target,
        setup=setup,
        teardown=teardown,
        rounds=rounds,
        warmup_rounds=warmup_rounds,
        iterations=1,
    )


def flushed_rounds(
    work: Callable[[], Any],
    flush: Callable[[], None],
    rounds: int,
    *,
    calls: int = 1,
    clock: DeviceClock | None = None,
) -> list[float]:
    """``rounds`` samples of ``work``, each after ``flush``: per-call device seconds (``calls``
    kernel calls per invocation). The one round loop outside pytest-benchmark, so that the A/B
    workers, the injection's calibration and the tools time a round as the plugin does."""
    clock = DeviceClock() if clock is None else clock
    timed = Timed(work, calls=calls, clock=clock)
    samples = []
    for _ in range(rounds):
        flush()
        before = clock.read()
        timed()
        samples.append(clock.read() - before)
    return samples
