"""The split-K reducer alone on the long-K shapes' partials (group ``reducer``)."""

from __future__ import annotations

import pytest

from perfgate.catalog import GROUPS
from perfgate.measure.clock import device_clock

GROUP = GROUPS["reducer"]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.bench,
    pytest.mark.benchmark(group=GROUP.name, timer=device_clock),
]


@pytest.mark.parametrize("case", GROUP.items, ids=GROUP.ids())
def test_reducer(benchmark, harness, case):
    harness.reducer(benchmark, case)
