"""perfgate history detect: a planted step is found at its commit, pure noise gives none, a
fingerprint change starts a segment and is never an alarm; the exit codes and the JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfgate.__main__ import main
from perfgate.history import config, detect, steps
from perfgate.history.demo import fake_commit, write_history
from perfgate.history.store import Row
from tests.perfgate.histories import series as gpu_like_series

# the change-point search and the plots need the `history` extra; the GPU job's env has no use for it
ruptures = pytest.importorskip(
    "ruptures", reason="the `history` extra is not installed (pip install '.[history]')"
)

SETTINGS = config.load().steps


def _rows(medians, *, segments=None, benchmark="b[m4-n2880-k512]", fingerprints=None):
    """A series of rows at commits fake_commit(0..n-1); ``segments[i]`` its fingerprint key."""
    out = []
    for i, m in enumerate(medians):
        seg = segments[i] if segments else "s0"
        fp = (fingerprints or {}).get(seg, {"torch": seg})
        out.append(
            Row(
                run_id=i + 1,
                digest=f"d{i}",
                source=f"run-{i}.json",
                device_key="nvidia-h200",
                mode="device",
                branch="main",
                commit=fake_commit(i),
                commit_time=f"2026-11-01T{i // 60:02d}:{i % 60:02d}:00+00:00",
                run_time=None,
                fingerprint=fp,
                segment=seg,
                benchmark=benchmark,
                group="leaderboard",
                median=float(m),
                ci_low=float(m) * 0.999,
                ci_high=float(m) * 1.001,
                rounds=200,
                has_samples=False,
            )
        )
    return out


@pytest.mark.parametrize(("size", "at"), [(0.03, 11), (0.05, 20), (-0.05, 9), (0.10, 27)])
def test_a_planted_step_is_found_at_its_commit(size, at):
    rng = np.random.default_rng(int(abs(size) * 1000) + at)
    medians = gpu_like_series(rng, 36, size, at)
    found = detect.detect(_rows(medians), SETTINGS)
    assert len(found.changes) == 1, found.changes
    change = found.changes[0]
    assert change.commit == fake_commit(at) and change.previous_commit == fake_commit(at - 1)
    assert change.before == pytest.approx(np.median(medians[:at]), rel=0, abs=0)
    assert change.after == pytest.approx(np.median(medians[at:]), rel=0, abs=0)
    assert abs(change.change - size) < 0.01
    assert change.alarm == (size > 0) and found.exit_code == (1 if size > 0 else 0)


def test_pure_noise_has_no_change():
    # GPU-like noise: 0.5% run to run and 5% of runs in a slow episode of +2.4..4.2%
    rng = np.random.default_rng(7)
    flagged = [
        seed
        for seed in range(60)
        if detect.detect(_rows(gpu_like_series(rng, 40, 0.0, 0)), SETTINGS).changes
    ]
    assert flagged == []


def test_one_slow_run_is_not_a_change():
    medians = [10e-6] * 30
    medians[14] = 10.6e-6  # a +6% slow episode
    medians[15] = 10.4e-6
    assert detect.detect(_rows(medians), SETTINGS).changes == ()


def test_a_step_below_the_minimum_effect_is_not_a_change():
    # 1% with almost no noise: real and significant, but smaller than min_effect (1.5%)
    rng = np.random.default_rng(3)
    medians = 10e-6 * np.exp(rng.normal(0, 0.0005, 40)) * np.r_[np.ones(20), np.full(20, 1.01)]
    assert SETTINGS.min_effect > 0.01
    assert detect.detect(_rows(medians), SETTINGS).changes == ()


def test_a_fingerprint_change_is_a_segment_not_an_alarm():
    rng = np.random.default_rng(11)
    medians = 10e-6 * np.exp(rng.normal(0, 0.004, 30))
    medians[15:] *= 1.12  # a new torch makes everything 12% slower
    fps = {"old": {"torch": "2.11.0"}, "new": {"torch": "2.12.0"}}
    rows = _rows(medians, segments=["old"] * 15 + ["new"] * 15, fingerprints=fps)
    found = detect.detect(rows, SETTINGS)
    assert found.changes == () and found.exit_code == 0
    (start,) = found.segment_starts
    assert start.commit == fake_commit(15) and start.difference == "torch '2.11.0' -> '2.12.0'"


def test_only_the_newest_segment_alarms():
    rng = np.random.default_rng(5)
    medians = 10e-6 * np.exp(rng.normal(0, 0.004, 40))
    medians[8:] *= 1.06  # slower inside the old segment
    rows = _rows(medians, segments=["old"] * 20 + ["new"] * 20)
    found = detect.detect(rows, SETTINGS)
    (change,) = found.changes
    assert change.commit == fake_commit(8) and not change.newest_segment and not change.alarm
    assert found.exit_code == 0


def test_last_limits_alarms_to_the_newest_runs():
    rng = np.random.default_rng(9)
    medians = 10e-6 * np.exp(rng.normal(0, 0.004, 40))
    medians[10:] *= 1.05
    rows = _rows(medians)
    assert detect.detect(rows, SETTINGS).exit_code == 1
    assert detect.detect(rows, SETTINGS, last=30).exit_code == 1  # 30 runs since the change
    assert detect.detect(rows, SETTINGS, last=29).exit_code == 0


def test_steps_reject_bad_input():
    with pytest.raises(ValueError, match="finite values > 0"):
        steps.find_steps([1.0, 0.0, 1.0, 1.0, 1.0, 1.0], SETTINGS)
    with pytest.raises(ValueError, match="min_effect"):
        steps.StepSettings(0.0, 3, 3.0, 0.01)
    assert steps.find_steps([1.0] * 5, SETTINGS) == []  # too short for two sides of min_size


def test_constant_levels_with_no_noise_still_work():
    medians = [10e-6] * 10 + [11e-6] * 10
    (step,) = steps.find_steps(medians, SETTINGS)
    assert (step.index, step.before, step.after, step.p_value) == (10, 10e-6, 11e-6, 0.0)


def test_detect_command_json_and_exit_code(tmp_path, capsys):
    runs = write_history(
        tmp_path / "runs",
        runs=20,
        step_at=12,
        step=0.06,
        new_torch_at=4,
        keyword="m16-n2112-k7168",
        max_rounds=20,
    )
    db = tmp_path / "h.sqlite"
    assert main(["history", "add", *map(str, runs), "--db", str(db)]) == 0
    out = tmp_path / "changes.json"
    assert main(["history", "detect", "--db", str(db), "--json", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "1 slower change in the newest fingerprint segment" in printed
    assert "new fingerprint segment at" in printed and "2.99.0+demo" in printed
    (change,) = json.loads(out.read_text())
    assert change["benchmark"].endswith("test_leaderboard[m16-n2112-k7168]")
    assert change["commit"] == fake_commit(12)
    assert change["after"] / change["before"] - 1 == pytest.approx(change["change"], rel=1e-12)
    assert 0.05 < change["change"] < 0.07 and change["alarm"] is True
    # the other benchmarks: no step; -k selects the reducer alone
    assert main(["history", "detect", "--db", str(db), "-k", "test_reducer"]) == 0
    assert main(["history", "detect", "--db", str(db), "--min-effect", "0.1"]) == 0
    assert main(["history", "detect", "--db", str(db), "--min-effect", "2"]) == 2
    assert "--min-effect" in capsys.readouterr().err
