"""perfgate history: the store, ``history add`` (idempotent, bad files refused) and ``history list``,
on the repository's real H200 results files and on synthetic runs made from them. The tests
taking ``history_db`` run once on a SQLite file and once on a PostgreSQL server (conftest.py)."""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

from perfgate.__main__ import main
from perfgate.history import append, config, records, store
from perfgate.history.demo import write_history
from tests.perfgate.pgserver import sql

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "perf_baselines" / "nvidia-h200"
REAL = [H200 / "device.json", H200 / "leaderboard.json", H200 / "host.json"]


def _migrations(db) -> dict[int, tuple[str, ...]]:
    """The migrations of the store at ``db``: its kind's own SQL."""
    if store.is_server(db):
        from perfgate.history import pgstore

        return pgstore.MIGRATIONS
    return store.MIGRATIONS


def _count(db, table: str) -> int:
    return sql(db, f"SELECT count(*) FROM {table}")[0][0]


def test_add_real_results_files_is_idempotent(history_db, tmp_path, capsys):
    db = history_db
    assert main(["history", "add", *map(str, REAL), "--db", str(db)]) == 0
    assert "3 runs added, 0 already kept" in capsys.readouterr().out
    rows = _count(db, "results")
    assert (_count(db, "runs"), rows) == (3, 9 + 6 + 6)
    # the same runs again, one of them through another path: nothing is added
    copy = tmp_path / "copy-of-device.json"
    shutil.copyfile(REAL[0], copy)
    assert main(["history", "add", str(copy), *map(str, REAL), "--db", str(db)]) == 0
    assert "0 runs added, 4 already kept" in capsys.readouterr().out
    assert (_count(db, "runs"), _count(db, "results")) == (3, rows)


def test_a_row_holds_what_the_file_says(history_db):
    db = history_db
    data = json.loads(REAL[0].read_text())
    with store.open_store(db, write=True) as s:
        append.append_run(s, REAL[0], branch="main")
        rows = s.rows()
        bench = data["benchmarks"][0]
        row = next(r for r in rows if r.benchmark == bench["fullname"])
        samples = s.samples(row.run_id, row.benchmark)
    fp = data["machine_info"]["perfgate"]["fingerprint"]
    assert (row.device_key, row.mode, row.branch) == ("nvidia-h200", "device", "main")
    assert row.commit == fp["git_commit"] and row.fingerprint == fp
    # the committed file's commit_info.time is already UTC, and its datetime is when it ran
    assert data["commit_info"]["time"].endswith("+00:00")
    assert row.commit_time == data["commit_info"]["time"]
    assert row.run_time.startswith(data["datetime"][:19])
    assert samples == tuple(bench["stats"]["data"])  # bit for bit
    assert row.rounds == len(bench["stats"]["data"]) and row.median == bench["stats"]["median"]
    assert row.ci_low <= row.median <= row.ci_high and row.source == str(REAL[0])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{", "not valid JSON"),
        ("[]", "top level is a JSON array"),
        (None, "no 'machine_info' object"),  # host_counts.json: another kind of file
    ],
)
def test_a_malformed_file_is_exit_2_with_one_line_and_adds_nothing(
    history_db, tmp_path, capsys, content, expected
):
    db = history_db
    bad = H200 / "host_counts.json" if content is None else tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert main(["history", "add", str(REAL[0]), str(bad), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and str(bad) in err
    assert _count(db, "runs") == 0  # the good file before it was not added either


def test_a_dirty_or_commitless_run_is_refused(history_db, tmp_path, capsys):
    for field, value, expected in (
        ("git_dirty", True, "uncommitted changes"),
        ("git_commit", None, "fingerprint.git_commit is None"),
    ):
        data = json.loads(REAL[0].read_text())
        data["machine_info"]["perfgate"]["fingerprint"][field] = value
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps(data))
        assert main(["history", "add", str(path), "--db", str(history_db)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err


def test_list_filters_by_keyword_and_writes_json(history_db, tmp_path, capsys):
    db = history_db
    assert main(["history", "add", *map(str, REAL), "--db", str(db)]) == 0
    out = tmp_path / "rows.json"
    assert main(["history", "list", "--db", str(db), "-k", "m16-n2112", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    # device, leaderboard and host mode each time m16-n2112-k7168 once; the reducer case is s14-m16-n2112
    assert sorted((r["mode"], r["benchmark"].rpartition("::")[2]) for r in rows) == [
        ("device", "test_leaderboard[m16-n2112-k7168]"),
        ("device", "test_reducer[s14-m16-n2112]"),
        ("host", "test_host[m16-n2112-k7168]"),
        ("leaderboard", "test_leaderboard[m16-n2112-k7168]"),
    ]
    assert "m16-n2112" in capsys.readouterr().out
    assert main(["history", "list", "--db", str(db), "-k", "no-such-benchmark"]) == 2
    assert "no runs match -k no-such-benchmark" in capsys.readouterr().err
    assert main(["history", "list", "--db", str(db), "--mode", "fast"]) == 2
    assert "--mode fast: expected one of" in capsys.readouterr().err


def test_list_orders_each_series_by_commit_date(history_db, tmp_path):
    runs = write_history(tmp_path / "runs", runs=6, step_at=None, new_torch_at=None, max_rounds=12)
    db = history_db
    with store.open_store(db, write=True) as s:
        append.append_runs(s, list(reversed(runs)))  # added newest first
        rows = s.rows(store.Query(keyword="m4-n2880"))
    assert [r.source for r in rows] == [str(p) for p in runs]


def test_no_output_is_written_over_an_input(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    assert main(["history", "add", str(REAL[0]), "--db", str(db)]) == 0
    before = db.read_bytes()
    assert main(["history", "list", "--db", str(db), "--json", str(db)]) == 2
    assert "is also an input" in capsys.readouterr().err
    assert db.read_bytes() == before
    copy = tmp_path / "d.json"
    shutil.copyfile(REAL[0], copy)
    assert main(["history", "add", str(copy), "--db", str(copy)]) == 2
    assert copy.read_bytes() == REAL[0].read_bytes()


def test_stores_that_cannot_be_used(tmp_path, capsys):
    missing = tmp_path / "none.sqlite"
    assert main(["history", "list", "--db", str(missing)]) == 2
    assert "no history there" in capsys.readouterr().err and not missing.exists()
    results = tmp_path / "results.json"
    shutil.copyfile(REAL[0], results)
    assert main(["history", "list", "--db", str(results)]) == 2
    assert "not a usable history database" in capsys.readouterr().err
    assert main(["history", "list", "--db", str(REAL[0])]) == 2  # a committed baseline
    assert "is a tracked file or folder of the repository" in capsys.readouterr().err
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE t (x)")
    assert main(["history", "add", str(REAL[0]), "--db", str(foreign)]) == 2
    assert "not a perfgate history" in capsys.readouterr().err
    assert main(["history", "list", "--db", "mysql://ci/perf"]) == 2
    assert "mysql:// is no kind of store" in capsys.readouterr().err
    assert main(["history", "list", "--db", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_schema_migrates_from_empty_and_refuses_a_newer_one(tmp_path):
    db = tmp_path / "h.sqlite"
    sqlite3.connect(db).close()  # an empty SQLite file is schema 0
    with pytest.raises(store.StoreError, match="schema version 0 is older"):
        store.open_store(db, write=False)
    with store.open_store(db, write=True) as s:
        assert append.append_run(s, REAL[0]).added
    with sqlite3.connect(db) as c:
        version = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        assert int(version) == store.SCHEMA_VERSION
        c.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'",
            (str(store.SCHEMA_VERSION + 1),),
        )
    for write in (False, True):
        with pytest.raises(store.StoreError, match="newer than this perfgate"):
            store.open_store(db, write=write)


def test_a_schema_1_store_is_migrated_and_keeps_its_runs_without_verdicts(history_db):
    """Schema 2 added the runs' gate verdict; a store of schema 1 (a run kept) is migrated by
    the next write, its runs' verdicts unknown, and refused read-only until then."""
    db = history_db
    for statement in _migrations(db)[1]:
        sql(db, statement)
    sql(db, "INSERT INTO meta VALUES ('schema_version', '1')")
    sql(
        db,
        "INSERT INTO runs (digest, source, device_key, mode, git_commit, fingerprint, "
        "segment, added_at) VALUES ('d', 's.json', 'k', 'device', 'c', '{}', 'g', 'now')",
    )
    sql(db, "INSERT INTO results VALUES (1, 'b', NULL, 1.0, 0.9, 1.1, 3, NULL)")
    with pytest.raises(store.OlderSchemaError, match="schema version 1 is older"):
        store.open_store(db, write=False)
    with store.open_store(db, write=True) as s:
        run = records.read_run(REAL[0])
        assert s.add_run(records.Run(**{**run.__dict__, "verdict": "pass"}))
        with pytest.raises(ValueError, match="verdict must be one of"):
            s.add_run(records.Run(**{**run.__dict__, "digest": "x", "verdict": "passed"}))
    with store.open_store(db, write=False) as s:
        verdicts = {(r.source, r.verdict) for r in s.rows()}
    assert verdicts == {("s.json", None), (str(REAL[0]), "pass")}


def test_samples_are_kept_for_the_newest_runs_only(history_db, tmp_path):
    runs = write_history(tmp_path / "runs", runs=5, step_at=None, new_torch_at=None, max_rounds=12)
    with store.open_store(history_db, write=True) as s:
        append.append_runs(s, runs, samples_kept=2)
        rows = s.rows(store.Query(keyword="m4-n2880"))
        assert [r.has_samples for r in rows] == [False, False, False, True, True]
        assert s.samples(rows[0].run_id, rows[0].benchmark) is None
        assert len(s.samples(rows[-1].run_id, rows[-1].benchmark)) == 12
        assert all(math.isfinite(r.median) for r in rows)  # medians stay


def _exact_lower_tail(n: int, j: int) -> Fraction:
    return Fraction(sum(math.comb(n, i) for i in range(j + 1)), 2**n)


@pytest.mark.parametrize("n", range(1, 80))
def test_median_ci_is_the_order_statistic_interval(n):
    samples = [float(i) for i in range(n, 0, -1)]  # value i+1 is order statistic i
    low, high = records.median_ci(samples)
    k = int(low) - 1  # order statistics cut from each end
    assert high == n - k  # symmetric
    tail = Fraction(1, 40)  # (1 - 0.95) / 2
    if _exact_lower_tail(n, 0) > tail:
        assert (low, high) == (1.0, float(n))  # no interval reaches 95%: the full range
    else:
        assert _exact_lower_tail(n, k) <= tail < _exact_lower_tail(n, k + 1)


def test_history_settings_table_is_checked(tmp_path):
    good = config.load()
    assert good.db == REPO / ".perfgate" / "history.sqlite"
    text = (REPO / "pyproject.toml").read_text()
    for old, new, expected in (
        ("min_size = 3 ", "min_size = 1 ", "min_size must be an int in [2, 100], got 1"),
        ("min_runs = 3 ", "min_runs = 9 ", "min_runs must be <= baseline_runs"),
        ("samples_kept = 20 ", "samples_kept = 2 ", "samples_kept must be >= baseline_runs"),
        ("penalty = 5.0 ", "penalty = 'x' ", "penalty must be finite and > 0, got 'x'"),
        ("significance = 0.01 ", "signifcance = 0.01 ", "unknown key signifcance"),
        # a zero threshold is never met: every run judged against history inconclusive
        (
            "gate_min_effect = 0.025 ",
            "gate_min_effect = 0.0 ",
            "gate_min_effect must be a fraction in (0, 1), got 0.0",
        ),
    ):
        assert old in text, old
        path = tmp_path / "pyproject.toml"
        path.write_text(text.replace(old, new, 1))
        with pytest.raises(config.HistoryConfigError, match=re.escape(expected)):
            config.load(path)
