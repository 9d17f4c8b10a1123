"""What the process-level A/B adds to the measuring worker (:mod:`perfgate.measure.worker`).

- **Whole-call mode** (``--mode leaderboard``): a round is one ``custom_kernel(data)`` call (the
  case's ``Work.fn`` on one input set, rotating over the copies), timed by events around it after
  the leaderboard flush (:func:`perfgate.measure.flush.leaderboard_flush`: 2 GiB, longer than the
  host path), as the plugin's leaderboard mode times it. Every input set's output is checked once
  before any timing, and the last timed call's output after every block of rounds.
- **Reused calibrations**: a prepare may name, per injected level, the sleep cycles an earlier
  worker's closed loop found for that case (``"cycles": {"0.01": 1234}``). The worker then
  captures that sleep without calibrating again: a calibration is a property of the case on this
  GPU, and a closed loop in every one of 24 workers would cost more than their rounds. The trial
  still measures each worker's true size from its own streams (plain against injected).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfgate.measure import inject
from perfgate.measure.launch import probe_median
from perfgate.modes import WHOLE_CALL_MODE_NAMES

WHOLE_CALL_MODES = WHOLE_CALL_MODE_NAMES


class RotatingCall:
    """``fn(*arg_sets[i])`` for i = 0, 1, ... cyclically, then ``extra()`` when given (the
    injected sleep, inside the timed region); keeps the last output and its input set."""

    def __init__(
        self, fn: Callable[..., Any], arg_sets: list[tuple], extra: Callable[[], None] | None = None
    ) -> None:
        if not arg_sets:
            raise ValueError("need at least one input set to rotate over")
        self.fn, self.arg_sets, self.extra = fn, arg_sets, extra
        self.index = -1
        self.last: Any = None

    def __call__(self) -> None:
        self.index = (self.index + 1) % len(self.arg_sets)
        self.last = self.fn(*self.arg_sets[self.index])
        if self.extra is not None:
            self.extra()


class CallBench:
    """One case timed a call at a time: the plain rotating call and one per injected level."""

    calls = 1

    def __init__(
        self, work: Any, plain: RotatingCall, injected: dict[str, RotatingCall], plain_name: str
    ) -> None:
        self.refs, self.check_one = work.refs, work.check
        self.plain, self.injected, self.plain_name = plain, injected, plain_name
        self._used: list[RotatingCall] = []

    def work(self, variant: str) -> RotatingCall:
        call = self.plain if variant == self.plain_name else self.injected[variant]  # KeyError
        self._used.append(call)
        return call

    def check(self) -> None:
        """The last timed output of every call used since the previous check, against its
        input set's reference (AssertionError names the set)."""
        import torch

        torch.cuda.synchronize()
        for call in dict.fromkeys(self._used):
            if call.index >= 0:
                self.check_one(call.last, self.refs[call.index], f"timed call on set {call.index}")
        self._used.clear()


def prepare_whole_call(
    work: Any,
    levels: dict[str, float],
    flush: Callable[[], None],
    cycles: dict[str, int],
    plain_name: str = "plain",
) -> tuple[CallBench, dict[str, Any]]:
    """A :class:`CallBench` for ``work`` (perfgate.measure.harness.Work) and its record: every
    input set's output checked first, then per level (by variant name) a sleep after the call,
    calibrated in the closed loop unless ``cycles`` gives it."""
    import torch

    for i, (args, ref) in enumerate(zip(work.arg_sets, work.refs, strict=True)):
        out = work.fn(*args)
        torch.cuda.synchronize()
        work.check(out, ref, f"input set {i}")
    plain = RotatingCall(work.fn, work.arg_sets)
    info: dict[str, Any] = {"calls": 1, "launch": "direct", "sets": len(work.arg_sets)}
    injected: dict[str, RotatingCall] = {}
    replay = spc = 0.0
    if any(name not in cycles for name in levels):  # some level to calibrate here
        replay = probe_median(plain, flush, calls=1, rounds=15)
        spc = inject.seconds_per_cycle(*inject.timing_points(flush))
        info.update(plain_call_s=replay, seconds_per_cycle=spc)
        for name, level in levels.items():

            def with_sleep(n: int) -> RotatingCall:
                return RotatingCall(work.fn, work.arg_sets, inject.DeviceSleep(n))

            def measure(n: int) -> float:
                return inject.true_size(plain, with_sleep(n), flush)

            n, calibration = calibrated(level, replay, spc, measure, cycles.get(name))
            injected[name] = with_sleep(n)
            info[name] = describe(n, calibration) | {"launch": "direct"}
    return CallBench(work, plain, injected, plain_name), info


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
