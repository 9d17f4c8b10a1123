"""How a batch of calls runs: one CUDA/HIP graph over the rotated copies, or direct launches.

:func:`median_per_call` is the gate's device-mode timer for tools that want a number rather than a
pytest-benchmark run (``python -m tools.tune``, ``python -m lab.scripts.reducer_bench``), so tuned
tables are made with the timer that gates them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfgate.measure.clock import flushed_rounds


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
    return statistics.median(flushed_rounds(run, flush, rounds, calls=calls))


def median_per_call(
    calls: Sequence[Callable[[], Any]],
    flush: Callable[[], None],
    *,
    rounds: int,
    graph: bool = True,
) -> tuple[float, Launch]:
    """Median per-call device seconds of ``calls`` (one per input copy) launched together, each
    round after ``flush``: the gate's device-mode timer for tools that want a number rather than
    a pytest-benchmark run (``tools.tune``, ``lab.scripts.reducer_bench``). The calls run eagerly first
    (JIT and autotune outside the numbers); the :class:`Launch` says whether a graph ran."""
    import torch

    if not calls:
        raise ValueError("need at least one call to time")
    for call in calls:
        call()
    torch.cuda.synchronize()
    launch = build_launch(calls, graph=graph)
    return probe_median(launch.run, flush, calls=len(calls), rounds=rounds), launch
