"""The host path of the six ranked shapes: host time per ``custom_kernel`` call (group ``host``).

Timed only in the ``host`` timing mode (``python -m perfgate bench --mode host``), which times
nothing else: a sample is the host time per call of a batch of back-to-back calls on an idle
GPU. Named ``test_host_time`` because tests/perfgate/test_host.py (the count gate) exists and the
test directories are not packages.
"""

from __future__ import annotations

import pytest

from perfgate.catalog import GROUPS
from perfgate.measure.clock import device_clock

GROUP = GROUPS["host"]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.bench,
    pytest.mark.benchmark(group=GROUP.name, timer=device_clock),
]


@pytest.mark.parametrize("shape", GROUP.items, ids=GROUP.ids())
def test_host(benchmark, harness, shape):
    harness.host(benchmark, shape)
