"""What the process-level A/B adds to the measuring worker (:mod:`perfgate.measure.worker`).

- **Whole-call mode** (``--mode leaderboard``): a round is one ``custom_kernel(data)`` call (the
  case's ``Work.fn`` on one input set, rotating over the copies), timed by events around it after
  the leaderboard flush (:func:`perfgate.measure.flush.leaderboard_flush`: 2 GiB, longer than the
  host path), as the plugin's leaderboard mode times it. Every input set's output is checked once
  before any timing, and the last timed call's output after every block of rounds.
- **Variants** (the lab's experiment only): per level, the same call with an extra pass after
  it inside the timed region, from the provider that ``PERFGATE_VARIANTS`` names
  (:mod:`perfgate.variants`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfgate import variants


class RotatingCall:
    """``fn(*arg_sets[i])`` for i = 0, 1, ... cyclically, then ``extra()`` when given (a
    variant's extra pass, inside the timed region); keeps the last output and its input set."""

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
    """One case timed a call at a time: the plain rotating call and one per variant."""

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
    input set's output checked first, then per level (by variant name) the provider's variant
    (perfgate.variants), ``cycles`` handed to it."""
    import torch

    for i, (args, ref) in enumerate(zip(work.arg_sets, work.refs, strict=True)):
        out = work.fn(*args)
        torch.cuda.synchronize()
        work.check(out, ref, f"input set {i}")
    plain = RotatingCall(work.fn, work.arg_sets)
    info: dict[str, Any] = {"calls": 1, "launch": "direct", "sets": len(work.arg_sets)}
    injected: dict[str, RotatingCall] = {}
    if levels:
        unit = variants.Unit("call", plain, work, flush,
                             lambda extra: RotatingCall(work.fn, work.arg_sets, extra))  # fmt: skip
        injected, more = variants.prepare(unit, levels, cycles)
        info.update(more)
    return CallBench(work, plain, injected, plain_name), info
