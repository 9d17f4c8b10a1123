"""The push gate's baseline from history (bench --against history): the last K runs of main in
this fingerprint segment, pooled into a document the gate loads; too short a history gives none,
with the reason for the fallback warning."""

from __future__ import annotations

import copy
import json
import statistics

import pytest

from perfgate.gate import baseline as bl
from perfgate.gate import compare
from perfgate.gate.stats import Settings
from perfgate.history import against, append, config, store
from perfgate.history.demo import DEFAULT_SOURCE, make_run, write_history
from perfgate.history.records import read_run

CFG = config.load()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def kept(request, tmp_path_factory):
    """8 runs of main, a new torch from run 5 (so the newest segment holds runs 5, 6, 7), in a
    SQLite store, then in a PostgreSQL one."""
    root = tmp_path_factory.mktemp("against")
    runs = write_history(root / "runs", runs=8, step_at=None, new_torch_at=5, max_rounds=30)
    if request.param == "sqlite":
        db = root / "h.sqlite"
    else:
        db = request.getfixturevalue("pg_server").fresh_url()
    with store.open_store(db, write=True) as s:
        append.append_runs(s, runs, branch="main", samples_kept=CFG.samples_kept)
    return db, runs


def _fp(path):
    return bl.fingerprint(bl.load(path))


def test_pools_the_last_k_runs_of_the_segment(kept, tmp_path):
    db, runs = kept
    with store.open_store(db, write=False) as s:
        hb = against.history_baseline(
            s, "nvidia-h200", "device", _fp(runs[-1]), 5, branch="main", min_runs=3
        )
    assert hb.data is not None and "last 3 runs" in hb.reason
    assert {r.source for r in hb.runs} == {str(p) for p in runs[5:]}  # the new torch's only
    path = tmp_path / "history-baseline.json"
    path.write_text(json.dumps(hb.data))
    loaded = bl.load(path)  # the gate's own validation accepts it
    for bench in loaded["benchmarks"]:
        name = bench["fullname"]
        per_run = [bl.samples(bl.load(p))[name] for p in runs[5:]]
        assert bench["stats"]["data"] == [x for s in per_run for x in s]  # bit for bit, in order
        assert bench["extra_info"][bl.RUNS_KEY]["medians"] == [
            statistics.median(s) for s in per_run
        ]
    assert set(bl.drifts(loaded)) == {b["fullname"] for b in loaded["benchmarks"]}


def test_k_takes_the_newest_runs(kept):
    db, runs = kept
    with store.open_store(db, write=False) as s:
        hb = against.history_baseline(
            s, "nvidia-h200", "device", _fp(runs[0]), 3, branch="main", min_runs=2
        )
    # the old segment: runs 0-4; the newest three of them
    assert {r.source for r in hb.runs} == {str(p) for p in runs[2:5]}


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"min_runs": 4}, "holds 3 runs of tests/perf/"),
        ({"branch": "feature"}, "no runs of feature"),
        ({"mode": "leaderboard"}, "no runs of main on nvidia-h200, leaderboard mode"),
        (
            {"benchmarks": ["tests/perf/test_new.py::test_new"]},
            "holds 0 runs of tests/perf/test_new.py",
        ),
    ],
)
def test_too_short_a_history_gives_the_reason(kept, kwargs, reason):
    db, runs = kept
    args = {"branch": "main", "min_runs": 3, "mode": "device"} | kwargs
    with store.open_store(db, write=False) as s:
        hb = against.history_baseline(s, "nvidia-h200", args.pop("mode"), _fp(runs[-1]), 5, **args)
    assert hb.data is None and reason in hb.reason


def test_the_run_being_judged_is_left_out(kept):
    db, runs = kept
    digest = read_run(runs[-1]).digest
    with store.open_store(db, write=False) as s:
        hb = against.history_baseline(s, "nvidia-h200", "device", _fp(runs[-1]), 5, branch="main",
                                      min_runs=3, exclude_digest=digest)  # fmt: skip
    assert hb.data is None and "holds 2 runs" in hb.reason


def test_the_gate_judges_against_it(kept, tmp_path):
    """compare's own report on the history baseline: a rerun passes, a 10% slower one fails."""
    db, runs = kept
    with store.open_store(db, write=False) as s:
        hb = against.history_baseline(
            s, "nvidia-h200", "device", _fp(runs[-1]), 5, branch="main", min_runs=3
        )
    base = tmp_path / "base.json"
    base.write_text(json.dumps(hb.data))
    import numpy as np

    source = bl.load(DEFAULT_SOURCE)
    rng = np.random.default_rng(99)
    fp_torch = _fp(runs[-1])["torch"]
    unchanged = make_run(source, 50, level={}, rng=rng, torch=fp_torch, max_rounds=30)
    slower = copy.deepcopy(unchanged)
    name = slower["benchmarks"][0]["fullname"]
    slower["benchmarks"][0]["stats"]["data"] = [
        x * 1.10 for x in slower["benchmarks"][0]["stats"]["data"]
    ]
    # the history's rule, set apart from the stored gate's defaults so a swap shows
    import dataclasses

    apart = dataclasses.replace(CFG, gate_min_effect=0.041, gate_drift_factor=4.5)
    assert (Settings().min_effect_drift, Settings().drift_factor) != (0.041, 4.5)
    picked = against.gate_settings(Settings(), apart)
    assert (picked.min_effect_drift, picked.drift_factor) == (0.041, 4.5)
    given = against.gate_settings(Settings(drift_factor=7.0), apart, given=["drift_factor"])
    assert (given.min_effect_drift, given.drift_factor) == (0.041, 7.0)  # the command line wins
    stats = against.gate_settings(Settings(), CFG)
    verdicts = {}
    for label, doc in (("unchanged", unchanged), ("slower", slower)):
        cur = tmp_path / f"{label}.json"
        cur.write_text(json.dumps(doc))
        report = compare.build_report(base, cur, stats, allow_missing=False)
        verdicts[label] = {r.name: r.verdict for r in report.rows}
    assert "regression" not in verdicts["unchanged"].values()
    assert verdicts["slower"][name] == "regression"


def test_bad_arguments_are_the_callers_bug(kept):
    db, runs = kept
    with store.open_store(db, write=False) as s, pytest.raises(ValueError, match="min_runs"):
        against.history_baseline(
            s, "nvidia-h200", "device", _fp(runs[-1]), 2, branch="main", min_runs=3
        )
