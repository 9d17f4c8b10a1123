"""The injected slowdown's calibration (lab.inject): the cycles for a target time from two
timed sleeps. The sleep itself needs a GPU; its true size is measured by the experiment."""

from __future__ import annotations

import pytest

from lab import inject
from lab.inject import INJECT_ENV, slowdown_fraction, solve_line


def test_cycles_come_from_the_line_through_two_timed_sleeps():
    # 2 us launch floor + 0.5 ns per cycle: 100 us needs (100 - 2) us / 0.5 ns = 196000 cycles
    small, large = (200_000, 2e-6 + 200_000 * 0.5e-9), (1_600_000, 2e-6 + 1_600_000 * 0.5e-9)
    assert inject.sleep_cycles(100e-6, small, large) == 196_000
    # a target below the floor still gets a sleep node; the measured true size shows the rest
    assert inject.sleep_cycles(1e-6, small, large) == 1


@pytest.mark.parametrize(
    ("small", "large", "match"),
    [
        ((200_000, 2e-4), (200_000, 4e-4), "small size < large"),  # same point twice
        ((200_000, 4e-4), (1_600_000, 2e-4), "must take longer"),  # a clock that went backwards
    ],
)
def test_bad_calibration_points_are_refused(small, large, match):
    with pytest.raises(ValueError, match=match):
        inject.sleep_cycles(1e-4, small, large)


@pytest.mark.parametrize("cycles", [0, -5, 1.5, True])
def test_a_sleep_needs_a_positive_int_of_cycles(cycles):
    with pytest.raises(ValueError, match="cycles must be an int >= 1"):
        inject.DeviceSleep(cycles)


# -- the closed loop: the measured size, not a fitted line, decides the cycles ---------------
class FakeSleep:
    """A sleep whose true size is ``(fixed + cycles x spc) / plain``, measured with noise."""

    def __init__(self, fixed, spc=0.5e-9, plain=50e-6, noise=0.0, seed=0):
        import numpy as np

        self.fixed, self.spc, self.plain = fixed, spc, plain
        self.noise, self.rng = noise, np.random.default_rng(seed)
        self.asked: list[int] = []

    def __call__(self, cycles):
        self.asked.append(cycles)
        size = (self.fixed + cycles * self.spc) / self.plain
        return size + self.noise * self.rng.standard_normal()


@pytest.mark.parametrize("level", [0.03, 0.05, 0.10])
def test_the_closed_loop_corrects_a_fixed_cost_the_first_guess_ignores(level):
    # 1 us of fixed cost on a 50 us replay is 2%: the first guess (no fixed cost) measures
    # level + 2%, the second step removes it
    fake = FakeSleep(fixed=1.0e-6)
    cal = inject.closed_loop(level, fake.plain, fake.spc, fake)
    assert cal.converged and not cal.floor_limited
    assert abs(cal.achieved / level - 1) <= inject.TOLERANCE
    assert cal.steps[0][1] == pytest.approx(level + 0.02, abs=1e-4)
    assert len(cal.steps) == 2 and cal.cycles == fake.asked[-1]
    assert cal.achieved == pytest.approx((1.0e-6 + cal.cycles * fake.spc) / fake.plain)


def test_the_closed_loop_converges_under_measurement_noise():
    fake = FakeSleep(fixed=1.0e-6, noise=0.001, seed=3)
    cal = inject.closed_loop(0.03, fake.plain, fake.spc, fake)
    assert cal.converged, cal.steps
    assert abs(cal.achieved / 0.03 - 1) <= inject.TOLERANCE


def test_a_level_below_the_fixed_cost_keeps_one_cycle_and_says_so():
    # 3 us of fixed cost on 50 us is 6%: no sleep can add only 3%
    fake = FakeSleep(fixed=3e-6)
    cal = inject.closed_loop(0.03, fake.plain, fake.spc, fake)
    assert cal.cycles == 1 and cal.floor_limited and not cal.converged
    assert cal.achieved == pytest.approx(0.06, abs=1e-4)
    assert fake.asked.count(1) == 1  # it stopped once the model asked for one cycle again


def test_the_closed_loop_keeps_the_closest_step_when_out_of_steps():
    sizes = iter([0.08, 0.025, 0.07, 0.035])
    cal = inject.closed_loop(0.05, 50e-6, 0.5e-9, lambda c: next(sizes), max_steps=2)
    assert [s[1] for s in cal.steps] == [0.08, 0.025] and cal.achieved == 0.025
    assert not cal.converged


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"level": 0.0}, "level must be a fraction"),
        ({"level": 1.0}, "level must be a fraction"),
        ({"plain_seconds": 0.0}, "plain_seconds must be > 0"),
        ({"spc": -1.0}, "spc must be > 0"),
        ({"max_steps": 0}, "max_steps must be an int >= 1"),
    ],
)
def test_the_closed_loop_refuses_bad_arguments(kwargs, match):
    args = {"level": 0.05, "plain_seconds": 50e-6, "spc": 0.5e-9, **kwargs}
    level, plain, spc = args.pop("level"), args.pop("plain_seconds"), args.pop("spc")
    with pytest.raises(ValueError, match=match):
        inject.closed_loop(level, plain, spc, lambda c: 0.05, **args)


def test_seconds_per_cycle_is_the_slope_of_two_sleeps():
    small, large = (200_000, 2e-6 + 200_000 * 0.5e-9), (1_600_000, 2e-6 + 1_600_000 * 0.5e-9)
    assert inject.seconds_per_cycle(small, large) == pytest.approx(0.5e-9, rel=1e-12)
    with pytest.raises(ValueError, match="small cycles < large"):
        inject.seconds_per_cycle(large, small)
    with pytest.raises(ValueError, match="must take longer"):
        inject.seconds_per_cycle((1, 2e-4), (2, 1e-4))


# -- the open loop of a pytest benchmark run (MXFP4_BENCH_INJECT_SLOWDOWN) -----------------------
# -- injected slowdown ------------------------------------------------------------------------
def test_solve_line_inverts_the_linear_cost_model():
    # a unit costs 2 us + 1 s per 2**40 units; 2**20 and 2**26 units give exact dyadic times
    a, b = 2e-6, 2.0**-40
    small, large = (2**20, a + b * 2**20), (2**26, a + b * 2**26)
    target = a + b * 40 * 4096 * 1024
    assert solve_line(target, small, large) == 40 * 4096 * 1024


def test_solve_line_never_goes_below_the_floor():
    # asking for 1 us when the launch floor alone is 2 us: the minimum, not a negative size
    assert solve_line(1e-6, (2**20, 3e-6), (2**26, 5e-6)) == 1
    assert solve_line(1e-6, (2**20, 3e-6), (2**26, 5e-6), minimum=4096) == 4096


@pytest.mark.parametrize(
    "small, large, target",
    [
        ((2**26, 1e-5), (2**20, 2e-6), 1e-6),  # sizes in the wrong order
        ((2**20, 5e-6), (2**26, 4e-6), 1e-6),  # a bigger copy that is faster: bad measurement
        ((2**20, 2e-6), (2**26, 5e-6), 0.0),  # nothing to inject
    ],
)
def test_solve_line_rejects_bad_measurements(small, large, target):
    with pytest.raises(ValueError):
        solve_line(target, small, large)


@pytest.mark.parametrize(
    "raw, expected",
    [("", 0.0), ("0", 0.0), ("0.05", 0.05), (" 0.1 ", 0.1)],
)
def test_slowdown_fraction(raw, expected):
    assert slowdown_fraction({INJECT_ENV: raw}) == expected
    assert slowdown_fraction({}) == 0.0


@pytest.mark.parametrize("raw", ["5%", "1", "-0.05", "nan"])
def test_slowdown_fraction_rejects_nonsense(raw):
    with pytest.raises(ValueError, match=INJECT_ENV):
        slowdown_fraction({INJECT_ENV: raw})
