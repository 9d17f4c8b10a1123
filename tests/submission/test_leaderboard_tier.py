"""The leaderboard tier: what GPU MODE's harness checks, and nothing more.

One test per case of task.yml (four test cases, six benchmark cases), each on the harness's
generator with its seed, the call on a copy of the inputs, its rule on every output
(:mod:`perfgate.submission.tiers`). On a GPU a benchmark case checks all 101 outputs leaderboard
mode checks (its seed, then seed + 13 before each of up to 100 timed calls); on a CPU, the first
(in Triton's interpreter the ten first calls of an exported file take about 75 s; the re-seeded
ones would take two hours), and the values come from torch's CPU generator, not the GPU's.
``python -m perfgate submission test FILE`` decides its exit code on this tier by default.
"""

from __future__ import annotations

import pytest

from perfgate.submission import tiers

pytestmark = pytest.mark.leaderboard


@pytest.mark.parametrize("check", tiers.CHECKS, ids=lambda c: f"{c.id}-seed{c.seed}")
def test_the_harness_accepts_the_output(custom_kernel, device, check, record_property):
    outcome = tiers.run_check(custom_kernel, check, device)
    record_property("calls", outcome.calls)
    if outcome.failure is not None:
        pytest.fail(f"{check.id}: {outcome.failure}", pytrace=False)
