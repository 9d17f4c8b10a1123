"""The six ranked leaderboard shapes: the full GEMM (group ``leaderboard``)."""

from __future__ import annotations

import pytest

from perfgate.catalog import GROUPS
from perfgate.measure.clock import device_clock

GROUP = GROUPS["leaderboard"]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.bench,
    pytest.mark.benchmark(group=GROUP.name, timer=device_clock),
]


@pytest.mark.parametrize("shape", GROUP.items, ids=GROUP.ids())
def test_leaderboard(benchmark, harness, shape):
    harness.gemm(benchmark, shape)
