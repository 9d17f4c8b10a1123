"""The history store: one small interface (:class:`Store`), SQLite behind it by default.

One row per benchmark per run (:class:`Row`): device key, timing mode, benchmark, commit,
commit date, run date, fingerprint, median, the CI of the median, rounds and the run's source
file, plus the branch, the fingerprint segment and the per-round samples of the newest runs
(the push gate pools them), and the run's gate verdict when it was recorded (:data:`VERDICTS`:
the triage's good commit is the newest main run that passed). Commands speak only to :class:`Store`, so a server database shared
by a fleet of runners (PostgreSQL through a URL) is one more implementation of it;
:func:`open_store` names the ones there are.

The SQLite file has a schema version (table ``meta``) and migrations (:data:`MIGRATIONS`):
opening for writing brings an older file up to date in one transaction; a newer file is
refused, never rewritten. Every write is one transaction, so a killed ``add`` leaves the store
as it was before it.
"""

from __future__ import annotations

import abc
import json
import os
import sqlite3
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate.history.records import VERDICTS, Run
from perfgate.refusal import Refusal

SCHEMA_VERSION = 2
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
_ORDER = "COALESCE(r.commit_time, r.run_time, ''), COALESCE(r.run_time, ''), r.id"
_NEWEST_FIRST = (
    "COALESCE(r.commit_time, r.run_time, '') DESC, COALESCE(r.run_time, '') DESC, r.id DESC"
)


class StoreError(Refusal):
    """A store that cannot be opened or used; the message is one line naming it."""


class OlderSchemaError(StoreError):
    """A store of an older schema opened read-only (opening it for writing migrates it)."""


@dataclass(frozen=True)
class Row:
    """One benchmark of one run, as the store holds it."""

    run_id: int
    digest: str
    source: str
    device_key: str
    mode: str
    branch: str | None
    commit: str
    commit_time: str | None
    run_time: str | None
    fingerprint: dict[str, Any]
    segment: str
    benchmark: str
    group: str | None
    median: float
    ci_low: float
    ci_high: float
    rounds: int
    has_samples: bool
    verdict: str | None = None  # one of VERDICTS, or None: the run's verdict was not recorded


@dataclass(frozen=True)
class Query:
    """Which rows: every given field must match; ``keyword`` is a substring of the benchmark."""

    device_key: str | None = None
    mode: str | None = None
    branch: str | None = None
    keyword: str | None = None
    segment: str | None = None


class Store(abc.ABC):
    """What the history commands need from a store."""

    location: str

    @abc.abstractmethod
    def add_run(self, run: Run) -> bool:
        """Keep ``run``; False (and nothing written) when a run of the same digest is kept."""

    @abc.abstractmethod
    def rows(self, query: Query = Query()) -> list[Row]:
        """The matching rows, by device key, mode and benchmark, each series in commit order."""

    @abc.abstractmethod
    def samples(self, run_id: int, benchmark: str) -> tuple[float, ...] | None:
        """The per-round samples of one row; None once pruned (or for an unknown row)."""

    @abc.abstractmethod
    def prune_samples(self, keep: int) -> int:
        """Drop the samples of all but each series' newest ``keep`` runs; rows pruned."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(location: str | Path, *, write: bool) -> Store:
    """The store at ``location``: a path or ``sqlite:///PATH`` (SQLite). ``write=False`` opens
    read-only and refuses a missing file; ``write=True`` creates or migrates it."""
    return SQLiteStore(sqlite_path(location), write=write)


def sqlite_path(location: str | Path) -> Path:
    """The file of a SQLite store location (a path or ``sqlite:///PATH``); StoreError for a
    location of another kind."""
    text = str(location)
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme == "sqlite":
        return Path(text.split("://", 1)[1])
    if scheme:
        raise StoreError(
            f"--db {text}: {scheme}:// stores are not available; give a SQLite path "
            "(or sqlite:///PATH)"
        )
    return Path(text)


def exists(location: str | Path) -> bool:
    """Whether a store (or anything else) is at ``location``."""
    return sqlite_path(location).exists()


def check_usable(location: str | Path, *, write: bool) -> None:
    """Refuse (StoreError) a store that :func:`open_store` would refuse, changing nothing: a
    missing store is fine for writing when it can be created there, and for reading (the caller
    decides what no history means); an older schema is fine for writing (it will be migrated)."""
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
            raise StoreError(f"{path}: not a usable history database ({_one_line(exc)})") from None
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
            cur = self._db.execute(
                "INSERT INTO runs (digest, source, device_key, mode, branch, git_commit, "
                "commit_time, run_time, fingerprint, segment, added_at, verdict) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.digest,
                    run.source,
                    run.device_key,
                    run.mode,
                    run.branch,
                    run.commit,
                    run.commit_time,
                    run.run_time,
                    json.dumps(run.fingerprint, sort_keys=True),
                    run.segment,
                    datetime.now(timezone.utc).isoformat(),
                    run.verdict,
                ),
            )
            self._db.executemany(
                "INSERT INTO results (run_id, benchmark, grp, median, ci_low, ci_high, rounds, "
                "samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        cur.lastrowid,
                        r.benchmark,
                        r.group,
                        r.median,
                        r.ci_low,
                        r.ci_high,
                        r.rounds,
                        _pack(r.samples),
                    )
                    for r in run.results
                ],
            )
        return True

    def rows(self, query: Query = Query()) -> list[Row]:
        where, params = [], []
        for column, value in (
            ("r.device_key", query.device_key),
            ("r.mode", query.mode),
            ("r.branch", query.branch),
            ("r.segment", query.segment),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if query.keyword:
            where.append("instr(x.benchmark, ?) > 0")
            params.append(query.keyword)
        sql = (
            "SELECT r.id, r.digest, r.source, r.device_key, r.mode, r.branch, r.git_commit, "
            "r.commit_time, r.run_time, r.fingerprint, r.segment, x.benchmark, x.grp, x.median, "
            "x.ci_low, x.ci_high, x.rounds, x.samples IS NOT NULL, r.verdict "
            "FROM results x JOIN runs r ON r.id = x.run_id"
            + (" WHERE " + " AND ".join(where) if where else "")
            + f" ORDER BY r.device_key, r.mode, x.benchmark, {_ORDER}"
        )
        return [
            Row(*row[:9], json.loads(row[9]), *row[10:17], bool(row[17]), row[18])
            for row in self._db.execute(sql, params)
        ]

    def samples(self, run_id: int, benchmark: str) -> tuple[float, ...] | None:
        row = self._db.execute(
            "SELECT samples FROM results WHERE run_id = ? AND benchmark = ?", (run_id, benchmark)
        ).fetchone()
        return None if row is None or row[0] is None else _unpack(row[0])

    def prune_samples(self, keep: int) -> int:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(f"keep must be an int >= 1, got {keep!r}")
        with self._transaction():
            cur = self._db.execute(
                "UPDATE results SET samples = NULL WHERE samples IS NOT NULL AND "
                "(run_id, benchmark) IN (SELECT run_id, benchmark FROM ("
                "SELECT x.run_id, x.benchmark, ROW_NUMBER() OVER (PARTITION BY r.device_key, "
                f"r.mode, x.benchmark ORDER BY {_NEWEST_FIRST}) AS age "
                "FROM results x JOIN runs r ON r.id = x.run_id) WHERE age > ?)",
                (keep,),
            )
            return cur.rowcount

    def close(self) -> None:
        self._close_quietly()

    def _close_quietly(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
            self._db = None


def _pack(samples: tuple[float, ...]) -> bytes:
    return struct.pack(f"<{len(samples)}d", *samples)


def _unpack(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 8}d", blob)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
