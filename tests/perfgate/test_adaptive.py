"""Adaptive rounds (perfgate.measure.adaptive) on seeded synthetic samples: the looks, who gets more
rounds, and the false-alarm rate despite the repeated looks."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from perfgate.gate.stats import INCONCLUSIVE, REGRESSION, Result, Settings, compare_samples
from perfgate.measure.adaptive import decide, schedule

FAST = Settings(n_resamples=500)


def test_schedule_doubles_per_look():
    assert schedule(200, 3) == [200, 400, 800]
    assert schedule(10, 1) == [10]
    for bad in ((0, 3), (200, 0), (True, 3), (200, 2.0)):
        with pytest.raises(ValueError, match="must be an int >= 1"):
            schedule(*bad)


class Synthetic:
    """Benchmarks whose samples are drawn on demand: ``shift`` per name, ``noise`` relative."""

    def __init__(self, shifts: dict[str, float], noise: float, seed: int, **how) -> None:
        self.rng = np.random.default_rng(seed)
        self.shifts, self.noise, self.how = shifts, noise, how
        self.base = {n: [] for n in shifts}
        self.cur = {n: [] for n in shifts}
        self.calls: list[tuple[list[str], int]] = []

    def extend(self, pending: list[str], total: int) -> None:
        self.calls.append((list(pending), total))
        for name in pending:
            k = total - len(self.cur[name])
            self.base[name] += list(1 + self.noise * self.rng.standard_normal(k))
            cur = self.shifts[name] * (1 + self.noise * self.rng.standard_normal(k))
            self.cur[name] += list(cur)

    def judge(self, name: str) -> Result:
        return compare_samples(self.base[name], self.cur[name], FAST, looks=3, **self.how)


def test_only_undecided_benchmarks_get_more_rounds():
    # a 10% slowdown is decided at once; a 2.6% one sits on a quiet pooled baseline's 2.5%
    syn = Synthetic({"clear": 1.10, "edge": 1.026}, 0.01, seed=2, drift=0.0)
    decided = decide(["clear", "edge"], schedule(20, 3), syn.extend, syn.judge)
    assert decided["clear"].look == 1 and decided["clear"].rounds == 20
    assert decided["clear"].result.verdict == REGRESSION
    assert syn.calls[0] == (["clear", "edge"], 20)
    assert all(pending == ["edge"] for pending, _ in syn.calls[1:])
    assert decided["edge"].rounds == [20, 40, 80][decided["edge"].look - 1]


def test_still_inconclusive_after_every_look_stays_inconclusive():
    calls = []

    def judge(name):
        return Result(INCONCLUSIVE, 1.0, None, None, None, 0.03, 0.01, 10, 10, "grey")

    decided = decide(["a"], [10, 20, 40], lambda p, t: calls.append(t), judge)
    assert calls == [10, 20, 40]  # the whole budget was spent on it
    assert decided["a"].look == 3 and decided["a"].result.verdict == INCONCLUSIVE


def test_repeated_looks_keep_false_alarms_at_alpha():
    # 300 unchanged benchmarks at 1% noise against a quiet pooled baseline: a regression at any
    # look is a false alarm; Bonferroni over 3 looks keeps the total far below 1%.
    syn = Synthetic({f"b{i}": 1.0 for i in range(300)}, 0.01, seed=4, drift=0.0)
    decided = decide(list(syn.shifts), schedule(30, 3), syn.extend, syn.judge)
    verdicts = Counter(d.result.verdict for d in decided.values())
    assert verdicts[REGRESSION] + verdicts["improvement"] <= 3, verdicts


def test_a_3_percent_slowdown_at_half_a_percent_noise_with_200_rounds_is_caught():
    # the acceptance case, through the adaptive loop and the drift-aware stored gate
    syn = Synthetic({f"b{i}": 1.03 for i in range(100)}, 0.005, seed=6, drift=0.004)
    decided = decide(list(syn.shifts), schedule(200, 3), syn.extend, syn.judge)
    assert sum(d.result.verdict == REGRESSION for d in decided.values()) >= 95
