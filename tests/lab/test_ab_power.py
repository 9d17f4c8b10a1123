"""lab.scripts.ab_power: the cost model's arithmetic, the exact rank distribution, the simulation's
bookkeeping and the command line's refusals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from lab import synthetic
from lab.scripts import ab_power
from perfgate.gate import process_ab as pa


def test_today_costs_what_the_h200_measured():
    cost = ab_power.DEVICE_COST
    # 19 s builds + 5 s start + 2 x 6.68 s of prepares + 9 x 2 x 210 rounds of 0.5 ms + 2 closes
    expected = 19 + 5 + 2 * sum(ab_power.DEVICE_PREPARE_S) + 9 * 2 * 210 * 0.0005 + 2 * 0.6
    assert cost.today() == pytest.approx(expected, rel=1e-12)
    assert 36 <= cost.today() <= 42  # perfgate ab measured 38-39 s for this selection


def test_verdict_cost_counts_only_what_is_pending():
    cost = ab_power.DEVICE_LEAN_COST
    plan = pa.Design(processes=(3, 6), rounds=100).schedule()
    first_only = cost.verdict_cost(plan[:1], np.ones((1, 9)))
    nothing_pending = np.vstack([np.ones(9), np.zeros(9)])
    assert cost.verdict_cost(plan, nothing_pending) == pytest.approx(first_only, rel=1e-12)
    # one benchmark pending at look 2: one start wave, 6 new workers prepare and measure it
    one = np.vstack([np.ones(9), np.eye(9)[0]])
    extra = cost.start_s + 6 * cost.prepare_s[0] + 6 * (100 + cost.warmup_rounds) * cost.round_s
    assert cost.verdict_cost(plan, one) == pytest.approx(first_only + extra, rel=1e-12)


@pytest.mark.parametrize(("m", "n"), [(2, 2), (3, 4), (4, 4), (5, 3)])
def test_mann_whitney_counts_enumerated(m, n):
    counts = np.zeros(m * n + 1)
    for xs in itertools.combinations(range(m + n), m):  # every ranking of x among x and y
        ys = [v for v in range(m + n) if v not in xs]
        counts[sum(x > y for x in xs for y in ys)] += 1
    assert np.array_equal(ab_power._mann_whitney_counts(m, n), counts)
    assert counts.sum() == math.comb(m + n, m)


def test_rank_bounds_cannot_reach_a_level_below_the_smallest_p():
    # 4 against 4 processes: the smallest one-sided p is 1/70 > 0.01 / 3, so no bound at all
    design = pa.Design(processes=(4,))
    b = np.ones((1, 4, 20)) * 1e-6
    lo, hi = ab_power.rank_bounds(b, b * 1.5, design)
    assert lo[0] == -np.inf and hi[0] == np.inf


def test_simulation_is_seeded_and_counts_every_trial():
    model, design = synthetic.MEASURED_DEVICE, pa.Design(processes=(2, 3), rounds=20)
    one = ab_power.simulate(model, design, 0.01, 50, seed=4)
    two = ab_power.simulate(model, design, 0.01, 50, seed=4)
    assert np.array_equal(one.counts, two.counts) and one.counts.sum() == 50
    assert np.all(one.pending[0] == 1) and one.looks.sum() == 50
    assert np.array_equal(one.pending, two.pending)


def test_rounds_as_samples_flag_process_offsets():
    model = synthetic.BRIEF_DEVICE.with_(process_sd=0.01, process_tail=0.0)
    design = pa.Design(processes=(4,), rounds=50)
    rounds = ab_power.simulate(model, design, 0.0, 300, seed=2, method="rounds")
    process = ab_power.simulate(model, design, 0.0, 300, seed=2, method="student")
    assert rounds.counts[0] + rounds.counts[1] >= 30  # >= 10% false alarms
    assert process.counts[0] + process.counts[1] <= 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["designs", "--processes", "3-x"], "--processes must be comma-separated integers"),
        (["designs", "--processes", "3-3"], "processes must be a non-empty sequence"),
        (["designs", "--floors", "0.02"], "floor must be a number in [0, 0.01]"),
        (["methods", "--methods", "magic"], "--methods must name some of"),
        (["designs", "--costs", "cloud"], "--costs must name some of"),
        (["designs", "--trials", "0"], "--trials must be an int >= 1"),
    ],
)
def test_bad_options_exit_2_with_one_line(argv, message, capsys):
    assert ab_power.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ab_power: error: {message}") and err.count("\n") == 1


def test_probe_summary_reads_back_planted_factors(tmp_path):
    from lab.scripts import ab_process_probe

    names = ["tests/perf/a.py::a[x1]", "tests/perf/a.py::a[x2]"]
    factors = np.array([0.002, -0.002, 0.0])  # each worker's level, common to both benchmarks
    rounds = np.full(40, 1.0)
    arrays = {
        f"{n}|w{i}": 1e-6 * (j + 1) * np.exp(f) * rounds
        for j, n in enumerate(names)
        for i, f in enumerate(factors)
    }
    np.savez(tmp_path / "probe.npz", **arrays)
    timings = {
        "prepare_alone": dict.fromkeys(names, 0.5),
        "prepare_together": dict.fromkeys(names, 2.0),
        "rounds": dict.fromkeys(names, 0.0005),
        "start_and_first_prepare_0": 6.0,
        "start_and_first_prepare_1": 5.0,
        "close_all": 1.0,
    }
    (tmp_path / "probe.json").write_text(__import__("json").dumps(timings))
    text = ab_process_probe.summarise(tmp_path)
    assert "| x1 | 1.000 | 0.00% | 0.200% | 0.000% | 0.200% | 0.50 | 2.0 | 0.50 |" in text
    assert "factors common to all benchmarks: SD 0.200%, largest 0.200%" in text
    assert ab_process_probe.main(["--summarise", str(tmp_path / "missing")]) == 2
