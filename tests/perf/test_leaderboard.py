"""The six ranked leaderboard shapes: the full GEMM (group ``leaderboard``)."""

from __future__ import annotations

import pytest

from perfgate.shapes import LEADERBOARD
from perfgate.timing import device_clock

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.bench,
    pytest.mark.benchmark(group="leaderboard", timer=device_clock),
]


@pytest.mark.parametrize("shape", LEADERBOARD, ids=[s.id for s in LEADERBOARD])
def test_leaderboard(benchmark, harness, shape):
    harness.gemm(benchmark, shape)
