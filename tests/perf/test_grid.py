"""The production grid, 19 (N, K) x M in 1..256 (group ``grid``; ``slow``, not run by default).

Select with ``-m slow`` / ``-k grid``, or a part of it, e.g. ``-k "grid and n7168"``.
"""

from __future__ import annotations

import pytest

from perfgate.catalog import GROUPS
from perfgate.measure.clock import device_clock

GROUP = GROUPS["grid"]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.bench,
    pytest.mark.slow,
    pytest.mark.benchmark(group=GROUP.name, timer=device_clock),
]


@pytest.mark.parametrize("shape", GROUP.items, ids=GROUP.ids())
def test_grid(benchmark, harness, shape):
    harness.gemm(benchmark, shape)
