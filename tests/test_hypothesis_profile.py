"""The ``ci`` hypothesis profile (tests/conftest.py): a failing property test reports at once,
with its failing example, instead of shrinking through the Triton interpreter for minutes."""

from __future__ import annotations

import re

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st


def test_ci_profile_has_no_shrink_phase():
    assert Phase.shrink not in settings.get_profile("ci").phases
    assert Phase.generate in settings.get_profile("ci").phases  # it still searches


def test_ci_profile_reports_the_first_failure_with_its_example():
    calls_after_failure: list[list[int]] = []
    failures: list[list[int]] = []

    @settings(settings.get_profile("ci"))
    @given(st.lists(st.integers(0, 10**6), min_size=1))
    def prop(xs):
        if failures:
            calls_after_failure.append(xs)
        if sum(xs) > 1000:
            failures.append(xs)
            raise AssertionError("sum too big")

    with pytest.raises(AssertionError, match="sum too big") as info:
        prop()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    # the example is in the report, with its value ("Falsifying example" before hypothesis
    # 6.16x, "Failing test case" after)
    assert re.search(r"(Falsifying example|Failing test case): prop\(\s*xs=\[\d+", notes), notes
    assert "@reproduce_failure" in notes  # and the blob that replays it
    # One replay of the failing example at most; shrinking would call it hundreds of times.
    assert len(calls_after_failure) <= 1
