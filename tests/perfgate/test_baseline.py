"""Baseline files: JSON round trips, atomic writes, and every way a file can be unusable."""

from __future__ import annotations

import copy
import json
import os
import re
import stat

import pytest

from perfgate import atomic
from perfgate.gate import baseline as bl
from perfgate.gate import device


@pytest.fixture
def good(make_result, gpu_like):
    return make_result({"tests/perf/test_gemm.py::test_lb[m16]": gpu_like(1), "t::b": gpu_like(2)})


def test_round_trip_is_exact(tmp_path, good):
    path = tmp_path / "perf_baselines" / "nvidia-h200" / "device.json"  # parents created
    atomic.write_json(path, good)
    assert bl.load(path) == good  # floats survive JSON exactly (repr round trip)
    assert path.read_text().endswith("\n")
    assert [p.name for p in path.parent.iterdir()] == ["device.json"]  # no temp file left


def test_real_pytest_benchmark_file_with_perfgate_block(tmp_path, make_result):
    # The shape pytest-benchmark 5.x writes (taken from a real --benchmark-save-data run).
    real = {
        "machine_info": {"node": "vm", "machine": "x86_64", "cpu": {"count": 2}},
        "commit_info": {"id": "unversioned", "time": None, "dirty": False, "branch": "(unknown)"},
        "benchmarks": [
            {
                "group": None,
                "name": "test_a",
                "fullname": "test_x.py::test_a",
                "params": None,
                "param": None,
                "extra_info": {},
                "options": {"timer": "perf_counter", "min_rounds": 5},
                "stats": {
                    "min": 7.85e-07,
                    "max": 1.745e-06,
                    "mean": 1.0655e-06,
                    "rounds": 5,
                    "median": 8.765e-07,
                    "data": [8.295e-07, 1.745e-06, 1.0915e-06, 8.765e-07, 7.85e-07],
                    "iterations": 2,
                },
            }
        ],
        "datetime": "2026-11-30T11:28:39.536020+00:00",
        "version": "5.2.3",
    }
    real["machine_info"]["perfgate"] = make_result({"x": [1.0]})["machine_info"]["perfgate"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(real))
    data = bl.load(path)
    assert bl.samples(data) == {
        "test_x.py::test_a": [8.295e-07, 1.745e-06, 1.0915e-06, 8.765e-07, 7.85e-07]
    }


def test_accessors(tmp_path, good):
    atomic.write_json(tmp_path / "b.json", good)
    data = bl.load(tmp_path / "b.json")
    assert bl.device_key(data) == "nvidia-h200"
    assert bl.mode(data) == "device"
    assert bl.fingerprint(data)["torch"] == "2.11.0+cu128"
    assert list(bl.samples(data)) == ["tests/perf/test_gemm.py::test_lb[m16]", "t::b"]  # order


def test_write_atomic_replaces_with_one_permission_policy(tmp_path, good):
    # Always 0644 (perfgate.atomic): git records only the x bit, so a mode inherited from
    # whoever wrote the file last would only be noise.
    path = tmp_path / "b.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    atomic.write_json(path, good)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert json.loads(path.read_text()) == good


@pytest.mark.parametrize("where", ["write", "fsync", "replace", "interrupt"])
def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temp_file(
    tmp_path, good, monkeypatch, where
):
    path = tmp_path / "b.json"
    atomic.write_json(path, good)
    before = path.read_bytes()
    new = copy.deepcopy(good)
    new["benchmarks"][0]["stats"]["data"][0] *= 2

    def boom(*args, **kwargs):
        raise KeyboardInterrupt if where == "interrupt" else OSError(28, "No space left on device")

    if where == "write":
        # The temp file is half written when the failure comes.
        real_fdopen = os.fdopen

        def half_writing_fdopen(*args, **kwargs):
            f = real_fdopen(*args, **kwargs)
            real_write = f.write

            def write(text):
                real_write(text[: len(text) // 2])
                f.flush()
                boom()

            f.write = write
            return f

        monkeypatch.setattr(atomic.os, "fdopen", half_writing_fdopen)
    else:
        monkeypatch.setattr(atomic.os, "replace" if where == "replace" else "fsync", boom)
    with pytest.raises(KeyboardInterrupt if where == "interrupt" else OSError):
        atomic.write_json(path, new)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]


def test_every_perfgate_writer_is_the_atomic_one(tmp_path, good):
    from perfgate.isa import collect

    assert not hasattr(bl, "write_atomic")  # one writer: perfgate.atomic
    # The ISA baselines keep their exact bytes (indent 1, final newline) through it.
    collect.write_report(tmp_path / "isa" / "t.json", good)
    written = (tmp_path / "isa" / "t.json").read_text()
    assert written == json.dumps(good, indent=1) + "\n"
    assert stat.S_IMODE((tmp_path / "isa" / "t.json").stat().st_mode) == 0o644


def test_write_atomic_new_file_is_world_readable(tmp_path, good):
    # mkstemp creates 0600 files; a baseline must be readable by other CI users.
    atomic.write_json(tmp_path / "new.json", good)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644


def test_write_atomic_refuses_nan_and_keeps_the_old_file(tmp_path, good):
    path = tmp_path / "b.json"
    atomic.write_json(path, good)
    bad = copy.deepcopy(good)
    bad["benchmarks"][0]["stats"]["data"][0] = float("nan")
    with pytest.raises(ValueError, match="not JSON compliant"):
        atomic.write_json(path, bad)
    assert bl.load(path) == good
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]


def test_write_text_atomic_wants_text(tmp_path):
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        atomic.write_text(tmp_path / "x.md", b"bytes")


def _drop(d, *keys):
    for k in keys[:-1]:
        d = d[k]
    del d[keys[-1]]


def _set(d, value, *keys):
    for k in keys[:-1]:
        d = d[k]
    d[keys[-1]] = value


PG = ("machine_info", "perfgate")
B0 = ("benchmarks", 0)
# Each case breaks one thing in an otherwise good file; the message must name the problem.
BREAKAGES = [
    ("top level list", lambda d: [d], "top level is a JSON array, expected an object"),
    ("no machine_info", lambda d: _drop(d, "machine_info"), "no 'machine_info' object"),
    ("no perfgate block", lambda d: _drop(d, *PG), "no machine_info.perfgate block"),
    ("schema 2", lambda d: _set(d, 2, *PG, "schema"), "schema is 2, this perfgate reads 1"),
    # True == 1 and 1.0 == 1 in Python: neither may pass for version 1.
    ("schema true", lambda d: _set(d, True, *PG, "schema"), "schema is True"),
    ("schema 1.0", lambda d: _set(d, 1.0, *PG, "schema"), "schema is 1.0, this perfgate reads 1"),
    ("schema 0", lambda d: _set(d, 0, *PG, "schema"), "schema is 0, this perfgate reads 1"),
    ("schema '1'", lambda d: _set(d, "1", *PG, "schema"), "schema is '1', this perfgate reads 1"),
    ("no schema", lambda d: _drop(d, *PG, "schema"), "schema is None, this perfgate reads 1"),
    (
        "device key a path",
        lambda d: _set(d, "../x", *PG, "device_key"),
        "device_key is '../x'; expected a plain name",
    ),
    (
        "extra_info list",
        lambda d: _set(d, [], *B0, "extra_info"),
        "extra_info is a JSON array, expected an object",
    ),
    (
        "sample too small",
        lambda d: _set(d, 5e-324, *B0, "stats", "data", 1),
        "stats.data[1] is 5e-324; samples must be finite seconds > 0, in [1e-15, 10000]",
    ),
    (
        "empty device key",
        lambda d: _set(d, "", *PG, "device_key"),
        "device_key must be a non-empty",
    ),
    ("unknown mode", lambda d: _set(d, "wall", *PG, "mode"), "mode is 'wall', expected one of"),
    ("no fingerprint", lambda d: _drop(d, *PG, "fingerprint"), "fingerprint must be an object"),
    ("fingerprint lacks", lambda d: _drop(d, *PG, "fingerprint", "driver"), "lacks driver"),
    ("no benchmarks", lambda d: _drop(d, "benchmarks"), "'benchmarks' must be a non-empty list"),
    ("empty benchmarks", lambda d: _set(d, [], "benchmarks"), "'benchmarks' must be a non-empty"),
    ("benchmark not object", lambda d: _set(d, 3, *B0), "benchmarks[0] is a JSON number"),
    ("no fullname", lambda d: _drop(d, *B0, "fullname"), "benchmarks[0] has no 'fullname'"),
    ("duplicate fullname", lambda d: d["benchmarks"].append(d["benchmarks"][0]), "duplicate"),
    ("no stats", lambda d: _drop(d, *B0, "stats"), "has no 'stats' object"),
    ("no stats.data", lambda d: _drop(d, *B0, "stats", "data"), "--benchmark-save-data"),
    ("empty data", lambda d: _set(d, [], *B0, "stats", "data"), "must be a non-empty list"),
    (
        "string sample",
        lambda d: _set(d, "1e-5", *B0, "stats", "data", 2),
        "stats.data[2] is '1e-5'",
    ),
    ("bool sample", lambda d: _set(d, True, *B0, "stats", "data", 2), "stats.data[2] is True"),
    ("negative sample", lambda d: _set(d, -1e-5, *B0, "stats", "data", 2), "is -1e-05"),
    ("zero sample", lambda d: _set(d, 0, *B0, "stats", "data", 0), "stats.data[0] is 0"),
    ("rounds mismatch", lambda d: _set(d, 31, *B0, "stats", "rounds"), "stats.rounds is 31"),
]


@pytest.mark.parametrize(("why", "breakage", "message"), BREAKAGES, ids=[b[0] for b in BREAKAGES])
def test_unusable_file_is_one_line_error_naming_file(tmp_path, good, why, breakage, message):
    data = copy.deepcopy(good)
    data = breakage(data) or data
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(bl.BaselineError) as info:
        bl.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: "), text
    assert message in text, text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("token", "shown"),
    [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf")],  # Python's json accepts these
)
def test_non_finite_samples_in_json_text(tmp_path, good, token, shown):
    path = tmp_path / "bad.json"
    text = json.dumps(good).replace(str(good["benchmarks"][1]["stats"]["data"][4]), token, 1)
    path.write_text(text)
    with pytest.raises(bl.BaselineError, match=rf"'t::b': stats.data\[4\] is {shown}; samples"):
        bl.load(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("", "not valid JSON (Expecting value at line 1 column 1)"),
        ('{"benchmarks": [', "not valid JSON"),  # a truncated write
        (b"\xff\xfe", "cannot read"),  # not UTF-8
    ],
)
def test_unreadable_files(tmp_path, content, message):
    path = tmp_path / "b.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(bl.BaselineError, match="^" + re.escape(f"{path}: {message}")):
        bl.load(path)


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(bl.BaselineError, match="is a directory"):
        bl.load(tmp_path)


# -- pooled baselines: per-run medians and their spread ----------------------------------------
def _runs(make_result, gpu_like, factors=(1.0, 1.01, 0.995)):
    names = ["t::a", "t::b"]
    return [
        make_result({n: gpu_like(10 * r + i, 20, factor=f) for i, n in enumerate(names)})
        for r, f in enumerate(factors)
    ]


def test_pool_runs_concatenates_samples_and_records_the_spread(tmp_path, make_result, gpu_like):
    runs = _runs(make_result, gpu_like)
    pooled = bl.pool_runs(runs)
    for bench in pooled["benchmarks"]:
        name = bench["fullname"]
        assert bench["stats"]["data"] == [x for r in runs for x in bl.samples(r)[name]]
        assert bench["stats"]["rounds"] == 60
        rec = bench["extra_info"][bl.RUNS_KEY]
        assert rec["runs"] == 3 and rec["rounds"] == [20, 20, 20]
        assert rec["spread"] == bl.run_spread(rec["medians"]) > 0
    path = tmp_path / "p.json"
    atomic.write_json(path, pooled)
    assert bl.drifts(bl.load(path)) == {
        b["fullname"]: bl.run_drift(b["extra_info"][bl.RUNS_KEY]["medians"])
        for b in pooled["benchmarks"]
    }
    assert bl.drifts(runs[0]) == {}  # a single run records no spread
    assert runs[0]["benchmarks"][0]["stats"]["rounds"] == 20  # the inputs are untouched


def test_pool_runs_refuses_runs_that_do_not_match(make_result, gpu_like):
    runs = _runs(make_result, gpu_like)
    other = make_result({"t::a": gpu_like(1, 20)})
    with pytest.raises(bl.BaselineError, match="run 1 measured other benchmarks"):
        bl.pool_runs([runs[0], other])
    with pytest.raises(bl.BaselineError, match="another device or in another mode"):
        bl.pool_runs(
            [runs[0], make_result({"t::a": [1.0] * 20, "t::b": [1.0] * 20}, mode="leaderboard")]
        )
    with pytest.raises(bl.BaselineError, match="no runs"):
        bl.pool_runs([])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.update(spread=r["spread"] * 2), "spread is .* but its medians give"),
        (lambda r: r.update(medians=r["medians"][:1]), "must list >= 2 per-run medians"),
        (lambda r: r.update(medians=[1.0, -1.0, 2.0]), "must be finite seconds > 0"),
        (lambda r: r.update(spread=-0.1), "spread must be a finite fraction >= 0"),
        (lambda r: r.update(spread="0.01"), "spread must be a finite fraction >= 0"),
    ],
)
def test_a_corrupt_spread_is_an_error_never_a_threshold(
    tmp_path, make_result, gpu_like, edit, message
):
    pooled = bl.pool_runs(_runs(make_result, gpu_like))
    edit(pooled["benchmarks"][0]["extra_info"][bl.RUNS_KEY])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(pooled))
    with pytest.raises(bl.BaselineError, match=message):
        bl.load(path)


# -- runs made of several processes ------------------------------------------------------------
def test_pool_processes_records_each_process_and_never_sets_a_threshold(
    tmp_path, make_result, gpu_like
):
    parts = _runs(make_result, gpu_like, factors=(1.0, 1.012, 0.996, 1.004))
    run = bl.pool_processes(parts)
    for bench in run["benchmarks"]:
        name = bench["fullname"]
        assert bench["stats"]["data"] == [x for p in parts for x in bl.samples(p)[name]]
        rec = bench["extra_info"][bl.PROCESSES_KEY]
        assert rec["processes"] == 4 and rec["rounds"] == [20] * 4
        assert rec["spread"] == bl.run_spread(rec["medians"]) > 0
        assert bl.RUNS_KEY not in bench["extra_info"]
    # one run: the processes' spread is for people; the threshold needs runs (drift of runs)
    assert bl.drifts(run) == {}
    with pytest.raises(bl.BaselineError, match="process 1 measured other benchmarks"):
        bl.pool_processes([parts[0], make_result({"t::a": gpu_like(1, 20)})])
    with pytest.raises(bl.BaselineError, match="no processes"):
        bl.pool_processes([])


def test_pool_runs_keeps_every_process_of_every_run(make_result, gpu_like):
    runs = [
        bl.pool_processes(_runs(make_result, gpu_like, factors=(1.0 + r / 100, 1.0, 0.99)))
        for r in range(2)
    ]
    pooled = bl.pool_runs(runs)
    for bench in pooled["benchmarks"]:
        name = bench["fullname"]
        procs = bench["extra_info"][bl.PROCESSES_KEY]
        assert procs["processes"] == 6 and procs["rounds"] == [20] * 6
        assert procs["medians"] == [
            m for r in runs for m in r["benchmarks"][0 if name == "t::a" else 1]["extra_info"][
                bl.PROCESSES_KEY]["medians"]
        ]  # fmt: skip
        assert bench["extra_info"][bl.RUNS_KEY]["rounds"] == [60, 60]
    # a single-process run among them: the first run's record would describe that run alone
    mixed = bl.pool_runs([runs[0], _runs(make_result, gpu_like)[0]])
    assert all(bl.PROCESSES_KEY not in b["extra_info"] for b in mixed["benchmarks"])


def test_a_corrupt_process_record_is_an_error(tmp_path, make_result, gpu_like):
    run = bl.pool_processes(_runs(make_result, gpu_like))
    rec = run["benchmarks"][0]["extra_info"][bl.PROCESSES_KEY]
    rec["medians"] = rec["medians"][:1]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(run))
    with pytest.raises(
        bl.BaselineError, match=r"perfgate_processes\.medians must list >= 2 per-process"
    ):
        bl.load(path)


def test_append_samples_keeps_stats_consistent(tmp_path, make_result, gpu_like):
    data = make_result({"t::a": gpu_like(1, 20), "t::b": gpu_like(2, 20)})
    bl.append_samples(data, make_result({"t::a": gpu_like(3, 40)}))
    a, b = data["benchmarks"]
    assert a["stats"]["rounds"] == len(a["stats"]["data"]) == 60
    import statistics

    assert a["stats"]["median"] == statistics.median(a["stats"]["data"])
    assert b["stats"]["rounds"] == 20
    path = tmp_path / "d.json"
    atomic.write_json(path, data)
    bl.load(path)  # still valid: stats.rounds matches stats.data


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("gpu_name", "NVIDIA H100", "gpu_name 'NVIDIA H200' -> 'NVIDIA H100'"),
        ("arch", "sm100", "arch 'sm90' -> 'sm100'"),
        ("compute_units", 66, "compute_units 132 -> 66"),  # a MIG slice of the same card
        ("driver", "2", ""),  # a driver, a runtime, clocks: the same device
        ("runtime", "cuda 13", ""),
        ("clocks", {"sm_mhz": 1}, ""),
    ],
)
def test_device_differences_name_each_device_field(field, value, named):
    old = {"gpu_name": "NVIDIA H200", "arch": "sm90", "compute_units": 132, "driver": "1",
           "runtime": "cuda 12.8", "clocks": {"sm_mhz": 1980}}  # fmt: skip
    assert device.differences(old, dict(old, **{field: value})) == named


# -- the drift a stored threshold allows for: robust, one slow run does not set it ------------
def test_run_drift_is_the_mad_of_the_run_medians():
    assert bl.run_drift([1.0, 1.0, 1.04]) == 0.0  # one run in a slow episode is ignored
    assert bl.run_drift([2.0, 2.0]) == 0.0
    # median 1.01, absolute deviations 0.01, 0, 0.02: MAD 0.01
    assert bl.run_drift([1.0, 1.01, 1.03]) == pytest.approx(1.4826 * 0.01 / 1.01, rel=1e-12)
    # two runs: half the distance, 0.74 x the range relative to their mean
    assert bl.run_drift([1.0, 1.02]) == pytest.approx(1.4826 * 0.01 / 1.01, rel=1e-12)
    # a spread most runs share still counts
    assert bl.run_drift([1.0, 1.02, 1.04, 1.06, 1.08]) == pytest.approx(
        1.4826 * 0.02 / 1.04, rel=1e-12
    )


@pytest.mark.parametrize("medians", [[1.0], [], [1.0, 0.0], [1.0, -1.0]])
def test_run_drift_refuses_fewer_than_two_positive_medians(medians):
    with pytest.raises(ValueError, match="medians must hold >= 2 positive values"):
        bl.run_drift(medians)


def test_one_slow_run_of_three_leaves_the_stored_threshold_at_its_floor():
    # the committed H200 baseline's m16-n2112-k7168: medians 18.64, 18.64, 19.43 us (one run in
    # a slow episode). The range made the threshold 2 x 4.2% = 8.5%, above a 5% slowdown.
    from perfgate.gate.stats import Settings

    s = Settings()
    drift = bl.run_drift([18.64e-6, 18.64e-6, 19.43e-6])
    assert s.threshold(0.0, drift=drift) == s.min_effect_drift
    assert s.threshold(0.0, drift=bl.run_spread([18.64e-6, 18.64e-6, 19.43e-6])) > 0.05


# -- the committed baselines: each names the clean commit it was recorded at --------------------
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMITTED = sorted(
    os.path.relpath(os.path.join(root, name), REPO)
    for root, _, names in os.walk(os.path.join(REPO, "perf_baselines"))
    for name in names
    if name.endswith(".json")
)


def _fingerprint(rel: str) -> dict | None:
    with open(os.path.join(REPO, rel)) as f:
        data = json.load(f)
    block = data.get("machine_info", {}).get("perfgate") if isinstance(data, dict) else None
    return block.get("fingerprint") if isinstance(block, dict) else None


TIMED = [rel for rel in COMMITTED if _fingerprint(rel) is not None]


def test_the_committed_timing_baselines_are_found():
    assert "perf_baselines/nvidia-h200/device.json" in TIMED


@pytest.mark.parametrize("rel", TIMED)
def test_a_committed_baseline_was_recorded_from_a_clean_commit(rel):
    # history refuses a dirty record (its times belong to no commit), and a baseline is
    # re-recorded only together with the change that moved it: both need the commit it ran.
    fp = _fingerprint(rel)
    assert fp["git_dirty"] is False, f"{rel}: recorded with uncommitted changes"
    assert re.fullmatch(r"[0-9a-f]{40}", fp["git_commit"] or ""), f"{rel}: {fp['git_commit']!r}"


@pytest.mark.parametrize("rel", TIMED)
def test_a_committed_baseline_names_a_commit_of_this_history(rel, history_git):
    commit = _fingerprint(rel)["git_commit"]
    assert history_git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0, (
        f"{rel}: {commit} is not an ancestor of HEAD"
    )


# -- a baseline over several machines (update-baselines --extend) ------------------------------
def test_extending_a_pooled_baseline_equals_pooling_every_run(make_result, gpu_like):
    runs = _runs(make_result, gpu_like, factors=(1.0, 1.002, 1.03, 1.031))
    extended = bl.extend_runs(bl.pool_runs(runs[:2]), bl.pool_runs(runs[2:]))
    assert extended == bl.pool_runs(runs)  # samples, stats and per-run records, exactly
    drift = bl.drifts(extended)["t::a"]
    assert drift > 3 * bl.drifts(bl.pool_runs(runs[:2]))["t::a"]  # the machines' offset counts


def test_extending_keeps_every_process_of_both_machines(make_result, gpu_like):
    def machine(offset: float) -> dict:
        return bl.pool_runs(
            [
                bl.pool_processes(_runs(make_result, gpu_like, factors=(offset, offset * 1.01)))
                for _ in range(2)
            ]
        )

    stored, mine = machine(1.0), machine(1.03)
    extended = bl.extend_runs(stored, mine)
    for i, bench in enumerate(extended["benchmarks"]):
        procs = bench["extra_info"][bl.PROCESSES_KEY]
        assert procs["processes"] == 8 and procs["rounds"] == [20] * 8
        assert procs["medians"] == [
            m
            for f in (stored, mine)
            for m in f["benchmarks"][i]["extra_info"][bl.PROCESSES_KEY]["medians"]
        ]


@pytest.mark.parametrize(
    ("fingerprint", "message"),
    [
        ({"git_commit": "fedcba9"}, "another git_commit ('0123abc', this run 'fedcba9')"),
        ({"triton": "3.7.0"}, "another triton"),
        ({"driver": "999.1"}, "another driver"),
        ({"git_dirty": True}, "this run names no clean commit"),
    ],
)
def test_only_runs_of_one_commit_in_one_environment_extend_a_baseline(
    make_result, gpu_like, fingerprint, message
):
    stored = bl.pool_runs(_runs(make_result, gpu_like, factors=(1.0, 1.0)))
    names = {"t::a": gpu_like(7, 20), "t::b": gpu_like(8, 20)}
    mine = bl.pool_runs([make_result(names, **fingerprint), make_result(names, **fingerprint)])
    assert message in bl.extension_refusal(stored, mine)
    assert bl.extension_refusal(stored, bl.pool_runs(_runs(make_result, gpu_like))) is None


def test_what_cannot_extend_a_baseline_is_named(make_result, gpu_like):
    stored = bl.pool_runs(_runs(make_result, gpu_like, factors=(1.0, 1.0)))
    one = make_result({"t::a": gpu_like(1, 20)})
    fewer = bl.pool_runs([one, one])
    assert "measured other benchmarks (e.g. t::b)" in bl.extension_refusal(stored, fewer)
    single = _runs(make_result, gpu_like, factors=(1.0,))[0]
    assert "records no per-run medians" in bl.extension_refusal(single, stored)
    other_mode = bl.pool_runs(
        [make_result({"t::a": [1e-5] * 20, "t::b": [1e-5] * 20}, mode="leaderboard")] * 2
    )
    assert "another device or in another mode" in bl.extension_refusal(stored, other_mode)
    with pytest.raises(bl.BaselineError, match="only a baseline of >= 2 runs"):
        bl.extend_runs(stored, single)
