"""Same-job A/B with the worker process as the unit of replication.

Why: a worker process keeps a level of its own for its whole life, common to every shape it
times (up to 1.7% on the H200 in leaderboard mode, docs/views.md). Two processes of the same
code then differ by more than their rounds' noise, and a test that treats each round as an
independent sample (today's :func:`perfgate.gate.stats.compare_samples`) reads that difference as a
change: the more rounds, the surer it is of a difference that is not there. Here each side is
measured in several processes, and the statistics only trust what replicates across processes.

**Design** (docs/ab-process-level.md has the measurements behind every number):

- *Measurement*: each side in ``P`` worker processes (``ab_<mode>.processes``), alive at once and
  alternated A1 B1 A2 B2 ... in the ABBA blocks of :mod:`perfgate.measure.interleave`, each giving
  ``R`` rounds (``ab_<mode>.rounds``) of every benchmark. Interleaving cancels what hits
  the GPU over time; the process level is left, and it is what the statistics see.
- *Per process*: the log of the 20%-trimmed mean of its rounds (robust to the rare slow
  round, and finer than a median under a coarse clock tick: a median of quantised rounds
  moves in whole ticks).
- *Test*: Student's two-sample t on those per-process values (``P`` against ``P``, pooled
  variance, ``2P - 2`` degrees of freedom), its one-sided bounds at ``alpha / looks``. Both
  sides' processes come from the same population under the null, so the pooled variance is
  the right one and keeps the degrees of freedom that a Welch test loses with few processes.
- *Verdict* (the vocabulary of :mod:`perfgate.gate.stats`), on ``change = exp(d) - 1`` with ``d``
  the difference of the sides' mean log levels, and its interval:
  ``regression`` when the lower bound is above ``+floor``; ``improvement`` when the upper
  bound is below ``-floor``; else ``unchanged`` when the interval lies within
  ``+-min_effect``; else ``inconclusive`` (measure more processes).
  ``min_effect`` (``ab_<mode>.min_effect``) is the size the gate must see; ``floor``
  (``ab_<mode>.floor``)
  the smallest slowdown that fails it. A floor of zero fails any significant slowdown; a floor
  above zero keeps a systematic difference between the sides that no replication removes (a
  temporary worktree's path, its cache) from failing the gate.
- *Adaptive looks*: ``processes`` lists the processes a side at each look, e.g.
  ``(3, 6, 12, 24)``; each look's processes give ``R x round_growth**(k-1)`` rounds
  (:meth:`Design.schedule`); only the undecided benchmarks are measured further (new processes
  prepare only them); every look tests at ``alpha / looks`` (Bonferroni, as
  :mod:`perfgate.measure.adaptive`).

Everything is deterministic (no resampling): the same samples always give the same verdict.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfgate.gate.stats import IMPROVEMENT, INCONCLUSIVE, REGRESSION, UNCHANGED

VERDICTS = (REGRESSION, IMPROVEMENT, UNCHANGED, INCONCLUSIVE)
_CODE = {v: i for i, v in enumerate(VERDICTS)}
# Fewer rounds than this in a process: its trimmed mean is not a level but a few rounds.
MIN_ROUNDS = 10
MIN_PROCESSES = 2
METHODS = ("student", "welch")


@dataclass(frozen=True)
class Design:
    """The knobs of the process-level verdict; :func:`design_for` makes one from
    ``[tool.perfgate.ab_<mode>]`` (``min_effect``, ``floor``, ``processes`` doubled over
    ``looks``, ``rounds``) and ``alpha``; ``round_growth`` stays 1 there (each worker is
    measured in one look and closed after it).

    ``processes`` lists the processes a side at each look (its length is the number of looks):
    ``(3, 6, 12, 24)`` judges every benchmark on 3 + 3 processes, measures the undecided ones in
    3 more processes a side and judges again, then in 6 and 12 more. ``rounds`` is each
    process's rounds at the first look, multiplied by ``round_growth`` at every later look (the
    old processes are topped up; with the default 1 a process is measured in one look only and
    can be closed after it). The defaults are the design docs/ab-process-level.md recommends for
    device mode."""

    min_effect: float = 0.01
    floor: float = 0.0025
    processes: tuple[int, ...] = (3, 6, 12, 24)
    rounds: int = 100
    alpha: float = 0.01
    round_growth: int = 1
    trim: float = 0.2
    method: str = "student"

    def __post_init__(self) -> None:
        _fraction("min_effect", self.min_effect, 0, 1, open_low=True)
        _fraction("floor", self.floor, 0, self.min_effect)
        _fraction("alpha", self.alpha, 0, 0.5, open_low=True, open_high=True)
        _fraction("trim", self.trim, 0, 0.5, open_high=True)
        object.__setattr__(self, "processes", _process_looks(self.processes))
        _integer("rounds", self.rounds, MIN_ROUNDS)
        _integer("round_growth", self.round_growth, 1, 2)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")

    @property
    def looks(self) -> int:
        return len(self.processes)

    @property
    def look_alpha(self) -> float:
        """The one-sided level of each look: the chance that any look raises a false alarm
        stays below ``alpha`` (union bound)."""
        return self.alpha / self.looks

    def schedule(self) -> list[tuple[int, int]]:
        """(processes a side, rounds a process) at each look."""
        return [(p, self.rounds * self.round_growth**k) for k, p in enumerate(self.processes)]


MAX_LOOKS = 8


def design_for(gate: Any, mode: str) -> Design:
    """The design of ``mode``'s A/B from the settings (``[tool.perfgate.ab_<mode>]`` and
    ``alpha``; perfgate.gate.settings.GateSettings): ``processes`` a side at the first look,
    doubled at each of ``looks``, ``rounds`` a process."""
    if mode not in gate.ab:
        raise ValueError(f"mode must be one of {', '.join(gate.ab)} for an A/B, got {mode!r}")
    keys = gate.ab[mode]
    return Design(
        min_effect=keys["min_effect"],
        floor=keys["floor"],
        processes=tuple(keys["processes"] * 2**k for k in range(keys["looks"])),
        rounds=keys["rounds"],
        alpha=gate.stats.alpha,
    )


def _process_looks(processes) -> tuple[int, ...]:
    what = "processes must be a non-empty sequence of increasing ints >= 2 (processes a side "
    what += f"at each look, at most {MAX_LOOKS} looks), got {processes!r}"
    if isinstance(processes, (str, bytes)) or not hasattr(processes, "__len__"):
        raise ValueError(what)
    out = tuple(processes)
    ints = all(isinstance(p, int) and not isinstance(p, bool) for p in out)
    if not out or len(out) > MAX_LOOKS or not ints or out[0] < MIN_PROCESSES:
        raise ValueError(what)
    if any(b <= a for a, b in itertools.pairwise(out)):
        raise ValueError(what)
    return out


@dataclass(frozen=True)
class ProcessResult:
    """One benchmark's verdict and the numbers a report row shows.

    ``ratio``/``ci_low``/``ci_high``: head/base level ratios (> 1 is slower), the interval
    two-sided at ``1 - 2 x alpha / looks``; ``change`` is ``ratio - 1``; ``p_value`` the smaller
    one-sided p of the t-test; ``threshold`` is ``min_effect`` and ``floor`` the smallest
    slowdown that fails; ``noise`` the relative spread of a process's level (pooled SD of the
    per-process log levels); ``n_base``/``n_cur`` the processes per side (the unit of
    replication) and ``rounds_base``/``rounds_cur`` the rounds behind them;
    ``baseline_median``/``current_median`` each side's level (the geometric mean of its
    processes' trimmed means).
    """

    verdict: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    threshold: float
    floor: float
    noise: float | None
    n_base: int
    n_cur: int
    rounds_base: int
    rounds_cur: int
    baseline_median: float
    current_median: float
    reason: str
    look: int = 1

    @property
    def change(self) -> float:
        return self.ratio - 1

    def row_fields(self) -> dict[str, Any]:
        """The keyword arguments of :class:`perfgate.gate.report.Row` beside ``name``."""
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "threshold": self.threshold,
            "noise": self.noise,
            "baseline_median": self.baseline_median,
            "current_median": self.current_median,
            "n_baseline": self.n_base,
            "n_current": self.n_cur,
            "looks": self.look,
        }


# -- the statistics, vectorised over leading axes (the simulator judges thousands at once) -------
def process_levels(samples: np.ndarray, trim: float = 0.2) -> np.ndarray:
    """Log of each process's ``trim``-trimmed mean over its rounds (the last axis)."""
    x = np.sort(np.asarray(samples, dtype=np.float64), axis=-1)
    n = x.shape[-1]
    cut = math.floor(trim * n)
    return np.log(x[..., cut : n - cut].mean(axis=-1))


def bounds(
    base_levels: np.ndarray, head_levels: np.ndarray, alpha: float, method: str = "student"
) -> tuple[np.ndarray, ...]:
    """(d, low, high, p_slower, p_faster, pooled sd) of head - base mean log level: the
    one-sided ``1 - alpha`` bounds of the t-test over processes (the last axis)."""
    from scipy.stats import t as student

    a, b = np.asarray(base_levels, np.float64), np.asarray(head_levels, np.float64)
    na, nb = a.shape[-1], b.shape[-1]
    d = b.mean(axis=-1) - a.mean(axis=-1)
    va, vb = a.var(axis=-1, ddof=1), b.var(axis=-1, ddof=1)
    if method == "student":
        pooled = ((na - 1) * va + (nb - 1) * vb) / (na + nb - 2)
        se = np.sqrt(pooled * (1 / na + 1 / nb))
        df = float(na + nb - 2)
    elif method == "welch":
        pooled = (va + vb) / 2
        qa, qb = va / na, vb / nb
        se = np.sqrt(qa + qb)
        with np.errstate(invalid="ignore", divide="ignore"):
            df = (qa + qb) ** 2 / (qa**2 / (na - 1) + qb**2 / (nb - 1))
        df = np.where(np.isfinite(df), df, float(na + nb - 2))
    else:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    q = student.ppf(1 - alpha, df)
    # sign(0) x inf is NaN (invalid) on the branch that d == 0 discards below; nothing divides by 0
    with np.errstate(invalid="ignore"):
        z = np.where(se > 0, d / np.where(se > 0, se, 1), np.sign(d) * np.inf)
    p_slower = np.where(d == 0, 1.0, student.sf(z, df))
    p_faster = np.where(d == 0, 1.0, student.cdf(z, df))
    return d, d - q * se, d + q * se, p_slower, p_faster, np.sqrt(pooled)


def verdict_codes(low, high, min_effect: float, floor: float) -> np.ndarray:
    """Index into :data:`VERDICTS` of each (low, high) log-ratio interval."""
    low, high = np.asarray(low), np.asarray(high)
    up, band = math.log1p(floor), math.log1p(min_effect)
    return np.select(
        [low > up, high < -up, (low > -band) & (high < band)],
        [_CODE[REGRESSION], _CODE[IMPROVEMENT], _CODE[UNCHANGED]],
        _CODE[INCONCLUSIVE],
    )


# -- one benchmark -------------------------------------------------------------------------------
def judge(
    base: Sequence[Sequence[float]],
    head: Sequence[Sequence[float]],
    design: Design | None = None,
    *,
    look: int = 1,
) -> ProcessResult:
    """The verdict on one benchmark: ``base`` and ``head`` hold one sequence of round times
    per worker process (any one unit), judged at ``alpha / looks``; ``look`` is recorded."""
    design = Design() if design is None else design
    if not isinstance(design, Design):
        raise TypeError(
            f"design must be a perfgate.gate.process_ab.Design, got {type(design).__name__}"
        )
    _integer("look", look, 1, design.looks)
    a = [_as_rounds("base", i, p) for i, p in enumerate(_as_processes("base", base))]
    b = [_as_rounds("head", i, p) for i, p in enumerate(_as_processes("head", head))]
    la = np.array([process_levels(p, design.trim) for p in a])
    lb = np.array([process_levels(p, design.trim) for p in b])
    base_level, head_level = float(np.exp(la.mean())), float(np.exp(lb.mean()))
    ratio = head_level / base_level
    rounds_a, rounds_b = sum(p.size for p in a), sum(p.size for p in b)

    def result(verdict, reason, ci=(None, None), p=None, noise=None) -> ProcessResult:
        return ProcessResult(
            verdict, ratio, ci[0], ci[1], p, design.min_effect, design.floor, noise,
            len(a), len(b), rounds_a, rounds_b, base_level, head_level, reason, look,
        )  # fmt: skip

    short = min(min(p.size for p in a), min(p.size for p in b))
    if min(len(a), len(b)) < MIN_PROCESSES or short < MIN_ROUNDS:
        return result(
            INCONCLUSIVE,
            f"too few processes or rounds ({len(a)} base, {len(b)} head processes, the "
            f"shortest {short} rounds; need >= {MIN_PROCESSES} a side of >= {MIN_ROUNDS} "
            "rounds): measure more",
        )
    _, lo, hi, p_slow, p_fast, sd = (
        float(x) for x in bounds(la, lb, design.look_alpha, design.method)
    )
    ci, p = (math.exp(lo), math.exp(hi)), min(p_slow, p_fast)
    code = int(verdict_codes(lo, hi, design.min_effect, design.floor))
    verdict = VERDICTS[code]
    n = f"{len(a)}+{len(b)} processes"
    floor, band = f"{design.floor:.2%}", f"±{design.min_effect:.1%}"
    reason = {
        REGRESSION: f"slower: CI above +{floor}, p={p_slow:.2g} ({n})",
        IMPROVEMENT: f"faster: CI below -{floor}, p={p_fast:.2g} ({n})",
        UNCHANGED: f"CI within {band} ({n})",
        INCONCLUSIVE: f"CI reaches beyond {band} without clearing ±{floor} ({n}): "
        "measure more processes",
    }[verdict]
    return result(verdict, reason, ci, p, sd)


# -- the adaptive looks --------------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    result: ProcessResult
    look: int  # the look that decided it (1-based)
    processes: int  # processes a side it was judged on
    rounds: int  # rounds a process


def decide(
    names: Iterable[str],
    design: Design,
    extend: Callable[[list[str], int, int], None],
    collect: Callable[[str], tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]]],
) -> dict[str, Decision]:
    """Run the looks: ``extend(pending, processes, rounds)`` measures the pending benchmarks
    until each side has ``processes`` processes of ``rounds`` rounds each (starting the new
    processes, topping up the old ones); ``collect(name)`` gives (base, head) per-process
    rounds measured so far. A benchmark leaves at the first look that decides it; one still
    inconclusive at the last look stays so."""
    pending = list(dict.fromkeys(names))
    decided: dict[str, Decision] = {}
    plan = design.schedule()
    for look, (processes, rounds) in enumerate(plan, 1):
        if not pending:
            break
        extend(list(pending), processes, rounds)
        for name in pending:
            base, head = collect(name)
            result = judge(base, head, design, look=look)
            if result.verdict != INCONCLUSIVE or look == len(plan):
                decided[name] = Decision(result, look, processes, rounds)
        pending = [n for n in pending if n not in decided]
    return decided


# -- argument checks: one line naming the argument -----------------------------------------------
def _fraction(name, v, low, high, *, open_low=False, open_high=False) -> None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ok = ok and (v > low if open_low else v >= low) and (v < high if open_high else v <= high)
    if not ok:
        lb, hb = "(" if open_low else "[", ")" if open_high else "]"
        raise ValueError(f"{name} must be a number in {lb}{low:g}, {high:g}{hb}, got {v!r}")


def _integer(name, v, low, high=None) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < low or (high is not None and v > high):
        span = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an int {span}, got {v!r}")


def _as_processes(side: str, processes) -> list:
    if isinstance(processes, (str, bytes)) or not hasattr(processes, "__len__"):
        raise ValueError(
            f"{side} must be a sequence of per-process round times, got {type(processes).__name__}"
        )
    out = list(processes)
    if not out:
        raise ValueError(f"{side} must hold at least one process's round times, got none")
    return out


def _as_rounds(side: str, i: int, rounds) -> np.ndarray:
    if isinstance(rounds, (str, bytes)) or not hasattr(rounds, "__len__"):
        raise ValueError(
            f"{side} process {i} must be a sequence of round times, got {type(rounds).__name__}"
        )
    arr = np.asarray(rounds)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise ValueError(f"{side} process {i} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"{side} process {i} must be a non-empty 1-D sequence, got shape {arr.shape}"
        )
    arr = arr.astype(np.float64)
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{side} process {i}: round times must be finite and > 0; round {j} is {float(arr[j])!r}"
        )
    return arr
