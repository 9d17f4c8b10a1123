"""The process-level A/B's arithmetic against references computed without it: scipy's
two-sample t-tests (pooled and Welch) and trimmed mean, hand-written reasons, and every
argument check at its exact boundary. Each test here was written against a mutant of
perfgate/gate/process_ab.py that the statistical tests of test_process_ab.py let through
(docs/measurements.md, "Mutation")."""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats as sps

from perfgate.gate import process_ab as pa

RNG = np.random.default_rng(31)
# (base processes, head processes): equal and unequal sides, the fewest the gate judges
SIDES = [(2, 2), (3, 3), (2, 5), (4, 3)]


def _levels(n: int, shift: float = 0.0, sd: float = 0.004) -> np.ndarray:
    return np.log(5e-6) + shift + sd * RNG.standard_normal(n)


def _scipy(a, b, alpha: float, equal_var: bool):
    """(d, one-sided low, one-sided high, p slower, p faster) from scipy.stats.ttest_ind."""
    slower = sps.ttest_ind(b, a, equal_var=equal_var, alternative="greater")
    faster = sps.ttest_ind(b, a, equal_var=equal_var, alternative="less")
    two = sps.ttest_ind(b, a, equal_var=equal_var)
    ci = two.confidence_interval(confidence_level=1 - 2 * alpha)  # one-sided 1 - alpha each
    return np.mean(b) - np.mean(a), ci.low, ci.high, slower.pvalue, faster.pvalue


@pytest.mark.parametrize("method", pa.METHODS)
@pytest.mark.parametrize(("na", "nb"), SIDES)
@pytest.mark.parametrize("shift", [0.0, 0.006, -0.02])
def test_bounds_are_scipys_t_test(method, na, nb, shift):
    a, b = _levels(na), _levels(nb, shift)
    d, lo, hi, p_slow, p_fast, sd = pa.bounds(a, b, 0.0025, method)
    want = _scipy(a, b, 0.0025, equal_var=method == "student")
    np.testing.assert_allclose([d, lo, hi, p_slow, p_fast], want, rtol=1e-9, atol=1e-15)
    va, vb = np.var(a, ddof=1), np.var(b, ddof=1)
    pooled = (
        ((na - 1) * va + (nb - 1) * vb) / (na + nb - 2) if method == "student" else va / 2 + vb / 2
    )
    assert sd == pytest.approx(math.sqrt(pooled), rel=1e-12)


def test_bounds_default_to_the_pooled_test():
    a, b = _levels(3), _levels(3, 0.01)
    assert [float(x) for x in pa.bounds(a, b, 0.01)] == [
        float(x) for x in pa.bounds(a, b, 0.01, "student")
    ]


def test_bounds_are_computed_in_float64_whatever_the_input():
    a, b = _levels(3).astype(np.float32), _levels(3, 0.01).astype(np.float32)
    got = pa.bounds(a, b, 0.01, "welch")
    want = pa.bounds(a.astype(np.float64), b.astype(np.float64), 0.01, "welch")
    assert [float(x) for x in got] == [float(x) for x in want]
    x = (5e-6 * np.exp(0.01 * RNG.standard_normal((3, 40)))).astype(np.float32)
    assert pa.process_levels(x).tolist() == pa.process_levels(x.astype(np.float64)).tolist()


# 1e-85: Welch's df is 0 / 0 ((va/n)**2 underflows to 0); 2e-81: x / 0 (the denominator's
# (va/n)**2 / (n - 1) underflows, the numerator (va/n + vb/n)**2 does not)
@pytest.mark.parametrize("spread", [0.004, 1e-85, 2e-81])
def test_welch_equals_student_for_equal_sides_and_variances(spread):
    # With n a side and equal variances Welch's df is exactly 2n - 2, Student's: the fallback
    # the code takes where Welch's df is not finite must give the same, and silently.
    a = spread * np.array([-1.0, 0.0, 1.0])  # levels around log(1 s): the spread is kept
    b = a + 10 * spread
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        student = [float(x) for x in pa.bounds(a, b, 0.01, "student")]
        welch = [float(x) for x in pa.bounds(a, b, 0.01, "welch")]
    assert welch == pytest.approx(student, rel=1e-9, abs=1e-300)
    assert welch[1] > 0  # a real interval above zero, not NaN


@pytest.mark.parametrize("method", pa.METHODS)
def test_no_spread_gives_exact_bounds_and_p_values_without_warnings(method):
    a = np.full(3, -12.0)  # its mean and variance are exact: 0 spread, not 1e-30
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0 x inf and 0 / 0 must stay silent
        same = [float(x) for x in pa.bounds(a, a.copy(), 0.01, method)]
        slower = [float(x) for x in pa.bounds(a, a + 0.01, 0.01, method)]
        faster = [float(x) for x in pa.bounds(a, a - 0.01, 0.01, method)]
    assert same == [0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    assert slower[1:5] == pytest.approx([0.01, 0.01, 0.0, 1.0], abs=1e-15)
    assert faster[3:5] == [1.0, 0.0]


def test_p_faster_is_scipys_where_the_head_is_faster():
    a, b = _levels(3), _levels(3, -0.005)
    p_fast = float(pa.bounds(a, b, 0.01)[4])
    assert p_fast == pytest.approx(_scipy(a, b, 0.01, True)[4], rel=1e-9)


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (-0.5, -math.log1p(0.0025), pa.INCONCLUSIVE),  # on -floor is not below it
        (math.log1p(0.0025), math.log1p(0.0025), pa.UNCHANGED),
        (-math.log1p(0.01) + 1e-12, math.log1p(0.01), pa.INCONCLUSIVE),
    ],
)
def test_verdict_rule_on_its_boundaries(low, high, verdict):
    assert pa.VERDICTS[int(pa.verdict_codes(low, high, 0.01, 0.0025))] == verdict


def _rounds(level: float, processes: int, rounds: int, sd: float = 0.002) -> np.ndarray:
    return level * np.exp(sd * RNG.standard_normal((processes, rounds)))


@pytest.mark.parametrize("method", pa.METHODS)
@pytest.mark.parametrize("trim", [0.0, 0.1, 0.3])
def test_judge_is_trimmed_means_into_scipys_test(method, trim):
    design = pa.Design(processes=(3,), trim=trim, method=method, alpha=0.02)
    base, head = _rounds(5e-6, 3, 25), _rounds(5.1e-6, 3, 25)
    res = pa.judge(base, head, design)
    la = np.log([sps.trim_mean(p, trim) for p in base])
    lb = np.log([sps.trim_mean(p, trim) for p in head])
    d, lo, hi, p_slow, _ = _scipy(la, lb, 0.02, equal_var=method == "student")
    assert res.ratio == pytest.approx(math.exp(d), rel=1e-12)
    assert (res.ci_low, res.ci_high) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-9)
    assert res.verdict == pa.REGRESSION
    assert res.reason == f"slower: CI above +0.25%, p={p_slow:.2g} (3+3 processes)"


def test_judge_fills_every_field():
    design = pa.Design(min_effect=0.02, floor=0.004, processes=(2, 4), rounds=10)
    base, head = _rounds(5e-6, 2, 12), _rounds(5e-6, 3, 10)
    res = pa.judge(base, head, design, look=2)
    assert (res.threshold, res.floor, res.look) == (0.02, 0.004, 2)
    assert (res.n_base, res.n_cur, res.rounds_base, res.rounds_cur) == (2, 3, 24, 30)
    assert res.baseline_median == pytest.approx(math.exp(np.mean(np.log(
        [sps.trim_mean(p, 0.2) for p in base]))), rel=1e-12)  # fmt: skip


def test_judge_without_a_design_uses_the_default_one():
    base, head = _rounds(5e-6, 3, 20), _rounds(5e-6, 3, 20)
    assert pa.judge(base, head) == pa.judge(base, head, pa.Design())


@pytest.mark.parametrize(
    ("shift", "expected"),
    [
        (-0.05, "faster: CI below -0.25%, p={p:.2g} (3+3 processes)"),
        (0.0, "CI within ±1.0% (3+3 processes)"),
        (
            0.009,
            "CI reaches beyond ±1.0% without clearing ±0.25% (3+3 processes): measure more "
            "processes",
        ),
    ],
)
def test_judge_reasons_word_for_word(shift, expected):
    base = 5e-6 * np.exp(0.0005 * np.array([[-1.0] * 20, [0.0] * 20, [1.0] * 20]))
    noisy = 0.004 if shift == 0.009 else 0.0005
    head = 5e-6 * math.exp(shift) * np.exp(noisy * np.array([[-1.0] * 20, [0.0] * 20, [1.0] * 20]))
    res = pa.judge(base, head, pa.Design(processes=(3,)))
    assert res.reason == expected.format(p=res.p_value)


def test_ten_rounds_a_process_are_enough_nine_are_not():
    design = pa.Design(processes=(2,))
    ten = pa.judge(_rounds(5e-6, 2, 10), _rounds(5e-6, 2, 10), design)
    assert ten.ci_low is not None
    nine = pa.judge(_rounds(5e-6, 2, 10), [np.full(10, 5e-6), np.full(9, 5e-6)], design)
    assert nine.reason == (
        "too few processes or rounds (2 base, 2 head processes, the shortest 9 rounds; need >= 2 "
        "a side of >= 10 rounds): measure more"
    )


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_judge_takes_float32_and_integer_rounds(dtype):
    ticks = np.array([[100, 101, 100, 102] * 5] * 3, dtype=dtype)
    res = pa.judge(ticks, ticks + 1, pa.Design(processes=(3,)))
    exact = ticks[0].astype(np.float64)  # 100-102: exact in either type
    want = sps.trim_mean(exact + 1, 0.2) / sps.trim_mean(exact, 0.2)
    assert res.ratio == pytest.approx(want, rel=1e-12)


def test_decide_records_the_deciding_look():
    design = pa.Design(processes=(2, 4), rounds=10)
    have = {}

    def extend(pending, processes, rounds):
        have["shape"] = (processes, rounds)

    def collect(name):
        p, r = have["shape"]
        return np.full((p, r), 5e-6), np.full((p, r), 5e-6)

    decision = pa.decide(["x"], design, extend, collect)["x"]
    assert (decision.look, decision.processes, decision.rounds) == (1, 2, 10)


def test_design_for_reads_every_key():
    gate = SimpleNamespace(
        ab={
            "device": {"min_effect": 0.03, "floor": 0.005, "processes": 4, "looks": 3, "rounds": 40}
        },
        stats=SimpleNamespace(alpha=0.02),
    )
    design = pa.design_for(gate, "device")
    assert (design.min_effect, design.floor, design.processes, design.rounds, design.alpha) == (
        0.03, 0.005, (4, 8, 16), 40, 0.02,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"^mode must be one of device for an A/B, got 'host'$"):
        pa.design_for(gate, "host")
    gate.ab["leaderboard"] = gate.ab["device"]
    with pytest.raises(ValueError, match=r"^mode must be one of device, leaderboard for an A/B"):
        pa.design_for(gate, "host")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 0}, "alpha must be a number in (0, 0.5), got 0"),
        ({"floor": 0.02}, "floor must be a number in [0, 0.01], got 0.02"),
        ({"min_effect": True}, "min_effect must be a number in (0, 1], got True"),
        ({"min_effect": "0.01"}, "min_effect must be a number in (0, 1], got '0.01'"),
        ({"round_growth": True}, "round_growth must be an int in [1, 2], got True"),
        ({"rounds": "20"}, "rounds must be an int >= 10, got '20'"),
        ({"rounds": 5}, "rounds must be an int >= 10, got 5"),
        ({"method": "z"}, "method must be one of student, welch, got 'z'"),
        ({"processes": 5}, "processes must be a non-empty sequence of increasing ints >= 2"),
    ],
)
def test_design_refusals_word_for_word(kwargs, message):
    with pytest.raises(ValueError) as err:
        pa.Design(**kwargs)
    assert str(err.value).startswith(message)


def test_design_boundaries_that_are_accepted():
    assert pa.Design(floor=0.01, min_effect=0.01).floor == 0.01  # floor up to min_effect
    eight = pa.Design(processes=[2, 3, 4, 5, 6, 7, 8, 9])  # MAX_LOOKS looks, from a list
    assert eight.processes == (2, 3, 4, 5, 6, 7, 8, 9) and isinstance(eight.processes, tuple)


def test_bounds_refuse_an_unknown_method():
    with pytest.raises(ValueError, match=r"^method must be one of student, welch, got 'z'$"):
        pa.bounds(_levels(3), _levels(3), 0.01, "z")


@pytest.mark.parametrize(
    ("base", "head", "message"),
    [
        (5, [[1e-6] * 20] * 2, "base must be a sequence of per-process round times, got int"),
        ([[1e-6] * 20] * 2, 5, "head must be a sequence of per-process round times, got int"),
        ([[1e-6] * 20] * 2, [], "head must hold at least one process's round times, got none"),
        (
            [[1e-6] * 20] * 2,
            [[1e-6] * 20, 7],
            "head process 1 must be a sequence of round times, got int",
        ),
    ],
)
def test_sample_refusals_name_the_side(base, head, message):
    with pytest.raises(ValueError) as err:
        pa.judge(base, head, pa.Design(processes=(2,)))
    assert str(err.value) == message


def test_judge_refuses_a_design_of_another_type_by_name():
    with pytest.raises(TypeError, match=r"got dict$"):
        pa.judge([[1e-6] * 20] * 2, [[1e-6] * 20] * 2, {"alpha": 0.01})
