"""The host timing mode's timer: host time per ``custom_kernel`` call, over a reference path.

A sample is the host time of a batch of back-to-back calls on an idle GPU, each call preceded by
a fixed reference path, and their ratio x 10 us (:class:`HostTimed`): the lent VM's CPU speed
moves by up to 1.8x, and the ratio cancels it. The plugin's harness runs it in ``host`` mode.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from perfgate.flags import number
from perfgate.measure.clock import CLOCK

INJECT_HOST_ENV = "MXFP4_BENCH_INJECT_HOST_US"


# Calls per sample: enough that perf_counter's resolution and the loop vanish (a sample spans
# about a millisecond), few enough that the launch queue never fills (two launches per call, far
# below the ~1000 a CUDA/HIP queue holds before a launch blocks), so a batch measures the host.
# Measured on the H200 (2026-12-01, 9 processes): batches of 64 and 256 gave the same per-call
# medians within 1%, and so did a batch queued behind a 4.5 ms GPU sleep: the GPU is not the bound.
HOST_BATCH = 64


# What a reference-normalised sample is expressed in: host time per call in units of the
# reference path, times 10 us (so a report reads like microseconds at a nominal CPU speed).
REFERENCE_SCALE_S = 10e-6


class HostTimed:
    """``calls`` back-to-back calls of ``work`` per invocation, cycling through ``arg_sets``;
    adds one sample to ``clock`` (perfgate.measure.clock's, which pytest-benchmark reads as the
    benchmark's timer). The GPU is idle when a batch starts (the harness synchronises in the
    untimed setup), so a batch never waits on it.

    Without ``reference`` a sample is host seconds per call. With ``reference`` (a call of fixed
    code outside the launcher, :func:`reference_path`), each call of ``work`` is preceded by one
    call of ``reference``, both timed, and the sample is ``t_work / t_reference`` x
    :data:`REFERENCE_SCALE_S`: the host time in units of the reference measured in the same
    microseconds. Why: on the lent H200 (a KVM guest) the CPU's speed moved by up to 1.8x over
    seconds (a fixed pure-Python loop took 60 or 100-115 us, in and between processes; pinning,
    gc and batch size changed nothing), so absolute host times of unchanged code differed by
    56-79% between processes, and only a reference that sees the same CPU speed cancels that.
    ``history`` keeps each invocation's (work, reference) seconds per call (reference None
    without one), for the report's plain microseconds.
    """

    def __init__(
        self,
        work: Callable[..., Any],
        arg_sets: list[tuple],
        *,
        calls: int = HOST_BATCH,
        clock: Any = None,
        now: Callable[[], float] | None = None,
        reference: Callable[[], Any] | None = None,
    ):
        if not arg_sets or calls < 1:
            raise ValueError(f"need input sets and calls >= 1, got {len(arg_sets)} and {calls}")
        if reference is not None and not callable(reference):
            raise TypeError(f"reference must be callable, got {type(reference).__name__}")
        self.work, self.calls, self.reference = work, calls, reference
        self.clock = CLOCK if clock is None else clock
        self.now = time.perf_counter if now is None else now
        self.sequence = [arg_sets[i % len(arg_sets)] for i in range(calls)]
        self.last: Any = None
        self.last_args: tuple = self.sequence[-1]
        self.history: list[tuple[float, float | None]] = []

    def __call__(self) -> Any:
        work, now, ref = self.work, self.now, self.reference
        if ref is None:
            start = now()
            for args in self.sequence:
                out = work(*args)
            elapsed = now() - start
            self.history.append((elapsed / self.calls, None))
            self.clock.add(elapsed / self.calls)
            self.last = out
            return out
        t_ref = t_work = 0.0
        for args in self.sequence:
            # interleaved call by call: both see the CPU speed of the same microseconds
            t0 = now()
            ref()
            t1 = now()
            out = work(*args)
            t2 = now()
            t_ref += t1 - t0
            t_work += t2 - t1
        if not t_ref > 0:
            raise RuntimeError(f"the reference path took {t_ref!r} s: the clock does not advance")
        self.history.append((t_work / self.calls, t_ref / self.calls))
        self.clock.add(t_work / t_ref * REFERENCE_SCALE_S)
        self.last = out
        return out


def reference_path(data: tuple, device: Any) -> Callable[[], Any]:
    """The host mode's reference: what any eager launcher of this call does, in fixed code
    outside ``kernels/``: read the operands' metadata in Python (a call key), allocate the
    output from the caching allocator, and launch one kernel through torch. It is made of the
    same kinds of work as a ``custom_kernel`` call (Python, the allocator, a driver launch), so
    a change of CPU speed moves both alike; it never changes with the code under test."""
    import torch

    tensors = tuple(t for t in data if isinstance(t, torch.Tensor))
    if len(tensors) < 2:
        raise ValueError("data must hold at least A and B as tensors (the leaderboard tuple)")
    shape = (tensors[0].shape[0], tensors[1].shape[0])
    bump = torch.zeros(16, dtype=torch.float32, device=device)

    def reference() -> Any:
        key = tuple((t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16) for t in tensors)
        out = torch.empty(shape, dtype=torch.bfloat16, device=device)
        bump.add_(1.0)
        return key, out

    return reference


def host_delay_seconds(environ: Any = None) -> float:
    """The host slowdown asked for with ``MXFP4_BENCH_INJECT_HOST_US`` (µs per call; 0 unset)."""
    environ = os.environ if environ is None else environ
    return number(environ, INJECT_HOST_ENV, "microseconds such as 5", 1e6) / 1e6


def with_host_delay(fn: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """``fn`` followed by ``seconds`` of pure host work (a spin: no GPU work, no sleep jitter)."""

    def slowed(*args: Any) -> Any:
        out = fn(*args)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        return out

    return slowed
