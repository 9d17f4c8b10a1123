"""The lab's variants (:mod:`perfgate.variants`): a case's calls with an injected device sleep
after them, inside the timed region (:mod:`lab.inject`).

perfgate imports this module by name, in the processes that time, where
``PERFGATE_VARIANTS=lab.variants``: ``python -m lab experiment`` sets it for its B workers, and
a pytest benchmark run with it set and ``MXFP4_BENCH_INJECT_SLOWDOWN=F`` times every benchmark
with a sleep of about F of its time after the calls.

- :func:`harness_pass`: the pytest harness's pass, open loop (two timed long sleeps give the
  cycles); each benchmark records what it asked for and what the sleep cost
  (``injected_fraction_requested``, ``injected_cycles``, ``injected_fraction_estimated``), and
  ``perfgate update-baselines`` refuses such results.
- :func:`prepare`: the A/B worker's variants, one per level, each sleep calibrated in the closed
  loop of :func:`lab.inject.closed_loop` until its measured size is the level, or given by an
  earlier worker's calibration of the case (``cycles``): a calibration is a property of the case
  on this GPU, and a closed loop in every one of 24 workers would cost more than their rounds.
  The trial still measures each worker's true size from its own streams (plain against
  injected).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lab import inject
from perfgate.measure.launch import probe_median


class SlowdownPass:
    """The pytest harness's extra pass: a sleep of ``fraction`` of the calls' time."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction

    def make(self, plain_seconds: float, flush: Callable[[], None]) -> inject.DeviceSleep:
        return inject.sleep_for(self.fraction * plain_seconds, flush)

    def record(
        self, extra: inject.DeviceSleep, plain_seconds: float, flush: Callable[[], None]
    ) -> dict[str, Any]:
        cost = probe_median(extra, flush, calls=1, rounds=7)
        return {
            "injected_fraction_requested": self.fraction,
            "injected_cycles": extra.cycles,
            "injected_fraction_estimated": cost / plain_seconds,
        }


def harness_pass() -> SlowdownPass | None:
    """The pass ``MXFP4_BENCH_INJECT_SLOWDOWN`` asks for, or None (unset or 0)."""
    fraction = inject.slowdown_fraction()
    return SlowdownPass(fraction) if fraction else None


def prepare(unit: Any, levels: dict[str, float], cycles: dict[str, int]) -> tuple[dict, dict]:
    """The worker's injected variants of ``unit`` (perfgate.variants.Unit) by name, and the
    record of each level (cycles, the calibration or ``reused``, the launch)."""
    if unit.kind == "graph":
        return _graph_variants(unit, levels, cycles)
    if unit.kind == "call":
        return _call_variants(unit, levels, cycles)
    raise ValueError(f"unit kind must be graph or call, got {unit.kind!r}")


def _graph_variants(unit: Any, levels: dict[str, float], cycles: dict[str, int]):
    """Device mode: per level, the calls and the sleep captured in one graph."""
    import torch

    from perfgate.measure.harness import check_all

    plain, work, flush = unit.plain, unit.work, unit.flush
    info: dict[str, Any] = {}
    injected = {}
    replay = probe_median(plain.run, flush, calls=1, rounds=15)
    info["plain_replay_s"] = replay
    spc = inject.seconds_per_cycle(*inject.timing_points(flush))
    info["seconds_per_cycle"] = spc
    for name, level in levels.items():
        reused = cycles.get(name)
        launch, calibration = _calibrated_graph(unit, replay, spc, level, reused)
        torch.cuda.synchronize()
        check_all(launch.outputs, work.refs, work.check, f"{launch.kind} launch, {level:g}")
        injected[name] = launch
        n = calibration.cycles if calibration else reused
        info[name] = describe(n, calibration) | {"launch": launch.kind}
    return injected, info


def _calibrated_graph(unit: Any, replay: float, spc: float, level: float, reused=None):
    """The injected launch whose measured slowdown is ``level`` (inject.closed_loop): each
    step captures the calls and a sleep of the step's cycles, and measures it against the
    plain graph by interleaved replays. Only the kept step's graph stays alive."""
    if reused is not None:  # an earlier worker's calibration of this case
        n, _ = calibrated(level, replay, spc, lambda n: 0.0, reused)
        return unit.with_extra(inject.DeviceSleep(n)), None
    graphs: dict[int, Any] = {}

    def measure(n: int) -> float:
        graphs.clear()  # one injected graph alive at a time (the previous step's is dropped)
        graphs[n] = unit.with_extra(inject.DeviceSleep(n))
        return inject.true_size(unit.plain.run, graphs[n].run, unit.flush)

    calibration = inject.closed_loop(level, replay, spc, measure)
    if calibration.cycles not in graphs:
        measure(calibration.cycles)  # the kept step was an earlier one: capture it again
    return graphs[calibration.cycles], calibration


def _call_variants(unit: Any, levels: dict[str, float], cycles: dict[str, int]):
    """Whole-call modes: per level, one call and the sleep after it, timed together."""
    plain, flush = unit.plain, unit.flush
    info: dict[str, Any] = {}
    injected = {}
    replay = spc = 0.0
    if any(name not in cycles for name in levels):  # some level to calibrate here
        replay = probe_median(plain, flush, calls=1, rounds=15)
        spc = inject.seconds_per_cycle(*inject.timing_points(flush))
        info.update(plain_call_s=replay, seconds_per_cycle=spc)
    for name, level in levels.items():

        def with_sleep(n: int):
            return unit.with_extra(inject.DeviceSleep(n))

        def measure(n: int) -> float:
            return inject.true_size(plain, with_sleep(n), flush)

        n, calibration = calibrated(level, replay, spc, measure, cycles.get(name))
        injected[name] = with_sleep(n)
        info[name] = describe(n, calibration) | {"launch": "direct"}
    return injected, info


def calibrated(
    level: float,
    plain_seconds: float,
    spc: float,
    measure: Callable[[int], float],
    reused: int | None,
) -> tuple[int, inject.Calibration | None]:
    """(cycles, calibration) of ``level``: the closed loop's, or ``reused`` cycles (an earlier
    worker's calibration of the case) with no calibration of its own."""
    if reused is None:
        calibration = inject.closed_loop(level, plain_seconds, spc, measure)
        return calibration.cycles, calibration
    if isinstance(reused, bool) or not isinstance(reused, int) or reused < 1:
        raise ValueError(f"cycles for level {level:g} must be an int >= 1, got {reused!r}")
    return reused, None


def describe(cycles: int, calibration: inject.Calibration | None) -> dict[str, Any]:
    """The record of one injected level: calibrated here, or reused from an earlier worker."""
    out = inject.describe(inject.DeviceSleep(cycles), calibration)
    return out if calibration is not None else out | {"reused": True}
