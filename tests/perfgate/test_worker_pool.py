"""The A/B's workers started ahead (``perfgate.measure.ab.WorkerPool``): when the next look's
wave starts, that it is waited for before any round is timed, that unused workers are closed, and
that a killed orchestrator leaves no worker running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from perfgate.gate import paths
from perfgate.gate import process_ab as pa
from perfgate.measure import ab as ab_measure
from perfgate.measure import interleave
from tests.perfgate.test_ab import SPECS, FakeSide


class ReadySide(FakeSide):
    """A fake worker that also logs when it is waited for; ``dies`` fails its start-up."""

    def __init__(self, *args, dies=False, **kw):
        super().__init__(*args, **kw)
        self.dies = dies
        self.order.append((self.label, "start"))

    def wait_ready(self):
        self.order.append((self.label, "ready"))
        if self.dies:
            raise interleave.WorkerError(f"{self.label}: worker exited (1) before it was ready")


def _start(order, started, *, factors=None, dies=()):
    def start(spec, index):
        name = f"{spec.label}{index + 1}"
        side = ReadySide(name, (factors or {}).get(spec.label, {}), index, order,
                         dies=name in dies)  # fmt: skip
        started.append(side)
        return side

    return start


def test_the_next_wave_warms_up_beside_this_one_and_is_ready_before_any_round():
    order, started = [], []
    design = pa.Design(processes=(2, 4), rounds=20)
    cases = [{"name": "x"}, {"name": "y"}]
    slower = {"head": {"x": 1.1, "y": 1.1}}
    decisions, _ = ab_measure.measure_ab(
        SPECS, cases, design, _start(order, started, factors=slower)
    )
    assert all(d.look == 1 for d in decisions.values())  # decided at once: wave 2 unused
    events = [(w, what) for w, what, *_ in order]
    first = ["base1", "base2", "head1", "head2"]
    ahead = ["base3", "base4", "head3", "head4"]
    # this look's workers started, the next wave started beside them, then this look's waited
    # for ...
    assert events[:4] == [(w, "start") for w in first]
    assert events[4:8] == [(w, "start") for w in ahead]
    assert sorted(events[8:12]) == sorted((w, "ready") for w in first)
    # ... before the first prepare; the next wave waited for before the first round
    first_prepare = events.index(("base1", "prepare"))
    first_round = next(i for i, (_, what) in enumerate(events) if what == "x")
    assert first_prepare == 12
    readies = [i for i, (w, what) in enumerate(events) if what == "ready" and w in ahead]
    assert len(readies) >= 4 and max(readies[:4]) < first_round
    # never prepared, never measured, closed
    assert not [e for e in events if e[0] in ahead and e[1] not in ("start", "ready", "close")]
    assert all(s.closed for s in started) and len(started) == 8


def test_a_later_look_takes_the_workers_started_ahead():
    order, started = [], []
    design = pa.Design(processes=(2, 4), rounds=20)
    # a 4% per-process spread at 2 + 2 processes leaves "x" undecided: look 2 needs 2 + 2 more
    start = _start(order, started)

    def noisy(spec, index):
        side = start(spec, index)
        side.level = 1.0 + 0.04 * (-1) ** index
        return side

    decisions, store = ab_measure.measure_ab(SPECS, [{"name": "x"}], design, noisy)
    assert decisions["x"].look == 2
    assert len(started) == 8  # no worker started twice: look 2 took the wave started ahead
    assert len(store["base"]["x"]["plain"]) == 4


def test_a_wave_too_large_to_hold_starts_at_its_own_look():
    order, started = [], []
    big = ab_measure.AHEAD_MAX + 1
    design = pa.Design(processes=(2, 2 + big), rounds=20)
    ab_measure.measure_ab(SPECS, [{"name": "x"}], design, _start(order, started))
    assert len(started) == 4  # nothing started ahead
    assert ab_measure.next_wave(design, 2) == big and ab_measure.next_wave(design, 2 + big) == 0


def test_a_worker_started_ahead_that_dies_fails_the_ab_in_one_line_and_closes_every_worker():
    order, started = [], []
    design = pa.Design(processes=(2, 4), rounds=20)
    start = _start(order, started, dies={"head3"})
    with pytest.raises(interleave.WorkerError, match="head3: worker exited"):
        ab_measure.measure_ab(SPECS, [{"name": "x"}], design, start)
    assert len(started) == 8 and all(s.closed for s in started)


_ORCHESTRATOR = """
import json, sys, time
sys.path.insert(0, {repo!r})
from perfgate.gate import paths
from perfgate.measure import ab, interleave
spec = ab.SideSpec("base", paths.REPO)
pool = ab.WorkerPool(lambda s, i: interleave.SideProcess(f"{{s.label}}{{i + 1}}", s.root), [spec])
pool.plan(0, 2)
pool.ahead()
workers = [pool.take(spec, 0), pool.take(spec, 1)]
pool.plan(2, 2)
pool.ahead()
pids = [w.proc.pid for w in workers] + [w.proc.pid for w in pool._ahead.values()]
print(json.dumps(pids), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has exited
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_killed_orchestrator_leaves_no_worker_running():
    code = textwrap.dedent(_ORCHESTRATOR.format(repo=str(paths.REPO)))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              cwd=paths.REPO)  # fmt: skip
    try:
        pids = json.loads(parent.stdout.readline())
        assert len(pids) == 4 and all(_alive(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in pids if _alive(p)], "workers outlived their killed orchestrator"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_worker_that_dies_before_it_is_ready_is_one_line_naming_it(tmp_path):
    side = interleave.SideProcess("base1", tmp_path / "no-such-tree")
    try:
        with pytest.raises(interleave.WorkerError) as info:
            side.ask({"op": "describe"})
        assert str(info.value).startswith("base1: worker exited (1) before it was ready")
    finally:
        side.close()
