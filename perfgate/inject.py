"""The injected slowdown of the power experiments: a calibrated device-side sleep.

A slowdown of a fraction ``f`` is a sleep kernel of ``f`` x the undisturbed time, queued after
the kernel calls inside the timed region (inside the graph in device mode). A sleep, not extra
memory traffic: it adds time without touching the caches or the bandwidth the kernel competes
for, so what is added is only time. ``torch.cuda._sleep(cycles)`` spins the GPU for a number of
clock cycles; ROCm builds of torch implement it with the same spin on the HIP clock.

The cycle count is fitted, not assumed: two sleeps are timed with the gate's own timer and a
line through them (launch floor + cycles x seconds per cycle) gives the cycles for a target
time. The experiments measure the true size independently (interleaved replays with and without
the sleep) and print it beside the detection rate, so a calibration error shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfgate import timing

# Two calibration points: about 0.1 ms and 0.8 ms on a ~2 GHz clock, long enough that the event
# resolution (~0.5 us) is negligible, short enough to calibrate in milliseconds.
CALIBRATION_CYCLES = (200_000, 1_600_000)


def sleep_cycles(target_seconds: float, small: tuple[int, float], large: tuple[int, float]) -> int:
    """Cycles of a sleep lasting ``target_seconds``, from two timed ``(cycles, seconds)`` sleeps.

    At least 1 cycle: a target below the launch floor still gets a sleep node, and the measured
    true size then says how much was really added."""
    return timing.pass_bytes(target_seconds, small, large, minimum=1, align=1)


class DeviceSleep:
    """A callable that queues a sleep of ``cycles`` GPU clock cycles on the current stream."""

    def __init__(self, cycles: int) -> None:
        if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 1:
            raise ValueError(f"cycles must be an int >= 1, got {cycles!r}")
        self.cycles = cycles

    def __call__(self) -> None:
        import torch

        torch.cuda._sleep(self.cycles)


def calibrate(target_seconds: float, flush: Callable[[], None]) -> DeviceSleep:
    """A :class:`DeviceSleep` of about ``target_seconds`` (needs a GPU)."""
    points: list[tuple[int, float]] = []
    for cycles in CALIBRATION_CYCLES:
        seconds = timing.probe_median(DeviceSleep(cycles), flush, calls=1, rounds=9)
        points.append((cycles, seconds))
    return DeviceSleep(sleep_cycles(target_seconds, points[0], points[1]))


def describe(sleep: Any) -> dict[str, Any]:
    """What a report records about an injection."""
    return {"kind": "device_sleep", "cycles": getattr(sleep, "cycles", None)}
