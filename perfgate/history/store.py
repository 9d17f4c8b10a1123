"""The history store: one small interface (:class:`Store`), SQLite behind it by default, a
PostgreSQL server through a URL (:mod:`perfgate.history.pgstore`).

One row per benchmark per run (:class:`Row`): device key, timing mode, benchmark, commit,
commit date, run date, fingerprint, median, the CI of the median, rounds and the run's source
file, plus the branch, the fingerprint segment and the per-round samples of the newest runs
(the push gate pools them), and the run's gate verdict when it was recorded (:data:`VERDICTS`:
the triage's good commit is the newest main run that passed). Commands speak only to
:class:`Store` (:mod:`perfgate.history.store_base`); :func:`open_store` picks the
implementation by the location: a path or ``sqlite:///PATH`` (a file, no server needed), or
``postgresql://...`` (a server shared by a fleet of runners and read by dashboards).

Where the store is (:func:`location`): ``--db``, else the environment variable
:data:`URL_ENV` (the server's URL is a secret: a CI secret, never a committed file), else ``db``
of ``[tool.perfgate-history]``.

The SQLite file has a schema version (table ``meta``) and migrations (:data:`MIGRATIONS`):
opening for writing brings an older file up to date in one transaction; a newer file is
refused, never rewritten. Every write is one transaction, so a killed ``add`` leaves the store
as it was before it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from perfgate.history.records import VERDICTS, Run
from perfgate.history.store_base import (
    ALL_ROWS,
    NEWEST_FIRST,
    KeptResult,
    KeptRun,
    chunks,
    insert_run_sql,
    one_line,
    result_values,
    row_of,
    rows_sql,
    run_values,
    scheme_of,
    unpack,
)
from perfgate.history.store_base import SCHEMA_VERSION as SCHEMA_VERSION
from perfgate.history.store_base import OlderSchemaError as OlderSchemaError
from perfgate.history.store_base import Query as Query
from perfgate.history.store_base import Row as Row
from perfgate.history.store_base import Store as Store
from perfgate.history.store_base import StoreError as StoreError
from perfgate.history.store_base import display as display
from perfgate.history.store_base import is_server as is_server

# The server's URL, when the repository has one: read where --db is not given, before the
# table's db (CI passes its secret here; an empty value is unset, as an unset secret reads).
URL_ENV = "PERFGATE_HISTORY_URL"

# MIGRATIONS[v] takes a store of version v - 1 (0: an empty file) to version v.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            digest TEXT NOT NULL UNIQUE,
            source TEXT NOT NULL,
            device_key TEXT NOT NULL,
            mode TEXT NOT NULL,
            branch TEXT,
            git_commit TEXT NOT NULL,
            commit_time TEXT,
            run_time TEXT,
            fingerprint TEXT NOT NULL,
            segment TEXT NOT NULL,
            added_at TEXT NOT NULL
        )""",
        """CREATE TABLE results (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            benchmark TEXT NOT NULL,
            grp TEXT,
            median REAL NOT NULL,
            ci_low REAL NOT NULL,
            ci_high REAL NOT NULL,
            rounds INTEGER NOT NULL,
            samples BLOB,
            PRIMARY KEY (run_id, benchmark)
        )""",
        "CREATE INDEX results_by_benchmark ON results (benchmark)",
        "CREATE INDEX runs_by_series ON runs (device_key, mode)",
    ),
    # the gate's verdict on the run (bench --history, history add --verdicts); NULL: not recorded
    2: ("ALTER TABLE runs ADD COLUMN verdict TEXT",),
}


def location(given: str | os.PathLike[str] | None, configured: str | Path) -> str | Path:
    """The store a command uses: ``given`` (``--db``), else :data:`URL_ENV` when set, else
    ``configured`` (``db`` of ``[tool.perfgate-history]``)."""
    if given:
        return given
    url = os.environ.get(URL_ENV, "").strip()
    if url:
        if not is_server(url):
            raise StoreError(
                f"{URL_ENV}={display(url)}: expected a postgresql:// URL (the history server's)"
            )
        return url
    return configured


def local_path(location: str | os.PathLike[str]) -> Path | None:
    """The file of a SQLite store (a path or ``sqlite:///PATH``); None for a server's URL;
    StoreError for a location of any other kind."""
    if is_server(location):
        return None
    text = str(location)
    scheme = scheme_of(text)
    if scheme == "sqlite":
        return Path(text.split("://", 1)[1])
    if scheme:
        raise StoreError(
            f"--db {display(text)}: {scheme}:// is no kind of store; expected a SQLite path "
            "(or sqlite:///PATH) or a postgresql:// URL"
        )
    return Path(text)


def sqlite_path(location: str | os.PathLike[str]) -> Path:
    """The file of a SQLite store location; StoreError for a location of another kind."""
    path = local_path(location)
    if path is None:
        raise StoreError(f"--db {display(location)}: a server's URL, expected a SQLite path")
    return path


def open_store(location: str | os.PathLike[str], *, write: bool) -> Store:
    """The store at ``location``: a path or ``sqlite:///PATH`` (SQLite), or a ``postgresql://``
    URL (:mod:`perfgate.history.pgstore`). ``write=False`` opens read-only and refuses a
    missing store; ``write=True`` creates or migrates it."""
    if is_server(location):
        from perfgate.history import pgstore

        return pgstore.PostgresStore(str(location), write=write)
    return SQLiteStore(sqlite_path(location), write=write)


def exists(location: str | os.PathLike[str]) -> bool:
    """Whether a store (or anything else) is at ``location``; for a server, whether its
    database holds a history (StoreError when it cannot be reached)."""
    if is_server(location):
        from perfgate.history import pgstore

        return pgstore.holds_history(str(location))
    return sqlite_path(location).exists()


def check_usable(location: str | os.PathLike[str], *, write: bool) -> None:
    """Refuse (StoreError) a store that :func:`open_store` would refuse, changing nothing: a
    missing store is fine for writing when it can be created there, and for reading (the caller
    decides what no history means); an older schema is fine for writing (it will be migrated)."""
    if is_server(location):
        from perfgate.history import pgstore

        pgstore.check_usable(str(location), write=write)
        return
    path = sqlite_path(location)
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, expected a history database file")
    if path.exists():
        try:
            SQLiteStore(path, write=False).close()
        except OlderSchemaError:
            if not write:
                raise
        return
    if write:
        parent = next(p for p in path.absolute().parents if p.exists())
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(f"{path}: cannot create a history there ({parent} is not writable)")


class SQLiteStore(Store):
    def __init__(self, path: Path, *, write: bool) -> None:
        self.location = str(path)
        if path.is_dir():
            raise StoreError(f"{path}: is a directory, expected a history database file")
        if not write and not path.is_file():
            raise StoreError(
                f"{path}: no history there; add runs with `python -m perfgate history add`"
            )
        try:
            if write:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(path, timeout=30, isolation_level=None)
            else:
                uri = path.resolve().as_uri() + "?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA foreign_keys = ON")
            self._prepare(write)
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            raise StoreError(f"{path}: not a usable history database ({one_line(exc)})") from None
        except OSError as exc:
            self._close_quietly()
            raise StoreError(f"{path}: cannot open ({exc.strerror or exc})") from None

    # -- schema ----------------------------------------------------------------------------------
    def _version(self) -> int:
        tables = {
            r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables:
            return 0
        if "meta" not in tables:
            raise StoreError(f"{self.location}: a SQLite file, but not a perfgate history")
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        try:
            return int(row[0])
        except (TypeError, ValueError):
            raise StoreError(
                f"{self.location}: no valid schema_version in its meta table"
            ) from None

    def _prepare(self, write: bool) -> None:
        version = self._version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.location}: schema version {version} is newer than this perfgate's "
                f"{SCHEMA_VERSION}; update perfgate"
            )
        if version == SCHEMA_VERSION:
            return
        if not write:
            raise OlderSchemaError(
                f"{self.location}: schema version {version} is older than this perfgate's "
                f"{SCHEMA_VERSION}; `python -m perfgate history add` migrates it"
            )
        with self._transaction():
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[v]:
                    self._db.execute(statement)
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- Store -----------------------------------------------------------------------------------
    def add_run(self, run: Run) -> bool:
        if run.verdict not in (None, *VERDICTS):
            raise ValueError(f"verdict must be one of {VERDICTS} or None, got {run.verdict!r}")
        with self._transaction():
            if self._db.execute("SELECT 1 FROM runs WHERE digest = ?", (run.digest,)).fetchone():
                return False
            cur = self._db.execute(insert_run_sql("?"), run_values(run))
            self._db.executemany(
                "INSERT INTO results (run_id, benchmark, grp, median, ci_low, ci_high, rounds, "
                "samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                result_values(cur.lastrowid, run),
            )
        return True

    def rows(self, query: Query = ALL_ROWS) -> list[Row]:
        sql, params = rows_sql(query, "?", "instr(x.benchmark, ?) > 0")
        return [row_of(row, json.loads(row[9])) for row in self._db.execute(sql, params)]

    def samples(self, run_id: int, benchmark: str) -> tuple[float, ...] | None:
        row = self._db.execute(
            "SELECT samples FROM results WHERE run_id = ? AND benchmark = ?", (run_id, benchmark)
        ).fetchone()
        return None if row is None or row[0] is None else unpack(row[0])

    def prune_samples(self, keep: int) -> int:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(f"keep must be an int >= 1, got {keep!r}")
        with self._transaction():
            cur = self._db.execute(
                "UPDATE results SET samples = NULL WHERE samples IS NOT NULL AND "
                "(run_id, benchmark) IN (SELECT run_id, benchmark FROM ("
                "SELECT x.run_id, x.benchmark, ROW_NUMBER() OVER (PARTITION BY r.device_key, "
                f"r.mode, x.benchmark ORDER BY {NEWEST_FIRST}) AS age "
                "FROM results x JOIN runs r ON r.id = x.run_id) WHERE age > ?)",
                (keep,),
            )
            return cur.rowcount

    def kept_runs(self, digests: Collection[str] | None = None) -> list[KeptRun]:
        cols = (
            "id, digest, source, device_key, mode, branch, git_commit, commit_time, run_time, "
            "fingerprint, segment, added_at, verdict"
        )
        if digests is None:
            runs = self._db.execute(f"SELECT {cols} FROM runs ORDER BY id").fetchall()
        else:
            runs = []
            for part in chunks(list(digests), 500):  # SQLite's bound on parameters
                marks = ", ".join("?" * len(part))
                sql = f"SELECT {cols} FROM runs WHERE digest IN ({marks})"
                runs += self._db.execute(sql, list(part)).fetchall()
            runs.sort(key=lambda r: r[0])
        results: dict[int, list[KeptResult]] = {r[0]: [] for r in runs}
        sql = (
            "SELECT run_id, benchmark, grp, median, ci_low, ci_high, rounds, samples FROM results "
            "ORDER BY run_id, benchmark"
        )
        for row in self._db.execute(sql):
            if row[0] in results:
                results[row[0]].append(KeptResult(*row[1:7], _bytes(row[7])))
        return [KeptRun(*r[1:], results=tuple(results[r[0]])) for r in runs]

    def _atomic(self):
        return self._transaction()

    def _insert_kept(self, run: KeptRun) -> None:
        cur = self._db.execute(
            "INSERT INTO runs (digest, source, device_key, mode, branch, git_commit, "
            "commit_time, run_time, fingerprint, segment, added_at, verdict) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run.digest, run.source, run.device_key, run.mode, run.branch, run.commit,
             run.commit_time, run.run_time, run.fingerprint, run.segment, run.added_at,
             run.verdict),
        )  # fmt: skip
        self._db.executemany(
            "INSERT INTO results (run_id, benchmark, grp, median, ci_low, ci_high, rounds, "
            "samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(cur.lastrowid, r.benchmark, r.group, r.median, r.ci_low, r.ci_high, r.rounds,
              r.samples) for r in run.results],
        )  # fmt: skip

    def close(self) -> None:
        self._close_quietly()

    def _close_quietly(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None


def _bytes(blob: bytes | memoryview | None) -> bytes | None:
    return None if blob is None else bytes(blob)
