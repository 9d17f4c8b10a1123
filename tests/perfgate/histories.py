"""GPU-like run histories for the change-point tests (and the lab's detector comparison,
lab/scripts/changepoint_compare.py): per-run medians of one benchmark, a level with 0.5%
log-normal run-to-run noise and in 5% of the runs a slow episode of +2.4..4.2% (the H200's)."""

from __future__ import annotations

import numpy as np

NOISE = 0.005
EPISODE_P, EPISODE = 0.05, (0.024, 0.042)


def series(rng: np.random.Generator, n: int, step: float, at: int) -> np.ndarray:
    log = rng.normal(0.0, NOISE, n)
    slow = rng.random(n) < EPISODE_P
    log[slow] += np.log1p(rng.uniform(*EPISODE, slow.sum()))
    log[at:] += np.log1p(step)
    return 10e-6 * np.exp(log)
