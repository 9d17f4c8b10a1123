"""Steps in one series of run medians: where its level changes, by how much, and how sure.

A series is one benchmark's per-run medians in commit order, within one fingerprint segment (the
caller splits at fingerprint changes; :mod:`perfgate.history.detect`). The search is ruptures'
binary segmentation with a least-squares cost on the log of the medians (a step is a ratio, whatever the
benchmark's size) and a BIC-like penalty scaled by the series' own robust noise; every step it
proposes must then pass two filters, so that noise is never a change:

- the minimum effect: the median of the runs after the step differs from the median of the runs
  before it by at least ``min_effect`` (a fraction);
- significance: Welch's t-test on the two sides' log medians at ``alpha``.

A proposed step that fails either is removed and its neighbours are judged again over the merged
runs, weakest first. Each side of a step holds at least ``min_size`` runs, so a step is found
only once that many runs follow it, and one slow run (a slow episode of the GPU) is never a
segment. docs/history.md records how this was chosen over E-Divisive.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# The least noise a series is assumed to have (relative): a series of identical medians (a
# synthetic test, a clock of coarse ticks) would otherwise make every difference infinitely
# significant.
NOISE_FLOOR = 1e-4


@dataclass(frozen=True)
class StepSettings:
    min_effect: float  # smallest change of level that counts, as a fraction
    min_size: int  # runs each side of a step must hold
    penalty: float  # PELT penalty = penalty x noise^2 x ln(n)
    alpha: float  # Welch's t-test level for a step

    def __post_init__(self) -> None:
        if not (0 < self.min_effect < 1):
            raise ValueError(f"min_effect must be in (0, 1), got {self.min_effect!r}")
        if isinstance(self.min_size, bool) or not isinstance(self.min_size, int):
            raise TypeError(f"min_size must be an int, got {type(self.min_size).__name__}")
        if self.min_size < 2:
            raise ValueError(f"min_size must be >= 2, got {self.min_size}")
        if not (0 < self.penalty < math.inf):
            raise ValueError(f"penalty must be finite and > 0, got {self.penalty!r}")
        if not (0 < self.alpha < 0.5):
            raise ValueError(f"alpha must be in (0, 0.5), got {self.alpha!r}")


@dataclass(frozen=True)
class Step:
    """A change of level: runs ``[.., index)`` before it, ``[index, ..)`` after it."""

    index: int
    before: float  # median of the run medians before the step
    after: float  # ... and after it (up to the next step)
    p_value: float

    @property
    def change(self) -> float:
        """``after / before - 1``: > 0 is slower."""
        return self.after / self.before - 1.0


# A segmenter proposes step indices for log-medians ``x`` with robust noise ``sigma``.
Segmenter = Callable[[np.ndarray, float, StepSettings], list[int]]


def robust_noise(x: np.ndarray) -> float:
    """The run-to-run standard deviation of ``x`` (log medians), robust to steps and outliers:
    1.4826 x the MAD of the first differences, / sqrt(2) (a difference holds two runs' noise)."""
    if len(x) < 3:
        return NOISE_FLOOR
    d = np.diff(x)
    mad = float(np.median(np.abs(d - np.median(d))))
    return max(1.4826 * mad / math.sqrt(2.0), NOISE_FLOOR)


def binseg(x: np.ndarray, sigma: float, settings: StepSettings) -> list[int]:
    """ruptures' binary segmentation, least squares, penalty ``settings.penalty x sigma^2 x
    ln(n)``."""
    import ruptures

    algo = ruptures.Binseg(model="l2", min_size=settings.min_size, jump=1)
    bkps = algo.fit(x.reshape(-1, 1)).predict(pen=settings.penalty * sigma**2 * math.log(len(x)))
    return [int(b) for b in bkps[:-1]]  # the last one is len(x)


def find_steps(
    medians: Sequence[float], settings: StepSettings, *, segmenter: Segmenter = binseg
) -> list[Step]:
    """The steps of one series of positive medians, in order (possibly none)."""
    values = np.asarray(medians, dtype=float)
    if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError("medians must be a 1-d sequence of finite values > 0")
    if len(values) < 2 * settings.min_size:
        return []
    x = np.log(values)
    cuts = sorted(set(segmenter(x, robust_noise(x), settings)))
    if any(not (0 < c < len(x)) for c in cuts):
        raise ValueError(f"segmenter proposed steps outside the series: {cuts}")
    while True:
        steps = [_judge(values, x, cuts, i, settings) for i in range(len(cuts))]
        failing = [
            (abs(s.change), -s.p_value, i)
            for i, s in enumerate(steps)
            if abs(s.change) < settings.min_effect or not s.p_value < settings.alpha
        ]
        if not failing:
            return steps
        del cuts[min(failing)[2]]  # the weakest goes; its neighbours are judged again


def _judge(values: np.ndarray, x: np.ndarray, cuts: list[int], i: int, settings) -> Step:
    from scipy import stats

    lo = cuts[i - 1] if i > 0 else 0
    hi = cuts[i + 1] if i + 1 < len(cuts) else len(x)
    cut = cuts[i]
    left, right = x[lo:cut], x[cut:hi]
    if len(left) < settings.min_size or len(right) < settings.min_size:
        p = 1.0  # a custom segmenter's short side: never a step
    elif np.ptp(left) == 0 and np.ptp(right) == 0:
        p = 0.0 if left[0] != right[0] else 1.0  # Welch's test is undefined without spread
    else:
        with warnings.catch_warnings():
            # nearly identical medians on a side lose precision in the variance; p stays usable
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(stats.ttest_ind(left, right, equal_var=False).pvalue)
        p = 1.0 if math.isnan(p) else p
    return Step(
        index=cut,
        before=float(np.median(values[lo:cut])),
        after=float(np.median(values[cut:hi])),
        p_value=p,
    )
