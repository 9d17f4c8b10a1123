"""The submission contract tests: every test here speaks to the code under test only through
``custom_kernel(data)`` (the fixture of :mod:`perfgate.submission.pytest_plugin`: the package's
by default, ``--submission FILE``'s otherwise), and judges it with the package's reference
(:mod:`kernels.reference`), which never depends on where ``custom_kernel`` comes from.

``python -m perfgate submission test FILE [pytest args]`` runs this directory against FILE.
"""

from __future__ import annotations

import pytest
import torch

# Small shapes whose K is long enough that the package splits K on this device (its occupancy
# model; the tuned tables hold only the task's shapes): they send a submission that splits K
# through its reducer. The first of them that splits is used.
LONG_K_CANDIDATES = ((4, 64, 4096), (4, 64, 7168), (4, 64, 8192))


@pytest.fixture(scope="session")
def long_k_shape(device: torch.device) -> tuple[int, int, int]:
    """(M, N, K), N a multiple of 64 as the task's, on which the package's config splits K."""
    from kernels.configs import select_config
    from kernels.device import device_info
    from kernels.gemm_config import effective_splits

    info = device_info()
    for m, n, k in LONG_K_CANDIDATES:
        if effective_splits(k, select_config(m, n, k, info)) > 1:
            return m, n, k
    pytest.fail(
        f"none of {LONG_K_CANDIDATES} splits K on {info.arch}: add a shape that does, so that "
        "the contract tests still reach a split-K reduction"
    )
