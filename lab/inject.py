"""The injected slowdown of the power experiments: a device-side sleep inside the timed graph,
calibrated in a closed loop until its measured size is the level asked for.

A slowdown of a fraction ``f`` is a sleep kernel captured in the graph right after the kernel
calls, so one replay runs the calls and then the sleep, all inside the timed region. A sleep, not
extra memory traffic: it adds time without touching the caches or the bandwidth the kernel
competes for. ``torch.cuda._sleep(cycles)`` spins the GPU for a number of clock cycles; ROCm
builds of torch implement it with the same spin on the HIP clock.

**Why in the graph and why closed loop** (issue 11). The first version queued the sleep as a
separate launch after the replay and computed its cycles from a line through two long sleeps
(0.1 and 0.8 ms). On the H200 the true size, measured independently, ranged from +1.9% to +8%
for a "5%" slowdown: a kernel launched after a graph replay costs 2.6-3.1 us on its own, more
than 3% or 5% of a 40-50 us reducer replay, so every reducer level below 8% got the same one-cycle
sleep; and the line's intercept, extrapolated 50x below its points, was off by microseconds.
Judging such trials against their nominal level would be dishonest. Now:

1. the sleep is a node of the graph (a kernel node after kernel nodes costs far less than a
   launch after a replay);
2. the seconds per cycle come from two long sleeps (the slope is the clock, well measured);
3. the sleep's fixed cost is *measured*, not extrapolated: the injected graph and the plain
   graph are replayed interleaved (:func:`true_size`), the added time minus ``cycles`` x the
   slope is the fixed cost, and the cycles are corrected for it; repeated until the measured
   size is within ``tolerance`` (12%) of the level, at most ``max_steps`` times
   (:func:`closed_loop`, pure and tested on the CPU).

The result records every step, the achieved size and whether it converged; a level the fixed
cost alone exceeds (``floor_limited``) keeps one cycle and says so. The experiments still measure
the true size of every trial independently and print detection against it.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from perfgate import flags
from perfgate.measure.clock import flushed_rounds
from perfgate.measure.launch import probe_median

# Two points for the seconds per cycle: about 0.1 ms and 0.8 ms on a ~2 GHz clock, long enough
# that the event resolution (~0.5 us) is negligible, short enough to take milliseconds.
CALIBRATION_CYCLES = (200_000, 1_600_000)
# A measured size within this fraction of the level is close enough: 5% -> 4.4-5.6%.
TOLERANCE = 0.12
MAX_STEPS = 6
# Interleaved rounds a side per measurement of the true size: the median ratio's standard error
# is then ~0.2% at 1% sample noise, a small part of the tolerance at 3%.
SIZE_ROUNDS = 100


def sleep_cycles(target_seconds: float, small: tuple[int, float], large: tuple[int, float]) -> int:
    """Cycles of a sleep lasting ``target_seconds``, from two timed ``(cycles, seconds)`` sleeps.

    At least 1 cycle: a target below the launch floor still gets a sleep node, and the measured
    true size then says how much was really added."""
    return solve_line(target_seconds, small, large)


def seconds_per_cycle(small: tuple[int, float], large: tuple[int, float]) -> float:
    """The slope of the line through two timed ``(cycles, seconds)`` sleeps."""
    (c1, t1), (c2, t2) = small, large
    if not c2 > c1 > 0:
        raise ValueError(f"need 0 < small cycles < large cycles, got {c1} and {c2}")
    if not t2 > t1 > 0:
        raise ValueError(f"the longer sleep must take longer: got {t1!r} s and {t2!r} s")
    return (t2 - t1) / (c2 - c1)


class DeviceSleep:
    """A callable that queues a sleep of ``cycles`` GPU clock cycles on the current stream."""

    def __init__(self, cycles: int) -> None:
        if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 1:
            raise ValueError(f"cycles must be an int >= 1, got {cycles!r}")
        self.cycles = cycles

    def __call__(self) -> None:
        import torch

        torch.cuda._sleep(self.cycles)


@dataclass
class Calibration:
    """What the closed loop found for one level: the cycles kept and the size they measured."""

    level: float
    cycles: int
    achieved: float  # measured true size of the kept cycles, a fraction of the plain time
    converged: bool  # achieved within tolerance of the level
    floor_limited: bool  # one cycle already adds more than the level (the fixed cost alone)
    steps: list[tuple[int, float]] = field(default_factory=list)  # (cycles, measured size)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def closed_loop(
    level: float,
    plain_seconds: float,
    spc: float,
    measure: Callable[[int], float],
    *,
    tolerance: float = TOLERANCE,
    max_steps: int = MAX_STEPS,
) -> Calibration:
    """Cycles whose measured slowdown is ``level`` within ``tolerance`` (relative).

    ``measure(cycles)`` returns the true size (``median(injected) / median(plain) - 1``) of a
    sleep of that many cycles; ``plain_seconds`` is the plain time the level is a fraction of,
    ``spc`` the seconds per cycle. The model of the added time is ``fixed + cycles x spc``: each
    step measures, takes ``fixed`` as the measured added time minus ``cycles x spc`` (the mean
    over the steps so far, which averages out measurement noise), and solves for the cycles.
    Keeps the step closest to the level when none is within tolerance."""
    if not 0 < level < 1:
        raise ValueError(f"level must be a fraction in (0, 1), got {level!r}")
    for name, v in (("plain_seconds", plain_seconds), ("spc", spc), ("tolerance", tolerance)):
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
    target = level * plain_seconds
    cycles = max(1, round(target / spc))  # first guess: no fixed cost
    steps: list[tuple[int, float]] = []
    fixed: list[float] = []
    for _ in range(max_steps):
        size = measure(cycles)
        steps.append((cycles, size))
        if abs(size / level - 1) <= tolerance:
            break
        fixed.append(size * plain_seconds - cycles * spc)
        nxt = max(1, round((target - statistics.fmean(fixed)) / spc))
        if nxt == cycles:  # the model asks for what was just measured: no progress to make
            break
        cycles = nxt
    best_cycles, best = min(steps, key=lambda s: abs(s[1] / level - 1))
    return Calibration(
        level=level,
        cycles=best_cycles,
        achieved=best,
        converged=abs(best / level - 1) <= tolerance,
        floor_limited=best_cycles == 1 and best > level * (1 + tolerance),
        steps=steps,
    )


def timing_points(flush: Callable[[], None]) -> tuple[tuple[int, float], tuple[int, float]]:
    """Two timed long sleeps ``(cycles, seconds)`` (needs a GPU)."""
    points = []
    for cycles in CALIBRATION_CYCLES:
        seconds = probe_median(DeviceSleep(cycles), flush, calls=1, rounds=9)
        points.append((cycles, seconds))
    return points[0], points[1]


def true_size(
    plain: Callable[[], None],
    injected: Callable[[], None],
    flush: Callable[[], None],
    *,
    rounds: int = SIZE_ROUNDS,
) -> float:
    """``median(injected) / median(plain) - 1`` over ``rounds`` flushed rounds of each, in
    alternating order (ABBA), so that clock or temperature drift hits both alike (needs a GPU)."""
    work = {0: plain, 1: injected}
    samples: dict[int, list[float]] = {0: [], 1: []}
    for r in range(rounds):
        for side in (0, 1) if r % 2 == 0 else (1, 0):
            samples[side] += flushed_rounds(work[side], flush, 1)
    return statistics.median(samples[1]) / statistics.median(samples[0]) - 1


def describe(sleep: Any, calibration: Calibration | None = None) -> dict[str, Any]:
    """What a report records about an injection."""
    out: dict[str, Any] = {
        "kind": "device_sleep_in_graph",
        "cycles": getattr(sleep, "cycles", None),
    }
    if calibration is not None:
        out["calibration"] = calibration.as_dict()
    return out


# -- ``MXFP4_BENCH_INJECT_SLOWDOWN`` in a pytest benchmark run (lab.variants.harness_pass) ---
INJECT_ENV = "MXFP4_BENCH_INJECT_SLOWDOWN"


def slowdown_fraction(environ: Mapping[str, str] = os.environ) -> float:
    """The injected slowdown asked for with ``MXFP4_BENCH_INJECT_SLOWDOWN`` (0 when unset)."""
    return flags.number(environ, INJECT_ENV, "a fraction such as 0.05", 1.0)


def sleep_for(target_seconds: float, flush: Callable[[], None]) -> DeviceSleep:
    """A sleep of about ``target_seconds`` from the two timed long sleeps (open loop): the
    benchmark records its measured cost, so a report shows what was really injected."""
    return DeviceSleep(sleep_cycles(target_seconds, *timing_points(flush)))


def solve_line(
    target: float, small: tuple[int, float], large: tuple[int, float], *, minimum: int = 1
) -> int:
    """The whole ``x`` (at least ``minimum``) whose cost is ``target`` on the line ``a + b * x``
    through two timed points ``(x, seconds)``: the fixed cost ``a`` cannot be undercut."""
    (s1, t1), (s2, t2) = small, large
    if not s2 > s1 > 0:
        raise ValueError(f"need 0 < small size < large size, got {s1} and {s2}")
    if not t2 > t1 > 0:
        raise ValueError(f"the larger size must take longer: got {t1!r} s and {t2!r} s")
    if not target > 0:
        raise ValueError(f"target_seconds must be > 0, got {target!r}")
    slope = (t2 - t1) / (s2 - s1)
    intercept = t1 - slope * s1
    return max(minimum, round((target - intercept) / slope))
