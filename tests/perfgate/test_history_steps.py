"""perfgate/history/steps.py against values worked out by hand on small series: the robust noise
(the MAD of the first differences, scaled), the noise floor, each setting's bounds, ruptures'
proposals, the two filters at their exact boundaries, and which proposal goes first when several
fail. The detection tests (test_history_detect.py) use steps so large that any estimate finds
them; these hold each estimate to its value."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from perfgate.history import steps

ruptures = pytest.importorskip(
    "ruptures",
    reason="the change-point search is the history extra's (pip install -e '.[history]')",
)


def _settings(min_effect=1e-9, min_size=3, penalty=5.0, alpha=0.49) -> steps.StepSettings:
    return steps.StepSettings(
        min_effect=min_effect, min_size=min_size, penalty=penalty, alpha=alpha
    )


def _cuts(*cuts: int):
    """A segmenter that proposes ``cuts`` whatever the series: the filters alone decide."""
    return lambda x, sigma, settings: list(cuts)


def _found(medians, settings, segmenter=steps.binseg) -> list[tuple[int, float, float, float]]:
    return [
        (s.index, s.before, s.after, s.p_value)
        for s in steps.find_steps(medians, settings, segmenter=segmenter)
    ]


# -- the robust noise -----------------------------------------------------------------------------
# (series, the MAD of its first differences, by hand). The standard deviation of one run is
# 1.4826 x MAD (the normal's consistency constant, rounded as the docstring states it) / sqrt(2).
@pytest.mark.parametrize(
    ("x", "mad"),
    [
        # the fewest runs with a noise of their own: d = [1, 2], median 1.5, |d - 1.5| = [.5, .5]
        ([0.0, 1.0, 3.0], 0.5),
        # d = [0, 1, 2, 4]: median 1.5 (the mean of the middle two), |d - 1.5| = [1.5, .5, .5,
        # 2.5], whose median is 1; about the mean (1.75) it would be 1.25, about 0 it would be 1.5
        ([0.0, 0.0, 1.0, 3.0, 7.0], 1.0),
        # d = [2, -1, 2, -1]: median 0.5, every |d - 0.5| is 1.5 (without the abs: median 0)
        ([0.0, 2.0, 1.0, 3.0, 2.0], 1.5),
        # a step of 100 is one difference of six: d = [0, 1, 0, 100, 0, 1], median 0.5, |d - 0.5|
        # = [.5, .5, .5, 99.5, .5, .5], median 0.5; the step does not reach the noise
        ([0.0, 0.0, 1.0, 1.0, 101.0, 101.0, 102.0], 0.5),
    ],
)
def test_robust_noise_is_the_scaled_mad_of_the_first_differences(x, mad):
    assert steps.robust_noise(np.array(x)) == 1.4826 * mad / math.sqrt(2.0)


@pytest.mark.parametrize(
    "x",
    [
        [],
        [0.5],  # no difference at all
        [0.0, 1.0],  # one difference has no spread to measure
        [0.25] * 6,  # identical runs
        [0.0, 1e-5, 3e-5],  # MAD 5e-6: 1.4826 x 5e-6 / sqrt(2) = 5.2e-6, below the floor
    ],
    ids=["empty", "one", "two", "constant", "below-floor"],
)
def test_robust_noise_never_goes_below_the_floor(x):
    assert steps.robust_noise(np.array(x, dtype=float)) == 1e-4
    assert steps.NOISE_FLOOR == 1e-4  # what docs/history.md and the penalty tests take it to be


# -- a step's change and the settings -------------------------------------------------------------
@pytest.mark.parametrize(("before", "after", "change"), [(4.0, 5.0, 0.25), (4.0, 3.0, -0.25)])
def test_a_steps_change_is_after_over_before_minus_one(before, after, change):
    assert steps.Step(index=3, before=before, after=after, p_value=0.0).change == change


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("min_effect", 0.0, ValueError, "min_effect must be in (0, 1), got 0.0"),
        ("min_effect", 1.0, ValueError, "min_effect must be in (0, 1), got 1.0"),
        ("min_size", True, TypeError, "min_size must be an int, got bool"),
        ("min_size", 3.0, TypeError, "min_size must be an int, got float"),
        ("min_size", 1, ValueError, "min_size must be >= 2, got 1"),
        ("penalty", 0.0, ValueError, "penalty must be finite and > 0, got 0.0"),
        ("penalty", math.inf, ValueError, "penalty must be finite and > 0, got inf"),
        ("penalty", math.nan, ValueError, "penalty must be finite and > 0, got nan"),
        ("alpha", 0.0, ValueError, "alpha must be in (0, 0.5), got 0.0"),
        ("alpha", 0.5, ValueError, "alpha must be in (0, 0.5), got 0.5"),
    ],
)
def test_each_setting_is_refused_at_its_bound_by_name(field, value, error, message):
    kwargs = {"min_effect": 0.5, "min_size": 3, "penalty": 5.0, "alpha": 0.25, field: value}
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        steps.StepSettings(**kwargs)


def test_the_settings_nearest_their_bounds_are_taken():
    tiny = 5e-324
    for kwargs in (
        {"min_effect": tiny, "min_size": 2, "penalty": tiny, "alpha": tiny},
        {"min_effect": math.nextafter(1.0, 0), "min_size": 2, "penalty": 1e308,
         "alpha": math.nextafter(0.5, 0)},
    ):  # fmt: skip
        assert dataclasses.asdict(steps.StepSettings(**kwargs)) == kwargs


# -- ruptures' proposals --------------------------------------------------------------------------
# At the floor noise the penalty is 5e-8 x ln(n): any whole-unit step is worth far more (a split
# at a step of 1 between k and n - k runs gains k (n - k) / n), and a split that leaves a level
# whole gains nothing.
@pytest.mark.parametrize(
    ("x", "min_size", "cuts"),
    [
        ([0, 0, 0, 1, 1, 1, 1, 1], 3, [3]),  # at an odd index: every index is a candidate
        ([0, 0, 0, 1, 1, 1, 0, 0, 0], 3, [3, 6]),  # two steps, and not the series' end
        ([0, 0, 1, 1, 1, 1, 1, 1], 2, [2]),
        # the same step with 3 runs a side: no cut at 2, the nearest one leaves [0, 0, 1]
        # (too short to split again)
        ([0, 0, 1, 1, 1, 1, 1, 1], 3, [3]),
        ([0] * 7, 3, []),
    ],
)
def test_binseg_proposes_every_step_worth_its_penalty(x, min_size, cuts):
    settings = _settings(min_size=min_size)
    assert steps.binseg(np.array(x, dtype=float), 1e-4, settings) == cuts


# -- find_steps -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "medians",
    [[[1.0] * 6], [1.0, 1.0, 1.0, 2.0, 2.0, math.nan], [1.0] * 5 + [math.inf],
     [1.0] * 5 + [0.0], [1.0] * 5 + [-2.0]],
    ids=["2-d", "nan", "inf", "zero", "negative"],
)  # fmt: skip
def test_find_steps_refuses_medians_it_cannot_log(medians):
    message = "medians must be a 1-d sequence of finite values > 0"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        steps.find_steps(medians, _settings())


def _never(x, sigma, settings):
    raise AssertionError("a series too short for two sides of min_size was segmented")


def test_a_step_needs_min_size_runs_on_each_side():
    # 2 x min_size runs hold one step; with one run fewer the segmenter is never asked
    assert _found([1, 1, 1, 2, 2, 2], _settings()) == [(3, 1.0, 2.0, 0.0)]
    assert _found([1, 1, 1, 2, 2], _settings(), segmenter=_never) == []


def test_the_segmenter_sees_the_log_medians_their_noise_and_the_settings():
    medians = [1.0, 2.0, 8.0, 4.0, 16.0, 16.0]
    settings = _settings(min_size=2)
    seen = []

    def segmenter(x, sigma, got):
        seen.append((x.tolist(), sigma, got))
        return [4, 2, 4]  # out of order, one twice

    found = steps.find_steps(medians, settings, segmenter=segmenter)
    # log2 levels 0 1 3 2 4 4, times ln 2: d = [1, 2, -1, 2, 0] ln 2, median ln 2, MAD ln 2
    x = [k * math.log(2.0) for k in (0, 1, 3, 2, 4, 4)]
    ((got_x, sigma, got_settings),) = seen
    assert got_x == pytest.approx(x, rel=1e-15, abs=0) and got_settings is settings
    # the differences of rounded logs are ln 2 to an ulp or two
    assert sigma == pytest.approx(1.4826 * math.log(2.0) / math.sqrt(2.0), rel=1e-14, abs=0)
    assert [s.index for s in found] == [2, 4]  # each once, in order


@pytest.mark.parametrize("cuts", [(0, 3), (3, 6), (-1,)])
def test_a_proposal_outside_the_series_is_an_error(cuts):
    message = f"segmenter proposed steps outside the series: {sorted(cuts)}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        steps.find_steps([1, 1, 1, 2, 2, 2], _settings(), segmenter=_cuts(*cuts))


def test_each_step_is_judged_between_its_neighbours():
    # four flat levels: each step's sides are the runs up to the neighbouring steps
    medians = [1.0] * 4 + [2.0] * 4 + [4.0] * 4 + [8.0] * 4
    assert _found(medians, _settings(), segmenter=_cuts(4, 8, 12)) == [
        (4, 1.0, 2.0, 0.0),
        (8, 2.0, 4.0, 0.0),
        (12, 4.0, 8.0, 0.0),
    ]


@pytest.mark.parametrize(
    ("cut", "found"),
    [(1, []), (2, []), (5, []), (6, []), (3, [(3, 1.0, 2.0, 0.0)]), (4, [(4, 1.0, 2.0, 0.0)])],
    ids=["first-run", "left-short", "right-short", "last-run", "left-min-size", "right-min-size"],
)
def test_a_custom_segmenters_short_side_is_never_a_step(cut, found):
    # 7 runs, min_size 3: a cut at 2 or 5 leaves 2 runs on a side, at 1 or 6 one run (inside the
    # series: not an error)
    medians = [1.0] * cut + [2.0] * (7 - cut)
    assert _found(medians, _settings(), segmenter=_cuts(cut)) == found


def test_medians_are_taken_as_float64_whatever_their_dtype():
    # float32 runs 1 and 1 + 2^-23: their median is 1 + 2^-24 in float64, a tie that float32
    # arithmetic rounds to 1
    medians = np.array([1.0, 1 + 2**-23, 1.0, 1 + 2**-23, 2.0, 2.0, 2.0, 2.0], dtype=np.float32)
    ((index, before, after, _),) = _found(medians, _settings(), segmenter=_cuts(4))
    assert (index, before, after) == (4, 1 + 2**-24, 2.0)


def test_sides_without_spread_are_certain():
    # Welch's test is undefined there: different levels are a step (p = 0), equal ones are not
    assert _found([1.0] * 3 + [2.0] * 3, _settings(), segmenter=_cuts(3)) == [(3, 1.0, 2.0, 0.0)]
    assert _found([2.0] * 6, _settings(), segmenter=_cuts(3)) == []


# One flat side of 3 runs (log 0) against 3 runs at log a - h, a, a + h: Welch's standard error is
# sqrt(h^2 / 3), t = a sqrt(3) / h, with 3 - 1 = 2 degrees of freedom (the flat side adds none);
# Student's t-test pools the variances into the same standard error but 4 degrees of freedom.
# With 2: two-sided p = 1 - |t| / sqrt(2 + t^2), so a = 2h (t^2 = 12) gives 1 - sqrt(6 / 7).
H = 0.01
WELCH = [1.0] * 3 + [math.exp(H), math.exp(2 * H), math.exp(3 * H)]
WELCH_P = 1 - math.sqrt(6 / 7)


def test_a_step_with_one_noisy_side_is_welchs_t_test():
    ((index, before, after, p),) = _found(WELCH, _settings(), segmenter=_cuts(3))
    assert (index, before, after) == (3, 1.0, math.exp(2 * H))
    assert p == pytest.approx(WELCH_P, rel=1e-9, abs=0)  # the logs are exact to ~1e-16


def test_a_step_at_exactly_alpha_is_not_significant():
    ((_, _, _, p),) = _found(WELCH, _settings(), segmenter=_cuts(3))
    assert _found(WELCH, _settings(alpha=p), segmenter=_cuts(3)) == []  # p < alpha is the rule
    assert len(_found(WELCH, _settings(alpha=math.nextafter(p, 1)), segmenter=_cuts(3))) == 1


@pytest.mark.parametrize("after", [5.0, 3.0], ids=["slower", "faster"])
def test_a_step_of_exactly_min_effect_counts(after):
    # 4 -> 5 and 4 -> 3 are changes of +-0.25 exactly, in binary too
    medians = [4.0] * 3 + [after] * 3
    assert _found(medians, _settings(min_effect=0.25)) == [(3, 4.0, after, 0.0)]
    assert _found(medians, _settings(min_effect=math.nextafter(0.25, 1))) == []


def test_the_smallest_failing_change_goes_first_and_its_neighbour_is_judged_again():
    # 100 -> 105 (+5%) and 105 -> 111 (+5.7%) both fail a 6% minimum. The smaller goes; over the
    # merged runs the other is 102.5 -> 111 (+8.3%) and stays. Removing the larger first would
    # have left 100 -> 108 (+8%) at run 4.
    medians = [100.0] * 4 + [105.0] * 4 + [111.0] * 4
    ((index, before, after, p),) = _found(medians, _settings(min_effect=0.06), _cuts(4, 8))
    assert (index, before, after) == (8, 102.5, 111.0)
    assert 0 < p < 1e-3  # one flat side against a two-level one: Welch, far from alpha


def test_of_equal_failing_changes_the_less_significant_goes_first():
    # 4 -> 5 and 5 -> 6.25: both +25% exactly, both below a 30% minimum. The first has spread
    # (Welch p > 0), the second none (p = 0): the first goes. Over the merged runs the second is
    # median(4, 4, 4.5, 5, 5, 5) = 4.75 -> 6.25 (+31.6%): it stays. Removing the second first
    # would have left 4 -> median(5, 5, 5, 6.25, 6.25, 6.25) = 5.625 (+40.6%) at run 3.
    medians = [4.0, 4.0, 4.5] + [5.0] * 3 + [6.25] * 3
    ((index, before, after, _),) = _found(medians, _settings(min_effect=0.3), _cuts(3, 6))
    assert (index, before, after) == (6, 4.75, 6.25)


def test_of_equal_failing_changes_and_p_values_the_earlier_goes_first():
    # 4 -> 5 -> 6.25 with 2 runs a level and min_size 2: +25% twice, p = 0 twice, both below a
    # 30% minimum; the earlier goes, and 4.5 -> 6.25 (+38.9%) stays at run 4. Removing the later
    # first would have left 4 -> 5.625 (+40.6%) at run 2.
    medians = [4.0, 4.0, 5.0, 5.0, 6.25, 6.25]
    ((index, before, after, _),) = _found(
        medians, _settings(min_effect=0.3, min_size=2), _cuts(2, 4)
    )
    assert (index, before, after) == (4, 4.5, 6.25)


# The p-value of a proposal that can never be a step is 1, the least significant there is: the
# weakest-first order removes it before any judged proposal of the same change.
@pytest.mark.parametrize(
    ("x", "cut", "p"),
    [
        ([0.0] * 2 + [1.0] * 5, 2, 1.0),  # a short side
        ([0.0] * 5 + [1.0] * 2, 5, 1.0),
        ([0.5] * 6, 3, 1.0),  # two flat sides at the same level
        ([0.0] * 3 + [1.0] * 3, 3, 0.0),  # two flat sides at different levels: certain
        # a variance that underflows (5e-324^2 is 0): scipy's p is NaN, never a step
        ([0.0, 0.0, 5e-324, 0.0, 0.0, 0.0], 3, 1.0),
    ],
    ids=["left-short", "right-short", "flat-equal", "flat-apart", "nan"],
)
def test_a_proposal_that_cannot_be_a_step_has_p_one(x, cut, p):
    x = np.array(x)
    assert steps._judge(np.exp(x), x, [cut], 0, _settings()).p_value == p
