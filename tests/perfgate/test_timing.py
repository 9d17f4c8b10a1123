"""perfgate.measure.timing on the CPU: the device clock's arithmetic with fake events, flush and rotation
sizing from device facts, the injected-slowdown sizing, and pytest-benchmark really storing what
the fake device measured."""

from __future__ import annotations

import inspect
import math
import re
import time
from pathlib import Path

import pytest

from kernels.device import H200, MI355X
from perfgate.measure import launch as launch_module
from perfgate.measure.clock import (
    SECONDS_QUANTUM,
    DeviceClock,
    Timed,
    measure,
    quantize_seconds,
)
from perfgate.measure.flush import CacheFlush, flush_bytes, gate_flush, rotation_count
from perfgate.measure.launch import Launch, median_per_call

pytest_plugins = ["pytester"]

# torch reports only the 4 MB L2 of MI355X; device.py adds the 256 MB Infinity Cache


class FakeDevice:
    """A device timeline: work advances ``now_ms``; events read it when recorded."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.synchronized = 0

    def event(self) -> FakeEvent:
        return FakeEvent(self)


class FakeEvent:
    def __init__(self, device: FakeDevice) -> None:
        self.device = device
        self.t_ms: float | None = None

    def record(self) -> None:
        self.t_ms = self.device.now_ms

    def synchronize(self) -> None:
        self.device.synchronized += 1

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.t_ms is not None and end.t_ms is not None, "event not recorded"
        return end.t_ms - self.t_ms


# -- the clock ----------------------------------------------------------------------------------
def test_clock_differences_are_exactly_the_added_samples():
    clock = DeviceClock()
    # 0.1 s first: without the quantum, (0.1 + x) - 0.1 != x in float64 for these x
    samples = [0.1, 3.3e-6, 1.7e-5, 4.1e-6, 1e-9]
    for x in samples:
        before = clock.read()
        clock.add(x)
        assert clock.read() - before == quantize_seconds(x)
        assert abs(quantize_seconds(x) - x) <= SECONDS_QUANTUM / 2


@pytest.mark.parametrize(
    "bad, exc",
    [
        (-1e-9, ValueError),  # time never runs backwards
        (math.nan, ValueError),  # a failed event read must not poison the statistics
        (math.inf, ValueError),
        (True, TypeError),  # bool is an int subclass; refuse it anyway
        ("1e-6", TypeError),
    ],
)
def test_clock_rejects_bad_samples(bad, exc):
    clock = DeviceClock()
    with pytest.raises(exc, match="seconds"):
        clock.add(bad)
    assert clock.read() == 0.0


def test_clock_refuses_to_lose_exactness_and_resets():
    clock = DeviceClock()
    clock.add(4095.0)  # just under 2**12 s: still exact
    with pytest.raises(OverflowError, match="reset"):
        clock.add(1.0)  # reaching 2**12 s would make differences inexact
    clock.reset()
    assert clock.read() == 0.0


# -- events around the work ---------------------------------------------------------------------
def test_timed_adds_elapsed_device_time_per_call():
    dev, clock = FakeDevice(), DeviceClock()

    def work(x):
        dev.now_ms += 0.25  # the graph replay: 4 calls of 62.5 us
        return x * 2

    timed = Timed(work, calls=4, clock=clock, event=dev.event)
    dev.now_ms = 10.0  # a busy device before: only the time between the events counts
    assert timed(21) == 42
    assert timed.last == 42
    assert clock.read() == quantize_seconds(0.25 / 1000 / 4)
    assert dev.synchronized == 1  # the end event is waited for before reading it


@pytest.mark.parametrize("calls", [0, -1, 1.5, True])
def test_timed_rejects_bad_call_counts(calls):
    with pytest.raises(ValueError, match="calls"):
        Timed(lambda: None, calls=calls)


def test_timed_rejects_non_callable():
    with pytest.raises(TypeError, match="work"):
        Timed(42)


_BENCH_TEST = """
from __future__ import annotations

import time
from pathlib import Path

import pytest

from perfgate.measure.clock import CLOCK, Timed, device_clock, measure, quantize_seconds

{fakes}


@pytest.mark.benchmark(timer=device_clock)
def test_device_time_not_host_time(benchmark):
    assert not benchmark.disabled  # a disabled benchmark would measure nothing
    dev = FakeDevice()
    script = iter([0.5, 0.25, 0.125, 1.0, 0.75])  # ms per round; warm-up first
    setups = []

    def work():
        dev.now_ms += next(script)
        time.sleep(0.002)  # host time that must not reach the samples

    target = Timed(work, event=dev.event)
    CLOCK.add(1.0)  # leftovers from an earlier benchmark: measure() resets
    measure(benchmark, target, setup=lambda: setups.append(1), rounds=4, warmup_rounds=1)
    assert benchmark.stats.stats.data == [
        quantize_seconds(ms / 1000) for ms in (0.25, 0.125, 1.0, 0.75)
    ]
    assert len(setups) == 5  # the flush ran before every round, warm-up included
"""


def test_pytest_benchmark_stores_device_time_not_host_time(pytester, monkeypatch):
    """The whole path: marker timer -> pedantic rounds -> stats.data == the device samples.

    Run in an inner pytest session: pytest-benchmark disables itself in any process where xdist
    is active (``-n``, or ``PYTEST_XDIST_WORKER`` in the environment), which used to turn this
    test into a silent skip under ``-n``. The inner session has no xdist, so it runs everywhere.
    """
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    fakes = "\n\n".join(inspect.getsource(c) for c in (FakeDevice, FakeEvent))
    pytester.makepyfile(test_bench=_BENCH_TEST.format(fakes=fakes))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-q")
    result.assert_outcomes(passed=1)


def test_measure_refuses_a_host_timer():
    class HostTimedBenchmark:
        _timer = time.perf_counter

        def pedantic(self, *a, **k):
            raise AssertionError("must not run")

    with pytest.raises(RuntimeError, match="device_clock"):
        measure(
            HostTimedBenchmark(),
            Timed(lambda: None),
            setup=lambda: None,
            rounds=2,
            warmup_rounds=0,
        )


# -- cache flush and rotation sizing from device facts ---------------------------------------
@pytest.mark.parametrize(
    "info, expected",
    [
        (H200, 120 * 2**20),  # twice the 60 MB L2
        (MI355X, 512 * 2**20),  # twice the Infinity Cache, not the 4 MB L2
    ],
)
def test_flush_is_twice_the_last_level_cache(info, expected):
    assert flush_bytes(info.last_level_cache_bytes) == expected


def test_gate_flush_is_the_flush_policy():
    flush = gate_flush(4096, "cpu")
    assert isinstance(flush, CacheFlush)
    assert flush.nbytes == flush_bytes(4096) == 8192
    flush()
    flush()
    assert flush._buffer.unique().tolist() == [2]  # a new value each time: a real write
    assert flush.hold is None  # no GPU queue to hold on a CPU


def test_flush_holds_the_gpu_after_its_write(monkeypatch):
    # The hold keeps the GPU busy until the CPU has queued the timed work: it must come after
    # the write (a hold before it would let the GPU idle again), on every call.
    import torch

    order = []
    flush = CacheFlush(16, "cpu", hold=lambda: order.append(("hold", flush._count)))
    real_fill = torch.Tensor.fill_
    monkeypatch.setattr(
        torch.Tensor, "fill_", lambda t, v: (order.append(("fill", v)), real_fill(t, v))[1]
    )
    flush()
    flush()
    assert order == [("fill", 1), ("hold", 1), ("fill", 2), ("hold", 2)]
    with pytest.raises(TypeError, match="hold must be callable or None, got int"):
        CacheFlush(16, "cpu", hold=5)


# SM clocks from the vendors' figures, not from perfgate: the H200's 1980 MHz boost clock
# (/work/shared/docs/perf-methodology.md) and the MI355X's 2.4 GHz (gfx950-reference-figures.md)
CLOCK_HZ = {"H200": 1.98e9, "MI355X": 2.4e9}


def test_the_flush_holds_a_gpu_for_the_time_the_docs_state(monkeypatch):
    # what the hold holds: cycles of torch.cuda._sleep, which at each GPU's clock must be the
    # ~250 us (H200) and ~210 us (MI355X) of docs/perfgate-compare.md: far longer than the CPU
    # needs to queue a replay (a few us), far shorter than a round would notice
    import torch

    slept = []
    monkeypatch.setattr(torch.cuda, "_sleep", slept.append)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: torch.zeros(4, dtype=torch.int32))
    flush = gate_flush(4096, "cuda")
    flush()
    flush()
    assert len(slept) == 2 and slept[0] == slept[1] and isinstance(slept[0], int)
    doc = (Path(__file__).parents[2] / "docs" / "perfgate-compare.md").read_text()
    stated = re.search(r"about\s+(\d+)\s+us on the H200, (\d+) us on the MI355X", doc)
    assert stated, "docs/perfgate-compare.md no longer states the hold's length"
    for gpu, us in zip(("H200", "MI355X"), map(int, stated.groups()), strict=True):
        held_us = slept[0] / CLOCK_HZ[gpu] * 1e6
        assert held_us == pytest.approx(us, rel=0.03), (gpu, held_us, us)
        assert 150 < held_us < 400, (gpu, held_us)


def test_median_per_call_warms_up_then_times_one_launch_after_flushes(monkeypatch):
    """The tools' timer: eager calls (JIT), then the gate's launch and flushed median."""
    import torch

    ran: list = []
    calls = [lambda i=i: ran.append(i) for i in range(3)]
    launch = Launch("graph", lambda: ran.append("replay"), [])

    def fake_build(got_calls, *, graph):
        ran.append(("build", list(got_calls) == calls, graph))
        return launch

    def fake_probe(run, flush, *, calls, rounds):
        ran.append(("probe", run is launch.run, flush, calls, rounds))
        return 1.5e-6

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: ran.append("sync"))
    monkeypatch.setattr(launch_module, "build_launch", fake_build)
    monkeypatch.setattr(launch_module, "probe_median", fake_probe)
    assert median_per_call(calls, "flush", rounds=7, graph=False) == (1.5e-6, launch)
    assert ran == [0, 1, 2, "sync", ("build", True, False), ("probe", True, "flush", 3, 7)]
    with pytest.raises(ValueError, match="at least one call"):
        median_per_call([], "flush", rounds=7)


def test_flush_refuses_what_cannot_flush():
    with pytest.raises(ValueError, match="interpreter"):
        flush_bytes(0)  # the interpreter's device facts: no cache, no benchmark
    with pytest.raises(ValueError, match="factor"):
        flush_bytes(2**20, factor=1)  # exactly the cache leaves lines behind
    with pytest.raises(TypeError, match="last_level_cache_bytes"):
        flush_bytes(2.0**20)


@pytest.mark.parametrize(
    "set_bytes, cache_bytes, expected",
    [
        (100 * 2**20, 60 * 2**20, 4),  # one set exceeds the cache: the minimum for resolution
        (15 * 2**20, 60 * 2**20, 4),  # exactly 4 sets fill the cache
        (15 * 2**20 - 1, 60 * 2**20, 5),  # one byte short per set: a fifth copy is needed
        (6 * 2**20, 60 * 2**20, 10),  # 10 copies exceed it
        (737_280, 256 * 2**20, 16),  # (4, 2880, 512) on MI355X would need 365: capped
    ],
)
def test_rotation_count(set_bytes, cache_bytes, expected):
    assert rotation_count(set_bytes, cache_bytes) == expected


def test_rotation_count_rejects_bad_sizes():
    with pytest.raises(ValueError, match="set_bytes"):
        rotation_count(0, 2**20)
    with pytest.raises(ValueError, match="minimum"):
        rotation_count(1, 2**20, minimum=5, maximum=4)


def test_each_mode_gets_the_flush_it_names(monkeypatch):
    from perfgate import modes
    from perfgate.measure import flush

    made = []
    monkeypatch.setattr(flush, "gate_flush", lambda llc, dev: made.append(("gate", llc, dev)))
    monkeypatch.setattr(
        flush, "leaderboard_flush", lambda llc, dev: made.append(("leaderboard", llc, dev))
    )
    for mode in modes.MODES:
        flush.for_mode(mode, 123, "cpu")
    assert made == [("gate", 123, "cpu"), ("leaderboard", 123, "cpu"), ("gate", 123, "cpu")]
    assert [m.name for m in modes.MODES] == ["device", "leaderboard", "host"]
    odd = modes.Mode("odd", "a mode with an unknown flush", flush_kind="none")
    with pytest.raises(ValueError, match="mode odd: flush_kind must be one of gate, leaderboard"):
        flush.for_mode(odd, 123, "cpu")
