"""The history on a PostgreSQL server (perfgate/history/pgstore.py), against a real server the tests
start (conftest.py's pg_server: a throwaway cluster on a unix socket): URLs and passwords, a schema
from the future, writers at once, a writer killed in the middle of a run, the server going away
in the middle of one, roles, ``history migrate`` both ways, and the same answers from both stores.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfgate.__main__ import main
from perfgate.history import append, config, store
from perfgate.history.demo import write_history
from tests.perfgate.pgserver import PASSWORD, PASSWORD_ROLE, sql

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "perf_baselines" / "nvidia-h200" / "device.json"
CFG = config.load()


def _one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"perfgate history {command}: error: "), err
    return err


# -- the schema ----------------------------------------------------------------------------------
def test_both_stores_migrate_through_the_same_schema_versions():
    pgstore = pytest.importorskip("perfgate.history.pgstore")
    versions = list(range(1, store.SCHEMA_VERSION + 1))
    assert sorted(store.MIGRATIONS) == sorted(pgstore.MIGRATIONS) == versions


def test_a_newer_schema_on_the_server_is_refused_and_left_as_it_is(pg_url, capsys):
    assert main(["history", "add", str(REAL), "--db", pg_url]) == 0
    newer = str(store.SCHEMA_VERSION + 1)
    sql(pg_url, "UPDATE meta SET value = ? WHERE key = 'schema_version'", (newer,))
    capsys.readouterr()
    for argv in (["list"], ["add", str(REAL)], ["detect"]):
        assert main(["history", *argv, "--db", pg_url]) == 2
        err = _one_line_error(capsys, argv[0])
        assert f"schema version {newer} is newer than this perfgate's" in err
    assert sql(pg_url, "SELECT value FROM meta") == [(newer,)]
    assert sql(pg_url, "SELECT count(*) FROM runs") == [(1,)]


def test_an_empty_database_is_no_history_and_foreign_tables_are_not_one(pg_server, pg_url, capsys):
    assert main(["history", "list", "--db", pg_url]) == 2
    assert "no history there" in _one_line_error(capsys, "list")
    schema = pg_url.rsplit("%3D", 1)[1]
    pg_server.admin(f"CREATE TABLE {schema}.runs (x int)")
    assert main(["history", "add", str(REAL), "--db", pg_url]) == 2
    assert "no perfgate history (no meta table)" in _one_line_error(capsys, "add")


# -- URLs, passwords, where the store is ---------------------------------------------------------
@pytest.fixture
def bad_urls(pg_server):
    sock = f"host={pg_server.root}&port=5432"
    return {
        "unparseable": ("postgresql://u:hunter2@[::1", "not a usable PostgreSQL URL"),
        "unknown option": (f"postgresql:///perfgate?{sock}&colour=red", "invalid URI query"),
        "no server there": ("postgresql:///perfgate?host=/nonexistent-dir", "cannot connect"),
        "no such database": (
            f"postgresql://postgres@/nosuchdb?{sock}",
            'database "nosuchdb" does not exist',
        ),
        "wrong password": (
            f"postgresql://{PASSWORD_ROLE}:hunter2@/perfgate?{sock}",
            "password authentication failed",
        ),
        "not a port": ("postgresql://localhost:notaport/perfgate", "cannot connect"),
    }


@pytest.mark.parametrize(
    "case",
    ["unparseable", "unknown option", "no server there", "no such database", "wrong password",
     "not a port"],
)  # fmt: skip
def test_a_url_that_cannot_be_used_is_one_line_exit_2_without_its_password(bad_urls, case, capsys):
    url, expected = bad_urls[case]
    for command in ("list", "add"):
        argv = ["history", command, *([str(REAL)] if command == "add" else []), "--db", url]
        assert main(argv) == 2
        err = _one_line_error(capsys, command)
        assert expected in err and "hunter2" not in err


def test_the_right_password_opens_the_store_and_is_never_shown(pg_server, capsys):
    url = pg_server.fresh_url(user=PASSWORD_ROLE, password=PASSWORD)
    assert main(["history", "add", str(REAL), "--db", url]) == 0
    assert main(["history", "list", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "1 run added" in out and f"{PASSWORD_ROLE}:***@" in out and PASSWORD not in out


def test_the_url_comes_from_the_environment_unless_db_is_given(pg_url, tmp_path, monkeypatch):
    default = CFG.db
    existed = Path(default).exists()
    monkeypatch.setenv(store.URL_ENV, pg_url)
    assert main(["history", "add", str(REAL)]) == 0
    assert sql(pg_url, "SELECT count(*) FROM runs") == [(1,)]
    assert Path(default).exists() == existed  # the table's store was not touched
    local = tmp_path / "h.sqlite"
    assert main(["history", "add", str(REAL), "--db", str(local)]) == 0  # --db wins
    assert sql(local, "SELECT count(*) FROM runs") == [(1,)]
    monkeypatch.setenv(store.URL_ENV, "/tmp/some.sqlite")
    with pytest.raises(store.StoreError, match=f"{store.URL_ENV}=/tmp/some.sqlite: expected a"):
        store.location(None, default)
    monkeypatch.setenv(store.URL_ENV, "")  # an unset CI secret reads as empty: unset
    assert store.location(None, default) == default


def test_the_settings_table_may_name_a_server_but_not_its_password(tmp_path):
    text = (REPO / "pyproject.toml").read_text()
    old = 'db = ".perfgate/history.sqlite"'
    assert old in text
    path = tmp_path / "pyproject.toml"
    path.write_text(text.replace(old, 'db = "postgresql://runner@db.example/perf"'))
    assert config.load(path).db == "postgresql://runner@db.example/perf"
    path.write_text(text.replace(old, 'db = "postgresql://runner:pw@db.example/perf"'))
    with pytest.raises(config.HistoryConfigError, match="db holds a password, in a committed"):
        config.load(path)


# -- roles: the runners write, a dashboard reads (the SQL of docs/history.md) --------------------
def _documented_sql() -> list[str]:
    text = (REPO / "docs" / "history.md").read_text()
    block = text.split("<!-- roles: tests/perfgate/test_history_server.py runs this -->", 1)[1]
    block = block.split("```sql", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in " ".join(lines).split(";") if s.strip()]


def test_the_documented_roles_let_runners_write_and_a_dashboard_only_read(pg_server, capsys):
    for statement in _documented_sql():
        pg_server.admin(statement)
    sock = f"host={pg_server.root}&port=5432"
    runner = f"postgresql://perfgate_runner:change-me@/perfgate?{sock}"
    dashboard = f"postgresql://perfgate_dashboard:change-me@/perfgate?{sock}"
    assert main(["history", "add", str(REAL), "--db", runner]) == 0
    assert main(["history", "list", "--db", dashboard]) == 0
    assert "change-me" not in capsys.readouterr().out
    copy = pg_server.root / "copy-of-leaderboard.json"
    copy.write_bytes((REAL.parent / "leaderboard.json").read_bytes())
    assert main(["history", "add", str(copy), "--db", dashboard]) == 2
    assert "permission denied" in _one_line_error(capsys, "add")
    assert sql(runner, "SELECT count(*) FROM runs") == [(1,)]


# -- writers at once -----------------------------------------------------------------------------
WRITER = textwrap.dedent(
    """
    import hashlib, json, sys, time
    from pathlib import Path
    from perfgate.history import append, store
    from perfgate.history.records import Result, Run

    url, me, writers, per_writer, retries, go, out = sys.argv[1:]
    me, writers, per_writer, retries = int(me), int(writers), int(per_writer), int(retries)

    def run(i):
        # several runners measure one commit: runs differ by the job (its date), not the commit
        fingerprint = {"gpu_name": "CPU box", "torch": "2.13.0", "git_commit": f"c{i % 100:04d}"}
        results = tuple(
            Result(f"tests/perf/t.py::test_shape[{b}]", "leaderboard", 1e-5 * (1 + b), 0.9e-5,
                   1.1e-5, 20, tuple(1e-5 * (1 + b + k / 1000) for k in range(20)))
            for b in range(4)
        )
        return Run(hashlib.sha256(f"run {i}".encode()).hexdigest(), f"job-{i}/device.json",
                   "cpu-box", "device", "main", f"c{i % 100:04d}",
                   f"2026-12-01T00:{i % 100 // 60:02d}:{i % 60:02d}+00:00",
                   f"2026-12-02T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00",
                   fingerprint, results)

    mine = [run(me * per_writer + k) for k in range(per_writer)]
    # a retried upload racing the first: every `retries`-th run of the next writer, again
    neighbour = (me + 1) % writers
    again = [run(neighbour * per_writer + k) for k in range(0, per_writer, retries)]
    order = mine + again
    order[::2], order[1::2] = order[: (len(order) + 1) // 2], order[(len(order) + 1) // 2 :]
    s = store.open_store(url, write=True)
    while not Path(go).exists():
        time.sleep(0.005)
    added = sum(
        append.add_runs(s, [r], samples_kept=20)[0].added for r in order
    )  # as history add does: each run, then the samples beyond the newest 20 of each series
    s.close()
    Path(out).write_text(json.dumps({"attempts": len(order), "added": added}))
    """
)


def test_writers_at_once_lose_no_run_and_keep_none_twice(pg_url, tmp_path, capsys):
    writers, per_writer, retries = 8, 200, 4
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    go = tmp_path / "go"
    store.open_store(pg_url, write=True).close()  # the schema exists before they start
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                pg_url,
                str(w),
                str(writers),
                str(per_writer),
                str(retries),
                str(go),
                str(tmp_path / f"w{w}.json"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    time.sleep(1.0)  # all of them connected and waiting (imports take under a second)
    start = time.monotonic()
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    wall = time.monotonic() - start
    done = [json.loads((tmp_path / f"w{w}.json").read_text()) for w in range(writers)]
    distinct = writers * per_writer
    attempts = sum(d["attempts"] for d in done)
    assert attempts == distinct + writers * len(range(0, per_writer, retries))
    assert sum(d["added"] for d in done) == distinct  # every retry found its run kept
    (runs, rows, keys, digests), = sql(
        pg_url,
        "SELECT count(DISTINCT r.id), count(*), count(DISTINCT (r.git_commit, r.device_key, "
        "r.fingerprint, r.mode, x.benchmark, r.run_time)), count(DISTINCT r.digest) "
        "FROM runs r JOIN results x ON x.run_id = r.id",
    )  # fmt: skip
    lost, duplicated = distinct - digests, rows - keys
    assert (runs, rows, lost, duplicated) == (distinct, 4 * distinct, 0, 0)
    # the last writer's prune saw every run: each series keeps exactly the newest 20 samples
    kept = sql(pg_url, "SELECT benchmark, count(*) FROM results WHERE samples IS NOT NULL "
                       "GROUP BY benchmark")  # fmt: skip
    assert sorted(n for _, n in kept) == [20] * 4
    with capsys.disabled():  # the figure docs/measurements.md records
        print(
            f"\nPostgreSQL history: {writers} writers x {per_writer} runs (+{attempts - distinct} "
            f"retried uploads): {runs} runs, {rows} rows, lost {lost}, duplicated {duplicated}, "
            f"wall {wall:.1f} s"
        )


# -- a writer killed in the middle of a run, the server gone in the middle of one ---------------
HOOKED_ADD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    kind, ready, go, results, db = sys.argv[1:]

    def pause():  # called between the run's row and its results, in its transaction
        Path(ready).touch()
        while not Path(go).exists():
            time.sleep(0.01)

    if kind == "postgresql":
        import psycopg

        original = psycopg.Cursor.copy

        def copy(self, *args, **kwargs):
            pause()
            return original(self, *args, **kwargs)

        psycopg.Cursor.copy = copy
    else:
        import sqlite3

        connect = sqlite3.connect

        class Paused:
            def __init__(self, db):
                self._db = db

            def executemany(self, *args, **kwargs):
                pause()
                return self._db.executemany(*args, **kwargs)

            def __getattr__(self, name):
                return getattr(self._db, name)

        sqlite3.connect = lambda *a, **k: Paused(connect(*a, **k))

    from perfgate.__main__ import main

    sys.exit(main(["history", "add", results, "--db", db]))
    """
)


def _paused_add(kind: str, db, tmp_path: Path, results: Path) -> tuple[subprocess.Popen, Path]:
    """``history add`` in a process of its own, paused inside the run's transaction until
    ``go`` exists; returns it once it is there, and ``go``."""
    script = tmp_path / "hooked_add.py"
    script.write_text(HOOKED_ADD)
    ready, go = tmp_path / "ready", tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, str(script), kind, str(ready), str(go), str(results), str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the writer never reached its transaction"
        time.sleep(0.01)
    return proc, go


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_writer_killed_in_the_middle_of_a_run_leaves_none_of_it(
    history_db, tmp_path, sig, capsys
):
    kind = "postgresql" if store.is_server(history_db) else "sqlite"
    results = tmp_path / "device.json"
    results.write_bytes(REAL.read_bytes())
    store.open_store(history_db, write=True).close()
    proc, _ = _paused_add(kind, history_db, tmp_path, results)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (-sig if sig == signal.SIGKILL else 128 + sig), err
    with store.open_store(history_db, write=True) as s:  # SQLite: the hot journal rolls back
        assert s.rows() == [] and sql(history_db, "SELECT count(*) FROM runs") == [(0,)]
    if kind == "postgresql":  # the server holds nothing of it, no transaction left open
        deadline = time.monotonic() + 10
        while sql(history_db, "SELECT count(*) FROM pg_stat_activity WHERE "
                              "application_name = 'perfgate' AND xact_start IS NOT NULL") != [(0,)]:  # fmt: skip
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert main(["history", "add", str(results), "--db", str(history_db)]) == 0
    assert "1 run added" in capsys.readouterr().out


def test_the_server_going_away_in_the_middle_of_a_run_is_one_line_and_the_run_can_be_added_again(
    pg_server, pg_url, tmp_path
):
    results = tmp_path / "device.json"
    results.write_bytes(REAL.read_bytes())
    store.open_store(pg_url, write=True).close()
    proc, go = _paused_add("postgresql", pg_url, tmp_path, results)
    pg_server.stop()
    try:
        go.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        pg_server.start()
    assert proc.returncode == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("perfgate history add: error: "), err
    assert f"adding {results}" in err and "add it again" in err
    assert results.read_bytes() == REAL.read_bytes()  # the run is still on disk
    assert sql(pg_url, "SELECT count(*) FROM runs") == [(0,)]
    done = subprocess.run([sys.executable, "-m", "perfgate", "history", "add", str(results),
                           "--db", pg_url], capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert done.returncode == 0 and "1 run added" in done.stdout, done.stderr


# -- history migrate -----------------------------------------------------------------------------
@pytest.fixture
def demo_runs(tmp_path):
    """24 runs (a 5% step at run 14, a new torch from run 6), 12 rounds each."""
    return write_history(tmp_path / "runs", runs=24, max_rounds=12)


def _fill(db, runs) -> None:
    """The runs kept as history add keeps them, samples pruned to the newest 5, one run with
    a verdict."""
    with store.open_store(db, write=True) as s:
        append.append_runs(s, runs[:-1], branch="main", samples_kept=5)
        append.add_runs(s, [_with_verdict(runs[-1], "pass")], samples_kept=5)


def _with_verdict(path, verdict):
    import dataclasses

    return dataclasses.replace(append.read_any(path, branch="main"), verdict=verdict)


def _kept(db):
    with store.open_store(db, write=False) as s:
        return s.kept_runs()


def test_migrate_copies_sqlite_to_postgresql_and_back_row_for_row(
    pg_url, demo_runs, tmp_path, capsys
):
    first, back = tmp_path / "first.sqlite", tmp_path / "back.sqlite"
    _fill(first, demo_runs)
    capsys.readouterr()
    assert main(["history", "migrate", "--from", str(first), "--to", pg_url]) == 0
    out = capsys.readouterr().out
    assert "24 runs (216 rows, 45 with samples)" in out and "24 added, 0 already there" in out
    assert main(["history", "migrate", "--from", pg_url, "--to", str(back)]) == 0
    assert _kept(first) == _kept(pg_url) == _kept(back)  # added_at, samples, verdict: all
    listed = []
    for i, db in enumerate((first, pg_url, back)):
        out = tmp_path / f"list-{i}.json"
        assert main(["history", "list", "--db", str(db), "--json", str(out)]) == 0
        listed.append(json.loads(out.read_text()))
    assert listed[0] == listed[1] == listed[2]
    # a copy of a copy adds nothing
    capsys.readouterr()
    assert main(["history", "migrate", "--from", str(back), "--to", pg_url]) == 0
    assert "0 added, 24 already there with the same data" in capsys.readouterr().out


def test_migrate_refuses_a_target_holding_other_data_for_a_run_and_writes_nothing(
    pg_url, demo_runs, tmp_path, capsys
):
    source = tmp_path / "source.sqlite"
    _fill(source, demo_runs)
    with store.open_store(pg_url, write=True) as s:  # the same run, kept with another verdict
        s.add_run(_with_verdict(demo_runs[-1], "fail"))
    before = _kept(pg_url)
    capsys.readouterr()
    assert main(["history", "migrate", "--from", str(source), "--to", pg_url]) == 2
    err = _one_line_error(capsys, "migrate")
    assert "already holds run" in err and "verdict: 'pass' and 'fail'" in err
    assert "nothing was written" in err
    assert _kept(pg_url) == before  # not even the 23 runs it lacked
    # and the other way: a SQLite target is left as it was, a new one not created
    target = tmp_path / "target.sqlite"
    assert main(["history", "migrate", "--from", pg_url, "--to", str(source)]) == 2
    assert "verdict: 'fail' and 'pass'" in _one_line_error(capsys, "migrate")
    assert main(["history", "migrate", "--from", str(tmp_path / "none.sqlite"), "--to",
                 str(target)]) == 2  # fmt: skip
    assert "no history there" in _one_line_error(capsys, "migrate") and not target.exists()


def test_migrate_needs_two_stores(tmp_path, capsys, monkeypatch):
    db = tmp_path / "h.sqlite"
    assert main(["history", "migrate", "--from", str(db), "--to", f"sqlite:///{db}"]) == 2
    assert "the same store" in _one_line_error(capsys, "migrate")
    monkeypatch.setenv(store.URL_ENV, "postgresql://runner:pw@db.example/perf")
    assert main(["history", "migrate", "--to", "postgresql://runner:pw@db.example/perf"]) == 2
    err = _one_line_error(capsys, "migrate")
    assert "the same store" in err and ":pw@" not in err
    assert main(["history", "migrate", "--from", str(db), "--to", str(REAL)]) == 2
    assert "is a tracked file or folder of the repository" in _one_line_error(capsys, "migrate")


# -- the same answers from both stores -----------------------------------------------------------
def test_rows_come_back_in_byte_order_whatever_the_databases_locale(
    pg_url, tmp_path, write_result, gpu_like
):
    """The test cluster's default collation is ICU's en-US (pgserver.py), which sorts case and
    punctuation otherwise than bytes do: "B" after "a", "_" before letters. Rows come back in
    the SQLite store's (byte) order all the same."""
    names = ["t.py::test[B]", "t.py::test[a]", "t.py::test[_b]", "t.py::test[-]", "t.py::Test[z]"]
    results = write_result("mixed.json", {n: gpu_like(i) for i, n in enumerate(names)})
    local = tmp_path / "h.sqlite"
    order = {}
    for db in (local, pg_url):
        with store.open_store(db, write=True) as s:
            append.append_run(s, results)
            order[store.is_server(db)] = [r.benchmark for r in s.rows()]
    assert order[False] == order[True] == sorted(names)
    assert sorted(names, key=str.lower) != sorted(names)  # the case makes a difference here


def test_list_detect_and_plot_answer_alike_from_both_stores(pg_url, demo_runs, tmp_path, capsys):
    """The demo's history kept in a SQLite file and on the server: list, detect (its JSON, its
    table and its exit code) and plot (the PNG, byte for byte) are the same."""
    local = tmp_path / "h.sqlite"
    for db in (local, pg_url):
        with store.open_store(db, write=True) as s:
            append.append_runs(s, demo_runs, branch="main", samples_kept=CFG.samples_kept)
    capsys.readouterr()
    answers = {}
    for name, db in (("sqlite", local), ("postgresql", pg_url)):
        out = tmp_path / name
        out.mkdir()
        got = []
        for argv in (
            ["list", "--json", str(out / "list.json")],
            ["detect", "--json", str(out / "detect.json")],
            ["plot", "--out", str(out / "plot.png")],
            ["list", "-k", "m16-n2112", "--mode", "device"],
        ):
            rc = main(["history", *argv, "--db", str(db)])
            text = capsys.readouterr().out.replace(store.display(db), "STORE")
            # the tables' title is centred: the two stores' names are of different lengths
            lines = [line.strip() for line in text.replace(str(out), "OUT").splitlines()]
            got.append((rc, "\n".join(lines)))
        files = {f: (out / f).read_bytes() for f in ("list.json", "detect.json", "plot.png")}
        answers[name] = (got, files)
    assert answers["sqlite"] == answers["postgresql"]
    (list_rc, _), (detect_rc, detect_out), *_ = answers["postgresql"][0]
    assert (list_rc, detect_rc) == (0, 1) and "ALARM" in detect_out  # the planted 5% step
    changes = json.loads(answers["postgresql"][1]["detect.json"])
    assert any(c["alarm"] and "m16-n2112-k7168" in c["benchmark"] for c in changes)
