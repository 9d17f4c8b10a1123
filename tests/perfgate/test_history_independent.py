"""The history's single-line rules, each against a value worked out by hand here, not by the code
under test: which time places a run (its commit's committer date, in UTC, and only its own
commit's), and the scale of the change-point penalty (``penalty x noise^2 x ln(runs)``)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from perfgate.gate import paths
from perfgate.history import ab_records, records, steps

H200 = Path(__file__).resolve().parents[2] / "perf_baselines" / "nvidia-h200" / "device.json"


COMMIT = "08303fa5b8777126035bb54e1faecaf3d7f2dd83"


def _results(tmp_path: Path, commit_info: dict) -> Path:
    """The committed H200 results file, recorded (clean) at COMMIT, with ``commit_info`` set."""
    data = json.loads(H200.read_text())
    data["machine_info"]["perfgate"]["fingerprint"].update(git_commit=COMMIT, git_dirty=False)
    data["commit_info"] = {**data["commit_info"], "id": COMMIT, "dirty": False, **commit_info}
    path = tmp_path / "device.json"
    path.write_text(json.dumps(data))
    return path


def test_a_run_takes_its_commits_committer_time_in_utc(tmp_path):
    # committed 05:06:07 at +02:00 (03:06:07 UTC), authored a day earlier: the commit date
    path = _results(tmp_path, {"time": "2026-12-02T05:06:07+02:00",
                               "author_time": "2026-12-01T00:00:00+00:00"})  # fmt: skip
    assert records.read_run(path).commit_time == "2026-12-02T03:06:07+00:00"


def test_a_run_whose_commit_info_names_another_commit_has_no_commit_time(tmp_path):
    path = _results(tmp_path, {"id": "f" * 40, "time": "2026-12-02T05:06:07+02:00"})
    run = records.read_run(path)
    assert run.commit == COMMIT  # the fingerprint's
    assert run.commit_time is None  # another commit's date would misplace it


def test_an_ab_run_takes_its_commits_committer_date(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("needs git on PATH (the A/B file's commit date comes from git)")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f").write_text("x")
    subprocess.run(["git", "-C", str(tmp_path), "add", "f"], check=True)
    dates = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00+05:00",  # authored
             "GIT_COMMITTER_DATE": "2026-02-03T04:05:06-07:00"}  # committed: 11:05:06 UTC  # fmt: skip
    subprocess.run(
        ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "-c",
         "commit.gpgsign=false", "commit", "-q", "-m", "c"],
        check=True, env={**dates, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    monkeypatch.setattr(paths, "REPO", tmp_path)
    assert ab_records.commit_time(commit) == "2026-02-03T11:05:06+00:00"
    assert ab_records.commit_time("0" * 40) is None  # not a commit of this checkout


# -- the penalty's scale ------------------------------------------------------------------------
# Two flat halves of m runs each, log levels 0 and d: the runs' first differences are all 0 but
# one, so the robust noise is the floor (1e-4) and the penalty is P x 1e-8 x ln(2m). Splitting
# at m removes the whole least-squares cost, 2m x (d/2)^2: ruptures splits when that gain exceeds
# the penalty, i.e. when d > d0 = sqrt(2 P x 1e-8 x ln(2m) / m).
SETTINGS = steps.StepSettings(min_effect=1e-9, min_size=3, penalty=5.0, alpha=0.49)


@pytest.mark.parametrize("m", [3, 6, 20])
@pytest.mark.parametrize(("scale", "found"), [(0.98, False), (1.02, True)])
def test_the_penalty_is_penalty_times_noise_squared_times_ln_runs(m, scale, found):
    pytest.importorskip(
        "ruptures",
        reason="the change-point search is the history extra's (pip install -e '.[history]')",
    )
    d0 = math.sqrt(2 * SETTINGS.penalty * steps.NOISE_FLOOR**2 * math.log(2 * m) / m)
    d = d0 * math.sqrt(scale)  # a gain of 0.98 or 1.02 penalties
    medians = [1.0] * m + [math.exp(d)] * m
    found_at = [s.index for s in steps.find_steps(medians, SETTINGS)]
    assert found_at == ([m] if found else [])


# The same rule where the noise is not the floor, so that its scale decides: each half repeats
# 0, 0, e four times (m = 12). Its first differences hold 8 zeros, 8 of +e, 6 of -e and, at the
# step, d - e (d is 1.7e here, so d - e sits between 0 and e): their median is 0 and the median
# of their absolute values e, so the noise is 1.4826 e / sqrt(2). The halves have the same mean
# but for d, so the split at m again gains m/2 x d^2, and d0 is as above with that noise; a split
# inside a half gains less than e^2, against a penalty above 17 e^2. A noise estimate off by a
# factor k moves the threshold by k: 2% of gain either side is 1% of noise.
NOISY_HALF = [0.0, 0.0, 0.01] * 4


@pytest.mark.parametrize(("scale", "found"), [(0.98, False), (1.02, True)])
def test_the_noise_in_the_penalty_is_the_scaled_mad_of_the_first_differences(scale, found):
    pytest.importorskip(
        "ruptures",
        reason="the change-point search is the history extra's (pip install -e '.[history]')",
    )
    m, e = len(NOISY_HALF), max(NOISY_HALF)
    noise = 1.4826 * e / math.sqrt(2)
    d0 = math.sqrt(2 * SETTINGS.penalty * noise**2 * math.log(2 * m) / m)
    d = d0 * math.sqrt(scale)
    medians = [math.exp(v) for v in NOISY_HALF] + [math.exp(v + d) for v in NOISY_HALF]
    found_at = [s.index for s in steps.find_steps(medians, SETTINGS)]
    assert found_at == ([m] if found else [])
