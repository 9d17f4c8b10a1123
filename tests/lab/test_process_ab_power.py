"""The process-level A/B verdict (perfgate.gate.process_ab) on seeded synthetic samples with
per-process offsets planted (lab.synthetic): false alarms, power, today's rounds-as-samples
design failing on the same data, and the models' own seeding."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from lab import synthetic
from perfgate.gate import process_ab as pa
from perfgate.gate.stats import Settings, compare_samples

# Every process's level is off by N(0, 1%) for its whole life (twice the H200's 0.5%), round
# noise 0.3-1%, 5% of rounds x1.2-2.0, a 32 ns tick on 3-9 us: the picture, harsher.
OFFSETS_1PCT = synthetic.BRIEF_DEVICE.with_(name="offsets-1pct", process_sd=0.01, process_tail=0)


def verdicts_through_looks(base, head, design):
    """``decide`` over seeded trials: each trial's workers are the first P of its arrays."""
    out = []
    for b, h in zip(base, head, strict=True):
        have = {"p": 0, "r": 0}

        def extend(pending, processes, rounds, have=have):
            have["p"], have["r"] = processes, rounds

        def collect(name, b=b, h=h, have=have):
            return b[: have["p"], : have["r"]], h[: have["p"], : have["r"]]

        out.append(pa.decide(["bench"], design, extend, collect)["bench"])
    return out


def vectorised_codes(base, head, design):
    """The same looks on whole arrays at once (what lab.scripts.ab_power runs)."""
    final = np.full(base.shape[0], -1)
    for look, (p, r) in enumerate(design.schedule()):
        la = pa.process_levels(base[:, :p, :r], design.trim)
        lb = pa.process_levels(head[:, :p, :r], design.trim)
        _, lo, hi, *_ = pa.bounds(la, lb, design.look_alpha, design.method)
        codes = pa.verdict_codes(lo, hi, design.min_effect, design.floor)
        take = (final < 0) & ((codes != 3) | (look == design.looks - 1))
        final[take] = codes[take]
    return final


def test_null_with_offsets_of_1pct_stays_within_alpha():
    design = pa.Design()  # (3, 6, 12, 24) processes a side, 100 rounds, alpha 1% over 4 looks
    base, head = synthetic.trials(OFFSETS_1PCT, 300, 24, 100, 0.0, np.random.default_rng(24))
    decisions = verdicts_through_looks(base, head, design)
    counts = Counter(d.result.verdict for d in decisions)
    # what fails the gate, a regression: at most alpha (the union bound over the looks), 1% of
    # 300; both directions together at most 2 x alpha (this seed: 0 and 5, i.e. 1.7% (0.5-3.8%)
    # against the 0.44% a side that 8000 trials of lab.scripts.ab_power measure)
    assert counts[pa.REGRESSION] <= 3, counts
    assert counts[pa.REGRESSION] + counts[pa.IMPROVEMENT] <= 6, counts
    # the API and the vectorised path of the power tables give the very same verdicts
    codes = vectorised_codes(base, head, design)
    assert [pa.VERDICTS[c] for c in codes] == [d.result.verdict for d in decisions]


def test_null_false_alarms_over_3000_trials_at_most_alpha_each_way():
    design = pa.Design()
    base, head = synthetic.trials(OFFSETS_1PCT, 3000, 24, 100, 0.0, np.random.default_rng(7))
    counts = np.bincount(vectorised_codes(base, head, design), minlength=4)
    assert counts[0] <= 30 and counts[1] <= 30, counts  # regressions, improvements: <= 1%


def test_rounds_as_samples_raise_false_alarms_on_the_same_data():
    # the round-level test (rank test + bootstrap on every round, as the stored gate judges) at a
    # 1% threshold, fed the same trials' rounds pooled over the first look's 3 processes a side
    base, head = synthetic.trials(OFFSETS_1PCT, 100, 3, 100, 0.0, np.random.default_rng(24))
    settings = Settings(min_effect_drift=0.01, n_resamples=200)
    verdicts = Counter(
        compare_samples(b.ravel(), h.ravel(), settings, drift=0.0).verdict
        for b, h in zip(base, head, strict=True)
    )
    wrong = verdicts["regression"] + verdicts["improvement"]
    assert wrong >= 10, verdicts  # >= 10%, ten times what the process-level design allows
    # and the process-level verdict on exactly these samples raises none
    process = Counter(
        pa.judge(b, h, pa.Design(processes=(3,))).verdict for b, h in zip(base, head, strict=True)
    )
    assert process[pa.REGRESSION] + process[pa.IMPROVEMENT] <= 1, process


def test_true_1pct_caught_with_offsets_of_1pct_given_the_processes():
    # SE of the difference = 1% x sqrt(2/80) = 0.16%: 1% - 0.25% floor is 4.7 SE, ~99% power
    design = pa.Design(processes=(80,), rounds=20)
    base, head = synthetic.trials(OFFSETS_1PCT, 300, 80, 20, 0.01, np.random.default_rng(5))
    hits = sum(
        pa.judge(b, h, design).verdict == pa.REGRESSION for b, h in zip(base, head, strict=True)
    )
    assert hits >= 285, hits  # >= 95%


def test_default_design_catches_1pct_on_the_h200_model():
    model = synthetic.MEASURED_DEVICE
    design = pa.Design()
    base, head = synthetic.trials(model, 300, 24, 100, 0.01, np.random.default_rng(11))
    decisions = verdicts_through_looks(base, head, design)
    hits = sum(d.result.verdict == pa.REGRESSION for d in decisions)
    assert hits >= 285, hits  # >= 95% (docs/ab-process-level.md: 99.6% of 2000)


def test_synthetic_trials_are_seeded_and_planted():
    model = OFFSETS_1PCT.with_(spike_rate=0.0, tick=0.0, drift_sd=0.0, interaction_sd=(0.0, 0.0))
    one = synthetic.trials(model, 9, 4, 30, 0.02, np.random.default_rng(9))
    two = synthetic.trials(model, 9, 4, 30, 0.02, np.random.default_rng(9))
    assert all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))
    base, head = synthetic.trials(model.with_(process_sd=0.0, round_sd=(0, 0)), 9, 2, 10, 0.02,
                                  np.random.default_rng(0))  # fmt: skip
    assert np.array_equal(head, base * 1.02)
    assert np.array_equal(base[:, 0, 0], np.asarray(model.medians))
    with pytest.raises(ValueError, match=r"^processes must be an int >= 1, got 0$"):
        synthetic.trials(model, 9, 0, 10, 0.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^effect must be a fraction in \(-0.5, 1\)"):
        synthetic.trials(model, 9, 2, 10, 1.5, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^spike_rate must be a probability in \[0, 1\]"):
        model.with_(spike_rate=2.0)
