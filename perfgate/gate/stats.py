"""The verdict on one benchmark: baseline samples against current samples.

Design (see docs/perfgate-compare.md for the reasoning and the measured error rates):

- **Effect size** is the ratio of medians, ``median(current) / median(baseline)``: > 1 is slower.
  Medians, not means, because GPU timings have rare large spikes (preemption, clock dips) that move
  a mean by several percent while leaving the median alone.
- **Evidence** needs BOTH of
  (a) a one-sided Mann-Whitney U rank test on the raw samples, p < ``alpha``, and
  (b) a seeded percentile-bootstrap confidence interval of the median ratio lying entirely beyond
      the threshold: ``ci_low > 1 + threshold`` for a regression, ``ci_high < 1 / (1 + threshold)``
      for an improvement (log-symmetric: swapping baseline and current swaps the two verdicts).
  The interval is two-sided at level ``1 - 2 * alpha``, so each bound is a one-sided
  ``1 - alpha`` bound, the same error rate as the rank test.
- **Threshold** (:meth:`Settings.threshold`), by what is known about the baseline's drift:
  against a pooled baseline that records its per-run medians,
  ``max(min_effect_drift, drift_factor * drift)`` (2.5%, 3x), ``drift`` being the robust
  run-to-run standard deviation of those medians (:func:`perfgate.gate.baseline.run_drift`,
  ``1.4826 x MAD / median``: one run in a slow episode does not raise it); against a single run,
  ``max(min_effect, noise_factor * noise)`` (3%, 2x), ``noise`` being the robust relative spread
  of the samples (``1.4826 * MAD / median`` of each side, root mean square of the two), a proxy
  for the drift nobody measured. (``perfgate ab`` judges its two sides elsewhere, worker
  process against worker process: :mod:`perfgate.gate.process_ab`.)
- **Grey zone.** A significant test whose interval straddles the threshold, or an interval too wide
  to exclude a change beyond the threshold, is ``inconclusive``: rerun with more rounds. So is a
  side with fewer than ``min_samples`` samples: a rank test on fewer samples cannot
  reach p < 0.01 for realistic shifts, and a median bootstrap on them is lumpy.
- **Repeated looks** (adaptive rounds, :mod:`perfgate.measure.adaptive`): with ``looks`` looks each is
  judged at ``alpha / looks`` (Bonferroni), rank test and interval alike.
- **Multiple benchmarks.** ``alpha`` is per benchmark, with no Bonferroni/Holm correction over
  benchmarks: the effect threshold, not alpha, keeps the family-wise false-alarm rate low, and a
  Bonferroni alpha over hundreds of grid benchmarks would cost the power to see 5% slowdowns.

Everything is deterministic: the bootstrap is seeded, so the same files give the same verdicts.
The settings' values live in ``[tool.perfgate]`` of pyproject.toml (:mod:`perfgate.gate.settings`).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfgate.gate.settings import Settings
from perfgate.gate.verdict import IMPROVEMENT, INCONCLUSIVE, REGRESSION, UNCHANGED

# 1.4826 * MAD estimates the standard deviation of Gaussian data.
_MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class Result:
    """The verdict on one benchmark and the numbers behind it.

    ``ratio``/``ci_low``/``ci_high`` are current/baseline median ratios (> 1 is slower);
    ``p_value`` is the smaller of the two one-sided rank-test p-values; ``threshold`` and
    ``noise`` are fractions (0.03 is 3%). The statistics are ``None`` where too few samples
    make them meaningless.
    """

    verdict: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    threshold: float
    noise: float
    n_base: int
    n_cur: int
    reason: str


def relative_spread(samples: np.ndarray) -> float:
    """Robust coefficient of variation: 1.4826 * MAD / median (0 for constant samples)."""
    med = float(np.median(samples))
    return _MAD_TO_SIGMA * float(np.median(np.abs(samples - med))) / med


def compare_samples(
    baseline: Sequence[float] | np.ndarray,
    current: Sequence[float] | np.ndarray,
    settings: Settings | None = None,
    *,
    drift: float | None = None,
    looks: int = 1,
) -> Result:
    """The verdict on ``current`` against ``baseline`` (raw per-round times, any one unit).

    ``drift``: the baseline's run-to-run drift of medians (a fraction, ``baseline.drifts``),
    which sets the threshold instead of the within-run noise; ``looks``: how many looks the
    adaptive procedure may take, each at ``alpha / looks``.
    """
    settings = Settings() if settings is None else settings
    if not isinstance(settings, Settings):
        raise TypeError(
            f"settings must be a perfgate.gate.stats.Settings, got {type(settings).__name__}"
        )
    base = _as_samples("baseline", baseline)
    cur = _as_samples("current", current)

    if drift is not None and not (isinstance(drift, (int, float)) and 0 <= drift < math.inf):
        raise ValueError(f"drift must be a finite fraction >= 0, got {drift!r}")
    alpha = settings.look_alpha(looks)
    ratio = float(np.median(cur) / np.median(base))
    noise = math.sqrt((relative_spread(base) ** 2 + relative_spread(cur) ** 2) / 2)
    threshold = settings.threshold(noise, drift=drift)

    def result(verdict: str, reason: str, ci=(None, None), p=None) -> Result:
        return Result(
            verdict, ratio, ci[0], ci[1], p, threshold, noise, base.size, cur.size, reason
        )

    if min(base.size, cur.size) < settings.min_samples:
        return result(
            INCONCLUSIVE,
            f"too few samples ({base.size} baseline, {cur.size} current; need "
            f">= {settings.min_samples} a side): rerun with more rounds",
        )

    p_slower, p_faster = _rank_test(base, cur)
    ci_low, ci_high = bootstrap_ratio_ci(base, cur, settings, confidence=1 - 2 * alpha)
    ci = (ci_low, ci_high)
    p = min(p_slower, p_faster)
    upper, lower = 1 + threshold, 1 / (1 + threshold)
    band = f"±{threshold:.1%} threshold"

    if p_slower < alpha and ci_low > upper:
        return result(REGRESSION, f"slower: CI above +{threshold:.1%}, p={p_slower:.2g}", ci, p)
    if p_faster < alpha and ci_high < lower:
        return result(IMPROVEMENT, f"faster: CI below -{threshold:.1%}, p={p_faster:.2g}", ci, p)
    if lower <= ci_low and ci_high <= upper:
        return result(UNCHANGED, f"CI within the {band}", ci, p)
    if p < alpha:
        return result(
            INCONCLUSIVE,
            f"grey zone: significant (p={p:.2g}) but the CI straddles the {band}; "
            "rerun with more rounds",
            ci,
            p,
        )
    return result(
        INCONCLUSIVE,
        f"too noisy to tell: the CI reaches beyond the {band} without a significant rank test; "
        "rerun with more rounds",
        ci,
        p,
    )


def _rank_test(base: np.ndarray, cur: np.ndarray) -> tuple[float, float]:
    """One-sided Mann-Whitney U p-values for "current is slower" and "current is faster"."""
    from scipy.stats import mannwhitneyu

    p_slower = float(mannwhitneyu(cur, base, alternative="greater").pvalue)
    p_faster = float(mannwhitneyu(cur, base, alternative="less").pvalue)
    # All samples tied (e.g. a quantised timer): no evidence either way. scipy returns 1 or NaN
    # depending on version; make it 1 so that NaN never reaches a comparison.
    return (
        1.0 if math.isnan(p_slower) else p_slower,
        1.0 if math.isnan(p_faster) else p_faster,
    )


def _median_ratio(cur: np.ndarray, base: np.ndarray, axis: int) -> np.ndarray:
    return np.median(cur, axis=axis) / np.median(base, axis=axis)


# Elements per side that one vectorised bootstrap batch may hold (x 8 bytes, plus the median's
# copy): bounds memory whatever the sample count (a 10k-sample side once took 1.8 GB).
_BATCH_ELEMENTS = 2_000_000


def bootstrap_ratio_ci(
    base: np.ndarray, cur: np.ndarray, settings: Settings, *, confidence: float | None = None
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median ratio, the two sides resampled independently.

    Percentile rather than BCa: BCa's jackknife acceleration is degenerate for medians of
    samples with ties, and percentile is what the documented error rates were measured with.

    A side of more than ``bootstrap_max_samples`` samples is bootstrapped m-out-of-n: a seeded
    subset of m samples is resampled and each bootstrap median's deviation from the subset's
    median is shrunk by sqrt(m / n), the median's standard error scaling with 1 / sqrt(n). The
    time and memory per benchmark are then bounded; the interval is the full-n one to first order.
    """
    from scipy.stats import bootstrap

    level = settings.confidence if confidence is None else confidence
    if np.all(base == base[0]) and np.all(cur == cur[0]):
        # scipy warns on a degenerate (zero-width) distribution; the answer is exact here.
        r = float(cur[0] / base[0])
        return r, r
    rng = np.random.default_rng(settings.seed)
    cap = settings.bootstrap_max_samples
    cur_m, base_m = _subset(cur, cap, rng), _subset(base, cap, rng)
    statistic = _median_ratio
    if cur_m.size < cur.size or base_m.size < base.size:
        statistic = _shrunk_ratio(cur, base, cur_m, base_m)
    res = bootstrap(
        (cur_m, base_m),
        statistic,
        n_resamples=settings.n_resamples,
        batch=max(1, _BATCH_ELEMENTS // max(cur_m.size, base_m.size)),
        vectorized=True,
        paired=False,
        confidence_level=level,
        method="percentile",
        **{_rng_keyword(): rng},
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _subset(x: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    return x if x.size <= cap else rng.choice(x, size=cap, replace=False)


def _shrunk_ratio(cur: np.ndarray, base: np.ndarray, cur_m: np.ndarray, base_m: np.ndarray):
    """The m-out-of-n statistic: the full-sample ratio moved by the subsets' bootstrap
    deviations (in logs), each shrunk by sqrt(m / n)."""
    log_ratio = math.log(np.median(cur) / np.median(base))
    c_hat, b_hat = math.log(np.median(cur_m)), math.log(np.median(base_m))
    c_scale = math.sqrt(cur_m.size / cur.size)
    b_scale = math.sqrt(base_m.size / base.size)

    def statistic(c: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        dc = np.log(np.median(c, axis=axis)) - c_hat
        db = np.log(np.median(b, axis=axis)) - b_hat
        return np.exp(log_ratio + c_scale * dc - b_scale * db)

    return statistic


@functools.cache
def _rng_keyword() -> str:
    """scipy >= 1.15 names the generator ``rng``; older releases only know ``random_state``."""
    from scipy.stats import bootstrap

    return "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"


def _as_samples(name: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(
            f"{name} must be a 1-D sequence of sample times, got {type(values).__name__}"
        )
    arr = np.asarray(values)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of samples, got shape {arr.shape}")
    arr = arr.astype(np.float64)
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} samples must be finite and > 0; sample {i} is {float(arr[i])!r}")
    return arr
