"""The host path of the six ranked shapes: host time per ``custom_kernel`` call (group ``host``).

Timed only in the ``host`` timing mode (``python -m perfgate bench --mode host``), which times
nothing else: a sample is the host time per call of a batch of back-to-back calls on an idle
GPU. Named ``test_host_time`` because tests/perfgate/test_host.py (the count gate) exists and the
test directories are not packages.
"""

from __future__ import annotations

import pytest

from perfgate.shapes import LEADERBOARD
from perfgate.timing import device_clock

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.bench,
    pytest.mark.benchmark(group="host", timer=device_clock),
]


@pytest.mark.parametrize("shape", LEADERBOARD, ids=[s.id for s in LEADERBOARD])
def test_host(benchmark, harness, shape):
    harness.host(benchmark, shape)
