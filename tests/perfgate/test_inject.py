"""The injected slowdown's calibration (perfgate.inject): the cycles for a target time from two
timed sleeps. The sleep itself needs a GPU; its true size is measured by the experiment."""

from __future__ import annotations

import pytest

from perfgate import inject


def test_cycles_come_from_the_line_through_two_timed_sleeps():
    # 2 us launch floor + 0.5 ns per cycle: 100 us needs (100 - 2) us / 0.5 ns = 196000 cycles
    small, large = (200_000, 2e-6 + 200_000 * 0.5e-9), (1_600_000, 2e-6 + 1_600_000 * 0.5e-9)
    assert inject.sleep_cycles(100e-6, small, large) == 196_000
    # a target below the floor still gets a sleep node; the measured true size shows the rest
    assert inject.sleep_cycles(1e-6, small, large) == 1


@pytest.mark.parametrize(
    ("small", "large", "match"),
    [
        ((200_000, 2e-4), (200_000, 4e-4), "small bytes < large"),  # same point twice
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
