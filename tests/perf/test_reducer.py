"""The split-K reducer alone on the long-K shapes' partials (group ``reducer``)."""

from __future__ import annotations

import pytest

from perfgate.shapes import REDUCER
from perfgate.timing import device_clock

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.bench,
    pytest.mark.benchmark(group="reducer", timer=device_clock),
]


@pytest.mark.parametrize("case", REDUCER, ids=[c.id for c in REDUCER])
def test_reducer(benchmark, harness, case):
    harness.reducer(benchmark, case)
