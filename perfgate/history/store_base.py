"""What every history store shares: the interface (:class:`Store`), its rows, its errors, the
schema version, and the exact copy of whole runs between stores (``history migrate``).

:mod:`perfgate.history.store` holds the SQLite store and chooses a store by its location;
:mod:`perfgate.history.pgstore` the PostgreSQL one. Both import this module and neither imports
the other's; each keeps its own SQL but the rows' query (:func:`rows_sql`).
"""

from __future__ import annotations

import abc
import json
import os
import struct
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from perfgate.history.records import Run
from perfgate.refusal import Refusal

# Both stores carry this version (table meta, key schema_version) and migrate to it by the same
# steps, each in its own SQL: store.MIGRATIONS (SQLite), pgstore.MIGRATIONS (PostgreSQL).
SCHEMA_VERSION = 2
SERVER_SCHEMES = ("postgresql", "postgres")  # a server's URL: the two spellings libpq reads


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


ALL_ROWS = Query()  # every row: the default query (a Query is immutable)

# The SQL both stores' rows() share: the same tables and columns in both. Only the parameter mark
# (SQLite's ?, psycopg's %s) and the substring test differ, which each store passes in.
ORDER = "COALESCE(r.commit_time, r.run_time, ''), COALESCE(r.run_time, ''), r.id"
NEWEST_FIRST = (
    "COALESCE(r.commit_time, r.run_time, '') DESC, COALESCE(r.run_time, '') DESC, r.id DESC"
)
ROW_COLUMNS = (
    "r.id, r.digest, r.source, r.device_key, r.mode, r.branch, r.git_commit, r.commit_time, "
    "r.run_time, r.fingerprint, r.segment, x.benchmark, x.grp, x.median, x.ci_low, x.ci_high, "
    "x.rounds, x.samples IS NOT NULL, r.verdict"
)


def rows_sql(query: Query, mark: str, contains: str) -> tuple[str, list[Any]]:
    """The SELECT of :meth:`Store.rows` for ``query`` and its parameters. ``mark`` is the
    driver's parameter mark; ``contains`` the test that the benchmark holds the keyword (with
    one mark in it)."""
    where, params = [], []
    for column, value in (
        ("r.device_key", query.device_key),
        ("r.mode", query.mode),
        ("r.branch", query.branch),
        ("r.segment", query.segment),
    ):
        if value is not None:
            where.append(f"{column} = {mark}")
            params.append(value)
    if query.keyword:
        where.append(contains)
        params.append(query.keyword)
    sql = (
        f"SELECT {ROW_COLUMNS} FROM results x JOIN runs r ON r.id = x.run_id"
        + (" WHERE " + " AND ".join(where) if where else "")
        + f" ORDER BY r.device_key, r.mode, x.benchmark, {ORDER}"
    )
    return sql, params


RUN_COLUMNS = (
    "digest", "source", "device_key", "mode", "branch", "git_commit", "commit_time", "run_time",
    "fingerprint", "segment", "added_at", "verdict",
)  # fmt: skip


def insert_run_sql(mark: str) -> str:
    """The INSERT of one run into ``runs`` (``mark``: the driver's parameter mark)."""
    marks = ", ".join([mark] * len(RUN_COLUMNS))
    return f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({marks})"


def run_values(run: Run) -> tuple[Any, ...]:
    """``run``'s values for :func:`insert_run_sql`, kept now."""
    return (
        run.digest, run.source, run.device_key, run.mode, run.branch, run.commit,
        run.commit_time, run.run_time, json.dumps(run.fingerprint, sort_keys=True), run.segment,
        datetime.now(timezone.utc).isoformat(), run.verdict,
    )  # fmt: skip


def result_values(run_id: int, run: Run) -> list[tuple[Any, ...]]:
    """The ``results`` rows of ``run`` (samples packed), under ``run_id``."""
    return [
        (run_id, r.benchmark, r.group, r.median, r.ci_low, r.ci_high, r.rounds, pack(r.samples))
        for r in run.results
    ]


def row_of(raw: Sequence[Any], fingerprint: dict[str, Any]) -> Row:
    """A :class:`Row` from one row of :func:`rows_sql` (``fingerprint`` its JSON, decoded)."""
    return Row(*raw[:9], fingerprint, *raw[10:17], bool(raw[17]), raw[18])


@dataclass(frozen=True)
class KeptResult:
    """One benchmark of a kept run, as stored: ``samples`` the packed bytes, None once pruned."""

    benchmark: str
    group: str | None
    median: float
    ci_low: float
    ci_high: float
    rounds: int
    samples: bytes | None


@dataclass(frozen=True)
class KeptRun:
    """A whole run as a store holds it, what ``history migrate`` copies and checks: every column
    but the store's own id. ``fingerprint`` is the stored JSON text, compared as text."""

    digest: str
    source: str
    device_key: str
    mode: str
    branch: str | None
    commit: str
    commit_time: str | None
    run_time: str | None
    fingerprint: str
    segment: str
    added_at: str
    verdict: str | None
    results: tuple[KeptResult, ...]


# added_at is when a store first kept the run: the same run kept by two stores at two times is
# the same data.
_COMPARED = tuple(f.name for f in fields(KeptRun) if f.name not in ("added_at", "results"))


def difference(a: KeptRun, b: KeptRun) -> str | None:
    """The first field in which two kept runs of one digest differ (``"verdict: 'pass' and
    None"``), or None when they hold the same data."""
    for name in _COMPARED:
        if getattr(a, name) != getattr(b, name):
            return f"{name}: {getattr(a, name)!r} and {getattr(b, name)!r}"
    ours = {r.benchmark: r for r in a.results}
    theirs = {r.benchmark: r for r in b.results}
    if ours.keys() != theirs.keys():
        return f"benchmarks: {sorted(ours.keys() ^ theirs.keys())[0]} is in one only"
    for name, mine in ours.items():
        other = theirs[name]
        for f in fields(KeptResult):
            x, y = getattr(mine, f.name), getattr(other, f.name)
            if x != y:
                if f.name == "samples":
                    x, y = _samples_text(x), _samples_text(y)
                return f"{name} {f.name}: {x!r} and {y!r}"
    return None


def _samples_text(blob: bytes | None) -> str:
    return "pruned" if blob is None else f"{len(blob) // 8} samples"


class Store(abc.ABC):
    """What the history commands need from a store."""

    location: str  # what messages name: a path, or a server's URL without its password

    @abc.abstractmethod
    def add_run(self, run: Run) -> bool:
        """Keep ``run``; False (and nothing written) when a run of the same digest is kept."""

    @abc.abstractmethod
    def rows(self, query: Query = ALL_ROWS) -> list[Row]:
        """The matching rows, by device key, mode and benchmark, each series in commit order."""

    @abc.abstractmethod
    def samples(self, run_id: int, benchmark: str) -> tuple[float, ...] | None:
        """The per-round samples of one row; None once pruned (or for an unknown row)."""

    @abc.abstractmethod
    def prune_samples(self, keep: int) -> int:
        """Drop the samples of all but each series' newest ``keep`` runs; rows pruned."""

    @abc.abstractmethod
    def kept_runs(self, digests: Collection[str] | None = None) -> list[KeptRun]:
        """Every run (or those of ``digests``), whole, in the order they were kept."""

    @abc.abstractmethod
    def close(self) -> None: ...

    # -- what receive() is made of: one transaction, and one whole run written in it -------------
    @abc.abstractmethod
    def _atomic(self) -> AbstractContextManager[None]:
        """A transaction: everything inside is kept, or (on any exception) none of it."""

    @abc.abstractmethod
    def _insert_kept(self, run: KeptRun) -> None:
        """Write ``run`` as it is (samples and added_at too); its digest is not kept yet."""

    def receive(self, runs: Sequence[KeptRun]) -> int:
        """Keep copies of ``runs`` (another store's, :meth:`kept_runs`), in one transaction, and
        return how many were new. A run this store already holds must hold the same data (else
        StoreError naming it, and nothing is written); every run is read back and compared,
        column for column and sample for sample, before the transaction ends."""
        digests = [r.digest for r in runs]
        if len(set(digests)) != len(digests):
            raise ValueError("runs must be of distinct digests")
        with self._atomic():
            held = {k.digest: k for k in self.kept_runs(digests)}
            for run in runs:
                if run.digest in held:
                    self._refuse_different(run, held[run.digest], "already holds")
            for run in runs:
                if run.digest not in held:
                    self._insert_kept(run)
            # read back what the transaction sees now: concurrent writers included
            back = {k.digest: k for k in self.kept_runs(digests)}
            for run in runs:
                if run.digest not in back:
                    raise StoreError(f"{self.location}: run {run.source} is missing after the copy")
                self._refuse_different(run, back[run.digest], "read back")
        return len(runs) - len(held)

    def _refuse_different(self, run: KeptRun, held: KeptRun, what: str) -> None:
        differs = difference(run, held)
        if differs is not None:
            raise StoreError(
                f"{self.location}: {what} run {run.digest[:12]} ({run.source}) with other data "
                f"({differs}); nothing was written"
            )

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pack(samples: Sequence[float]) -> bytes:
    """Samples as stored: float64, little endian."""
    return struct.pack(f"<{len(samples)}d", *samples)


def unpack(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 8}d", blob)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def scheme_of(location: str | os.PathLike[str]) -> str:
    text = str(location)
    return text.split("://", 1)[0].lower() if "://" in text else ""


def is_server(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` is a server's URL (``postgresql://`` or ``postgres://``)."""
    return scheme_of(location) in SERVER_SCHEMES


def display(location: str | os.PathLike[str]) -> str:
    """``location`` as messages and reports name it: a server's URL without its password."""
    text = str(location)
    if not is_server(text):
        return text
    try:
        parts = urlsplit(text)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        if parts.password is None and all(k != "password" for k, _ in pairs):
            return text
        netloc = parts.netloc
        if parts.password is not None:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.split(':', 1)[0]}:***@{host}"
        query = urlencode([(k, "***" if k == "password" else v) for k, v in pairs], safe="/:,=*-")
        fragment = f"#{parts.fragment}" if parts.fragment else ""
        return f"{parts.scheme}://{netloc}{parts.path}{'?' if query else ''}{query}{fragment}"
    except ValueError:  # unparseable: name the scheme only, the rest may hold the password
        return f"{scheme_of(text)}://(a URL that cannot be parsed)"
