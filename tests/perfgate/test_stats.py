"""The verdict statistics on synthetic samples whose truth is known.

The rate tests use 200 seeded trials per case (reproducible, never flaky) and 1000 bootstrap
resamples instead of the default 5000 to keep the file at a few seconds; fewer resamples only
make the interval bounds noisier, so the rates measured here are if anything pessimistic.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.gate.stats import (
    IMPROVEMENT,
    INCONCLUSIVE,
    REGRESSION,
    UNCHANGED,
    Result,
    Settings,
    compare_samples,
    relative_spread,
)

TRIALS = 200
FAST = Settings(n_resamples=1000)


def spiky(rng: np.random.Generator, n: int, factor: float = 1.0) -> np.ndarray:
    """GPU-like timings: 1% gaussian noise and 5% of samples slowed x1.2-2.0 (a spike)."""
    x = 20e-6 * factor * (1 + 0.01 * rng.standard_normal(n))
    spikes = rng.random(n) < 0.05
    x[spikes] *= rng.uniform(1.2, 2.0, spikes.sum())
    return x


def verdicts(factor: float, noise=None, n: int = 30) -> Counter[str]:
    """Verdict counts over TRIALS seeded trials of baseline vs current = factor x baseline."""
    counts: Counter[str] = Counter()
    for seed in range(TRIALS):
        rng = np.random.default_rng(seed)
        if noise is None:
            base, cur = spiky(rng, n), spiky(rng, n, factor)
        else:
            base = 1 + noise * rng.standard_normal(n)
            cur = factor * (1 + noise * rng.standard_normal(n))
        counts[compare_samples(base, cur, FAST).verdict] += 1
    return counts


# --- error rates over many trials -------------------------------------------------------------


def test_unchanged_spiky_noise_false_alarm_rate_at_most_1_percent():
    counts = verdicts(1.0)
    false_alarms = counts[REGRESSION] + counts[IMPROVEMENT]
    assert false_alarms <= TRIALS // 100, counts
    # And "no change" is recognised as such, not shrugged off as inconclusive.
    assert counts[UNCHANGED] >= 0.95 * TRIALS, counts


def test_true_5_percent_slowdown_caught_at_least_95_percent():
    counts = verdicts(1.05)
    assert counts[REGRESSION] >= 0.95 * TRIALS, counts
    assert counts[IMPROVEMENT] == 0, counts


def test_true_5_percent_speedup_caught_at_least_95_percent():
    counts = verdicts(0.95)
    assert counts[IMPROVEMENT] >= 0.95 * TRIALS, counts
    assert counts[REGRESSION] == 0, counts


def test_1_percent_change_under_quiet_noise_is_below_min_effect():
    # 0.2% noise makes a 1% slowdown highly significant (p ~ 1e-10), but it is below the 3%
    # minimum effect: the gate must call it unchanged, never a regression.
    counts = verdicts(1.01, noise=0.002)
    assert counts[REGRESSION] == 0, counts
    assert counts[UNCHANGED] == TRIALS, counts


# --- single cases: boundaries and the grey zone -----------------------------------------------


def quiet(n: int, factor: float = 1.0, noise: float = 1e-4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return factor * (1 + noise * rng.standard_normal(n))


@pytest.mark.parametrize(
    ("n_base", "n_cur", "verdict"),
    [
        (9, 30, INCONCLUSIVE),  # one side below min_samples=10, even for a 50% slowdown
        (30, 9, INCONCLUSIVE),  # the other side
        (3, 3, INCONCLUSIVE),  # far below
        (10, 10, REGRESSION),  # exactly min_samples: judged
    ],
)
def test_min_samples_boundary(n_base, n_cur, verdict):
    res = compare_samples(quiet(n_base, seed=1), quiet(n_cur, 1.5, seed=2))
    assert res.verdict == verdict
    assert (res.n_base, res.n_cur) == (n_base, n_cur)
    if verdict == INCONCLUSIVE:
        assert "too few samples" in res.reason and "rerun" in res.reason
        assert (res.ci_low, res.ci_high, res.p_value) == (None, None, None)
        assert res.ratio > 1.4  # the point estimate is still reported


def test_grey_zone_significant_but_ci_straddles_threshold_is_inconclusive():
    # A true 3% slowdown under 1% noise: the rank test is sure, the CI straddles +3%.
    rng = np.random.default_rng(7)
    res = compare_samples(spiky(rng, 30), spiky(rng, 30, 1.03))
    assert res.verdict == INCONCLUSIVE
    assert res.p_value < 0.01
    assert res.ci_low < 1 + res.threshold < res.ci_high
    assert "grey zone" in res.reason and "rerun with more rounds" in res.reason


def test_noisy_samples_raise_the_threshold():
    # 5% gaussian noise: threshold = 2 x noise (the MAD estimate of 5% from 30 samples lands
    # anywhere in ~3.5-6.5%) > min_effect, so a true 5% slowdown is not a regression.
    rng = np.random.default_rng(3)
    base = 1 + 0.05 * rng.standard_normal(30)
    cur = 1.05 * (1 + 0.05 * rng.standard_normal(30))
    res = compare_samples(base, cur)
    assert 0.03 < res.noise < 0.08
    assert res.threshold == 2.0 * res.noise > 0.03
    assert res.verdict != REGRESSION


def test_threshold_is_max_of_min_effect_and_k_noise_exactly():
    # 11 samples with median 100 and MAD exactly 10 (8 deviations of 10, 3 of 0).
    samples = [90.0] * 4 + [100.0] * 3 + [110.0] * 4
    assert relative_spread(np.array(samples)) == 1.4826 * 10.0 / 100.0
    quiet_side = [100.0] * 11  # MAD 0: noise 0
    res = compare_samples(samples, quiet_side, Settings(min_samples=10, n_resamples=200))
    expected_noise = math.sqrt((1.4826 * 10.0 / 100.0) ** 2 / 2)
    assert res.noise == expected_noise
    assert res.threshold == 2.0 * expected_noise  # 0.2097 > min_effect 0.03
    res = compare_samples(samples, quiet_side, Settings(noise_factor=0.1, n_resamples=200))
    assert res.threshold == 0.03  # 0.1 x noise = 0.021 < min_effect


def test_improvement_threshold_is_log_symmetric():
    # 2.95% faster: ratio 0.9705 is below 1/1.03 = 0.97087 but above 1 - 0.03 = 0.97. The gate
    # is symmetric in log space (swapping the files swaps regression and improvement), so this
    # is an improvement.
    res = compare_samples(quiet(30, seed=1), quiet(30, 0.9705, seed=2))
    assert res.verdict == IMPROVEMENT
    assert res.ci_high < 1 / 1.03


@pytest.mark.parametrize("factor", [1.08, 1 / 1.08])
def test_swapping_baseline_and_current_swaps_the_verdict(factor):
    rng = np.random.default_rng(11)
    a, b = spiky(rng, 30), spiky(rng, 30, factor)
    forward, backward = compare_samples(a, b), compare_samples(b, a)
    assert {forward.verdict, backward.verdict} == {REGRESSION, IMPROVEMENT}
    assert forward.ratio * backward.ratio == pytest.approx(1, rel=1e-12)  # float rounding only
    assert forward.p_value == pytest.approx(backward.p_value, rel=1e-12)


def test_spikes_in_baseline_do_not_fake_an_improvement():
    # Three x10 spikes move the mean by +30%; the median and the rank test barely notice.
    base = quiet(30, seed=1)
    base[[3, 14, 25]] *= 10
    res = compare_samples(base, quiet(30, seed=2))
    assert res.verdict == UNCHANGED


@pytest.mark.parametrize(
    ("cur_value", "verdict"),
    [
        (1.0, UNCHANGED),  # all samples tied on both sides: p must be 1, never NaN
        (1.1, REGRESSION),  # a quantised timer: every sample one tick slower
        (0.9, IMPROVEMENT),
    ],
)
def test_constant_samples(cur_value, verdict):
    res = compare_samples([1.0] * 12, [cur_value] * 12)
    assert res.verdict == verdict
    assert res.ratio == cur_value
    assert (res.ci_low, res.ci_high) == (cur_value, cur_value)
    assert res.noise == 0.0 and res.threshold == 0.03
    assert not math.isnan(res.p_value)


def test_deterministic():
    rng = np.random.default_rng(5)
    base, cur = spiky(rng, 30), spiky(rng, 30, 1.04)
    first = compare_samples(base, cur)
    assert isinstance(first, Result)
    assert compare_samples(base.tolist(), cur.tolist()) == first


@given(
    exponent=st.integers(-30, 30),
    seed=st.integers(0, 2**32 - 1),
    factor=st.sampled_from([1.0, 1.02, 1.05, 0.95]),
)
def test_scale_invariant(exponent, seed, factor):
    # Multiplying both sides by a power of two is exact in floating point, so the verdict and
    # every number must be identical: seconds, microseconds, whatever unit the timer used.
    rng = np.random.default_rng(seed)
    base, cur = spiky(rng, 15), spiky(rng, 15, factor)
    settings = Settings(n_resamples=200)
    scaled = compare_samples(base * 2.0**exponent, cur * 2.0**exponent, settings)
    assert scaled == compare_samples(base, cur, settings)


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("baseline", "current", "error", "match"),
    [
        (
            [1.0, float("nan")],
            [1.0],
            ValueError,
            r"baseline samples must be finite and > 0; sample 1",
        ),
        ([1.0], [float("inf")], ValueError, r"current samples must be finite and > 0; sample 0"),
        ([1.0, -1.0], [1.0], ValueError, r"baseline .* sample 1 is -1.0"),
        ([1.0], [0.0], ValueError, r"current .* sample 0 is 0.0"),  # zero time: a broken timer
        ([], [1.0], ValueError, r"baseline must be a non-empty 1-D array"),
        ([[1.0, 2.0]], [1.0], ValueError, r"baseline must be a non-empty 1-D .* shape \(1, 2\)"),
        ("123", [1.0], TypeError, r"baseline must be a 1-D sequence"),
        (1.0, [1.0], TypeError, r"baseline must be a 1-D sequence"),
        ([1.0], ["a"], TypeError, r"current must hold real numbers"),
        ([True, False], [1.0], TypeError, r"baseline must hold real numbers, got dtype bool"),
    ],
)
def test_bad_samples(baseline, current, error, match):
    with pytest.raises(error, match=match):
        compare_samples(baseline, current)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"alpha": 0.0}, ValueError, r"alpha must be a number in \(0, 0.5\)"),
        (
            {"alpha": 0.5},
            ValueError,
            r"alpha must be a number in \(0, 0.5\)",
        ),  # CI level would be 0
        ({"alpha": float("nan")}, ValueError, r"alpha must be .* got nan"),
        ({"alpha": "0.01"}, TypeError, r"alpha must be a number"),
        ({"min_effect": -0.01}, ValueError, r"min_effect must be a fraction"),
        ({"min_effect": 3.0}, ValueError, r"min_effect must be a fraction"),  # 3 meant 3%?
        (
            {"noise_factor": float("inf")},
            ValueError,
            r"noise_factor must be a number in \[0, 10\], got inf",
        ),
        (
            {"noise_factor": -1.0},
            ValueError,
            r"noise_factor must be a number in \[0, 10\], got -1.0",
        ),
        ({"min_samples": 2}, ValueError, r"min_samples must be an int in \[3, 10000\], got 2"),
        ({"min_samples": 10.0}, TypeError, r"min_samples must be an int"),
        ({"n_resamples": 99}, ValueError, r"n_resamples must be an int in \[100, 100000\], got 99"),
        ({"seed": True}, TypeError, r"seed must be an int"),
    ],
)
def test_bad_settings(kwargs, error, match):
    with pytest.raises(error, match=match):
        Settings(**kwargs)


def test_settings_must_be_settings():
    with pytest.raises(
        TypeError, match=r"settings must be a perfgate.gate.stats.Settings, got dict"
    ):
        compare_samples([1.0] * 10, [1.0] * 10, {"alpha": 0.01})


def test_confidence_level_matches_alpha():
    # Each bound of the two-sided (1 - 2 alpha) interval is a one-sided (1 - alpha) bound.
    assert Settings().confidence == 1 - 2 * 0.01
    assert Settings(alpha=0.05).confidence == 1 - 2 * 0.05


# -- the bootstrap interval's coverage (a 50% interval instead of 98% once went unnoticed) -----
def _null_coverage(level: float, trials: int = 300) -> float:
    """How often the interval at ``level`` contains the true ratio 1 on seeded null data."""
    from perfgate.gate.stats import bootstrap_ratio_ci

    rng = np.random.default_rng(7)
    settings = Settings(n_resamples=1000)
    hits = 0
    for _ in range(trials):
        # continuous data, odd n: the median is one order statistic, no ties
        base, cur = 1 + 0.01 * rng.standard_normal((2, 101))
        low, high = bootstrap_ratio_ci(base, cur, settings, confidence=level)
        hits += low <= 1.0 <= high
    return hits / trials


def test_the_98_percent_interval_covers_the_truth_about_98_percent_of_the_time():
    # 300 trials: the binomial sd at 98% is 0.8%; the percentile bootstrap of a median is a
    # little liberal at n=101, so the band is 94-100%. A 50% interval lands near 50%.
    assert 0.94 <= _null_coverage(FAST.confidence) <= 1.0


def test_a_50_percent_interval_would_fail_the_coverage_check():
    assert _null_coverage(0.5) < 0.7


def test_large_sides_are_bootstrapped_m_out_of_n_with_the_full_width():
    from perfgate.gate.stats import bootstrap_ratio_ci

    rng = np.random.default_rng(3)
    base, cur = 1 + 0.01 * rng.standard_normal((2, 20_000))
    full = bootstrap_ratio_ci(base, cur, Settings(n_resamples=500, bootstrap_max_samples=20_000))
    sub = bootstrap_ratio_ci(base, cur, Settings(n_resamples=500, bootstrap_max_samples=500))
    # the shrunk subset interval has the full one's width to within the bootstrap's own noise
    # (without the sqrt(m/n) shrink it would be sqrt(40) = 6.3 times wider)
    assert (sub[1] - sub[0]) == pytest.approx(full[1] - full[0], rel=0.3)
    ratio = float(np.median(cur) / np.median(base))
    assert sub[0] < ratio < sub[1]


# -- thresholds: a single run's noise, or a pooled baseline's measured drift ------------------
@pytest.mark.parametrize(
    ("drift", "threshold"),
    [
        (None, 0.03),  # no recorded spread: the floor (2 x 0.1% noise is below it)
        (0.0, 0.025),  # a pooled baseline whose runs agree: the 2.5% floor
        (0.001, 0.025),  # a quiet baseline: the 2.5% floor
        (0.015, 0.045),  # 3 x a 1.5% drift is above the floor
    ],
)
def test_threshold_follows_drift(drift, threshold):
    rng = np.random.default_rng(1)
    res = compare_samples(
        1 + 0.001 * rng.standard_normal(30), 1 + 0.001 * rng.standard_normal(30),
        FAST, drift=drift,
    )  # fmt: skip
    assert res.threshold == pytest.approx(threshold)


def test_there_is_no_round_level_ab_threshold():
    # perfgate ab judges worker processes (perfgate.gate.process_ab); the round-level A/B and
    # its ab_min_effect are retired
    with pytest.raises(TypeError, match="ab"):
        compare_samples([1.0] * 10, [1.0] * 10, FAST, ab=True)
    assert not hasattr(FAST, "ab_min_effect")


@pytest.mark.parametrize(
    "how", [{"drift": 0.0}, {"drift": 0.004}], ids=["runs-agree", "stored+drift"]
)
def test_a_3_percent_shift_at_half_a_percent_noise_is_flagged_at_least_95_percent(how):
    # the goal: 200 rounds a side, 0.5% noise, a true 3% slowdown, judged at the first
    # of three looks (alpha / 3)
    rng = np.random.default_rng(11)
    verdicts = Counter()
    for _ in range(100):
        base = 1 + 0.005 * rng.standard_normal(200)
        cur = 1.03 * (1 + 0.005 * rng.standard_normal(200))
        verdicts[compare_samples(base, cur, FAST, looks=3, **how).verdict] += 1
    assert verdicts[REGRESSION] >= 95, verdicts


def test_more_looks_mean_a_stricter_level_per_look():
    assert FAST.look_alpha(1) == FAST.alpha and FAST.look_alpha(3) == FAST.alpha / 3
    rng = np.random.default_rng(5)
    base, cur = 1 + 0.01 * rng.standard_normal((2, 12))
    one = compare_samples(base, cur * 1.01, FAST)
    three = compare_samples(base, cur * 1.01, FAST, looks=3)
    assert three.ci_low <= one.ci_low and three.ci_high >= one.ci_high  # a wider interval
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="looks must be an int >= 1"):
            FAST.look_alpha(bad)


@pytest.mark.parametrize("drift", [-0.01, float("nan"), float("inf")])
def test_a_bad_drift_is_refused(drift):
    with pytest.raises(ValueError, match="drift must be a finite fraction >= 0"):
        compare_samples([1.0] * 10, [1.0] * 10, FAST, drift=drift)


def test_each_look_tests_at_alpha_over_looks():
    # five samples a side, every current one above every baseline one: the exact one-sided
    # Mann-Whitney p is 1 / C(10, 5) = 1/252 = 0.00397, below alpha = 0.01 but above alpha / 3;
    # the interval clears a pooled baseline's 2.5% threshold either way (min(cur) / max(base) =
    # 1.047). So one look calls it a regression, and each of three looks must not.
    import math

    settings = Settings(n_resamples=500, min_samples=5, alpha=0.01)
    base = [1.000, 1.001, 0.999, 1.002, 0.998]
    cur = [1.05 * x for x in base]
    one = compare_samples(base, cur, settings, drift=0.0, looks=1)
    three = compare_samples(base, cur, settings, drift=0.0, looks=3)
    assert one.p_value == pytest.approx(1 / math.comb(10, 5), rel=1e-9)
    assert 0.01 / 3 < one.p_value < 0.01
    assert one.ci_low > 1.025 and three.ci_low > 1.025
    assert one.verdict == REGRESSION
    assert three.verdict == "inconclusive" and "without a significant rank test" in three.reason
