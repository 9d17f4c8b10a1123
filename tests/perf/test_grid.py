"""The production grid, 19 (N, K) x M in 1..256 (group ``grid``; ``slow``, not run by default).

Select with ``-m slow`` / ``-k grid``, or a part of it, e.g. ``-k "grid and n7168"``.
"""

from __future__ import annotations

import pytest

from perfgate.shapes import GRID
from perfgate.timing import device_clock

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.bench,
    pytest.mark.slow,
    pytest.mark.benchmark(group="grid", timer=device_clock),
]


@pytest.mark.parametrize("shape", GRID, ids=[s.id for s in GRID])
def test_grid(benchmark, harness, shape):
    harness.gemm(benchmark, shape)
