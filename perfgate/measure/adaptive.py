"""Adaptive rounds: an undecided benchmark gets more rounds, at a fixed number of looks.

Look ``i`` (1-based) judges a benchmark on ``rounds x 2**(i-1)`` rounds a side: 200, 400, 800
with the shipped ``rounds.device = 200`` and ``looks = 3``. A benchmark leaves the loop at the
first look that decides it; one still ``inconclusive`` at the last look stays so (and fails the
gate unless ``inconclusive_exit = 0``).

Repeated looks at growing data would raise the false-alarm rate if each used the full alpha.
Decision: a fixed number of looks with a Bonferroni-corrected level, ``alpha / looks`` for the
rank test at every look and a bootstrap interval two-sided at ``1 - 2 x alpha / looks``. By the
union bound the chance that any look calls an unchanged benchmark a regression stays below
alpha. Alpha spending (O'Brien-Fleming) would spend less at the early looks and more at the
last, but with the effect threshold doing most of the work against false alarms, the simpler
rule costs little power and is easy to check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from perfgate.gate.stats import INCONCLUSIVE, Result


def schedule(rounds: int, looks: int) -> list[int]:
    """Rounds a side at each look: ``rounds x 1, 2, 4, ...``."""
    for name, v in (("rounds", rounds), ("looks", looks)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    return [rounds * 2**i for i in range(looks)]


@dataclass(frozen=True)
class Decision:
    result: Result
    look: int  # the look that decided it (1-based)
    rounds: int  # rounds a side it was judged on


def decide(
    names: Iterable[str],
    totals: list[int],
    extend: Callable[[list[str], int], None],
    judge: Callable[[str], Result],
) -> dict[str, Decision]:
    """Run the looks: ``extend(pending, total)`` measures the pending benchmarks up to ``total``
    rounds a side, ``judge(name)`` gives the verdict on what has been measured so far."""
    pending = list(names)
    decided: dict[str, Decision] = {}
    for look, total in enumerate(totals, 1):
        if not pending:
            break
        extend(pending, total)
        last = look == len(totals)
        for name in pending:
            result = judge(name)
            if result.verdict != INCONCLUSIVE or last:
                decided[name] = Decision(result, look, total)
        pending = [n for n in pending if n not in decided]
    return decided
