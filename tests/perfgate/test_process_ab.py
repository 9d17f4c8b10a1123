"""The process-level A/B verdict (perfgate.gate.process_ab): the looks' alpha, who gets more
processes, the verdict rule at its edges and bad arguments. Its false alarms and power on the
lab's noise models are the lab's tests (tests/lab/test_process_ab_power.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from perfgate.gate import process_ab as pa
from perfgate.gate.report import Row
from perfgate.gate.stats import Settings


def test_each_look_tests_at_alpha_over_looks():
    design = pa.Design(processes=(3, 6, 12), alpha=0.01)
    assert design.looks == 3 and design.look_alpha == 0.01 / 3
    rng = np.random.default_rng(3)
    base = 1e-6 * np.exp(0.004 * rng.standard_normal((5, 50)))
    head = 1.003e-6 * np.exp(0.004 * rng.standard_normal((5, 50)))
    res = pa.judge(base, head, design)
    la, lb = (np.log(np.sort(x, axis=1)[:, 10:40].mean(axis=1)) for x in (base, head))
    t = sps.ttest_ind(lb, la, equal_var=True)
    d = lb.mean() - la.mean()
    se = d / t.statistic
    q = sps.t.ppf(1 - 0.01 / 3, 8)
    assert res.ci_low == pytest.approx(math.exp(d - q * se), rel=1e-12)
    assert res.ci_high == pytest.approx(math.exp(d + q * se), rel=1e-12)
    assert res.p_value == pytest.approx(min(t.pvalue / 2, 1 - t.pvalue / 2), rel=1e-9)
    one = pa.judge(base, head, pa.Design(processes=(3,), alpha=0.01))
    assert one.ci_low > res.ci_low and one.ci_high < res.ci_high  # one look: alpha undivided


def test_only_the_undecided_get_more_processes():
    design = pa.Design(processes=(3, 6, 12), rounds=20)
    rng = np.random.default_rng(1)
    shift = {"clear": 1.10, "edge": 1.008}
    data = {
        n: (1e-6 * np.exp(0.005 * rng.standard_normal((12, 20))),
            s * 1e-6 * np.exp(0.005 * rng.standard_normal((12, 20))))
        for n, s in shift.items()
    }  # fmt: skip
    calls, have = [], {}

    def extend(pending, processes, rounds):
        calls.append((pending, processes, rounds))
        have.update(dict.fromkeys(pending, processes))

    def collect(name):
        b, h = data[name]
        return b[: have[name]], h[: have[name]]

    decided = pa.decide(["clear", "edge"], design, extend, collect)
    assert calls[0] == (["clear", "edge"], 3, 20) and len(calls) >= 2
    assert all("clear" not in pending for pending, _, _ in calls[1:])
    assert decided["clear"].look == 1 and decided["clear"].result.verdict == pa.REGRESSION
    assert (
        decided["edge"].processes == have["edge"] == design.schedule()[decided["edge"].look - 1][0]
    )


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (math.log1p(0.0025) + 1e-12, 0.5, pa.REGRESSION),
        (math.log1p(0.0025), 0.5, pa.INCONCLUSIVE),  # on the floor is not above it
        (-0.5, -math.log1p(0.0025) - 1e-12, pa.IMPROVEMENT),
        (-math.log1p(0.01) + 1e-12, math.log1p(0.01) - 1e-12, pa.UNCHANGED),
        (-math.log1p(0.01), 0.0, pa.INCONCLUSIVE),  # reaching the band's edge is not within
        (0.0, math.log1p(0.01), pa.INCONCLUSIVE),
        (0.001, 0.009, pa.UNCHANGED),  # significant but below the floor: smaller than counts
        (0.003, 0.009, pa.REGRESSION),  # above the floor: a regression, even inside the band
    ],
)
def test_verdict_rule_at_its_edges(low, high, verdict):
    assert pa.VERDICTS[int(pa.verdict_codes(low, high, 0.01, 0.0025))] == verdict


def test_identical_quantised_processes_give_an_exact_answer():
    tick = 32e-9
    base = np.full((3, 20), 100 * tick)
    same = pa.judge(base, base.copy(), pa.Design(processes=(3,)))
    assert (same.verdict, same.ratio, same.ci_low, same.ci_high) == (pa.UNCHANGED, 1.0, 1.0, 1.0)
    assert same.p_value == 1.0
    slower = pa.judge(base, base + tick, pa.Design(processes=(3,)))  # +1%, no spread at all
    assert slower.verdict == pa.REGRESSION and slower.ci_low == slower.ci_high == slower.ratio


def test_result_fills_a_report_row():
    rng = np.random.default_rng(0)
    base = 1e-6 * np.exp(0.003 * rng.standard_normal((4, 30)))
    res = pa.judge(base, base * 1.05, pa.Design(processes=(4,)))
    row = Row(name="tests/perf/x.py::x[a]", **res.row_fields())
    assert row.verdict == pa.REGRESSION
    assert (row.n_baseline, row.n_current, res.rounds_base) == (4, 4, 120)
    assert row.threshold == 0.01 and res.change == pytest.approx(0.05, rel=1e-12)
    assert row.current_median / row.baseline_median == pytest.approx(res.ratio, rel=1e-12)


def test_too_few_processes_or_rounds_are_inconclusive_not_judged():
    ok = np.full(20, 1e-6)
    one = pa.judge([ok], [ok, ok], pa.Design(processes=(2,)))
    assert one.verdict == pa.INCONCLUSIVE and one.ci_low is None and "too few" in one.reason
    short = pa.judge([ok, ok[:9]], [ok, ok], pa.Design(processes=(2,)))
    assert short.verdict == pa.INCONCLUSIVE and "shortest 9 rounds" in short.reason


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"min_effect": 0}, "min_effect"),
        ({"min_effect": 1.5}, "min_effect"),
        ({"floor": 0.02}, "floor"),  # above min_effect
        ({"floor": -0.001}, "floor"),
        ({"alpha": 0.5}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"processes": (1, 2)}, "processes"),
        ({"processes": (3, 3)}, "processes"),
        ({"processes": ()}, "processes"),
        ({"processes": "3"}, "processes"),
        ({"processes": (3.0,)}, "processes"),
        ({"processes": tuple(range(2, 11))}, "processes"),
        ({"rounds": 9}, "rounds"),
        ({"rounds": True}, "rounds"),
        ({"round_growth": 3}, "round_growth"),
        ({"trim": 0.5}, "trim"),
        ({"method": "bootstrap"}, "method"),
    ],
)
def test_bad_design_is_one_line_value_error(kwargs, names):
    with pytest.raises(ValueError) as err:
        pa.Design(**kwargs)
    message = str(err.value)
    assert message.startswith(f"{names} must") and "\n" not in message


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("abc", "base must be a sequence"),
        ([], "base must hold at least one process's round times"),
        (3.0, "base must be a sequence"),
        ([[1e-6] * 20, 2e-6], "base process 1 must be a sequence"),
        ([[1e-6] * 20, []], "base process 1 must be a non-empty 1-D"),
        ([[1e-6] * 20, [[1e-6]]], "base process 1 must be a non-empty 1-D"),
        ([[1e-6] * 20, ["a"] * 20], "base process 1 must hold real numbers"),
        ([[1e-6] * 20, [True] * 20], "base process 1 must hold real numbers"),
        ([[1e-6] * 19 + [0.0]], "base process 0: round times must be finite and > 0; round 19"),
        ([[1e-6] * 5 + [float("inf")]], "base process 0: round times must be finite and > 0"),
    ],
)
def test_bad_samples_are_one_line_value_errors(base, expected):
    with pytest.raises(ValueError) as err:
        pa.judge(base, [[1e-6] * 20] * 2, pa.Design(processes=(2,)))
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_bad_look_and_design_type():
    ok = [[1e-6] * 20] * 2
    with pytest.raises(ValueError, match=r"^look must be an int in \[1, 4\], got 5$"):
        pa.judge(ok, ok, pa.Design(), look=5)
    with pytest.raises(TypeError, match=r"^design must be a perfgate\.gate\.process_ab\.Design"):
        pa.judge(ok, ok, Settings())
