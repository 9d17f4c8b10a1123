"""A throwaway PostgreSQL server for the history tests: a cluster made by initdb under a new
temporary directory, listening on a unix socket in that directory only (no TCP port to clash
with anything), started once per test session and stopped at its end.

postgres refuses to run as root, and CI runs as root: there the cluster belongs to the
``postgres`` user (``nobody`` where there is none) and its programs are started through
``setpriv``. The server is started directly (not daemonized by pg_ctl) with a parent-death
signal, so that a test session killed outright leaves no server running.

One role, ``perfgate_pw``, logs in with a password (scram-sha-256); every other local role is
trusted. Each test gets a schema of its own in database ``perfgate`` (:meth:`Server.fresh_url`):
the store keeps its tables in the connection's current schema.
"""

from __future__ import annotations

import itertools
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

DATABASE = "perfgate"
ADMIN = "postgres"
PASSWORD_ROLE, PASSWORD = "perfgate_pw", "s3cret-for-tests"
PORT = 5432  # only names the socket file, in a directory of its own


class Unavailable(Exception):
    """No server can be started here; the message says why."""


def _bin_dir() -> Path:
    """The directory holding initdb and postgres: the newest of Debian's
    /usr/lib/postgresql/<version>/bin, else where PATH's initdb really is."""
    versions = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "postgres").is_file()),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.name)] or [0],
    )
    if versions:
        return versions[-1]
    initdb = shutil.which("initdb")
    if initdb is None:
        raise Unavailable(
            "no PostgreSQL server programs (initdb, postgres): apt-get install postgresql"
        )
    return Path(os.path.realpath(initdb)).parent


def _run_as() -> tuple[list[str], int | None, int | None]:
    """(command prefix, uid, gid) to run the server's programs as a user postgres accepts."""
    if os.geteuid() != 0:
        return [], None, None
    if shutil.which("setpriv") is None:
        raise Unavailable(
            "running as root without setpriv (util-linux) to start postgres as another user"
        )
    for name in ("postgres", "nobody"):
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        prefix = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
        return prefix, user.pw_uid, user.pw_gid
    raise Unavailable("running as root and no postgres or nobody user to run postgres as")


class Server:
    def __init__(self) -> None:
        import psycopg  # noqa: F401 - the store's client: no client, no server tests

        self.bin = _bin_dir()
        self.prefix, uid, gid = _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="perfgate-pg-"))
        if uid is not None:
            os.chown(self.root, uid, gid)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.proc: subprocess.Popen | None = None
        self._schemas = itertools.count()
        try:
            self._initdb()
            self.start()
            self.admin(f"CREATE DATABASE {DATABASE}", dbname="postgres")
            self.admin(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}'")
            self.admin(f"GRANT ALL ON DATABASE {DATABASE} TO {PASSWORD_ROLE}")
        except BaseException:
            self.close()  # no server left running, no cluster left on disk
            raise

    def _initdb(self) -> None:
        base = [*self.prefix, str(self.bin / "initdb"), "-D", str(self.data), "-U", ADMIN,
                "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "-N"]  # fmt: skip
        # a database whose default collation is not byte order (ICU's en-US, PostgreSQL 15+), as
        # a real server's often is: the store must return rows in the SQLite store's order anyway
        icu = ["--locale-provider=icu", "--icu-locale=en-US"]
        for args in ([*base, *icu], base):
            done = subprocess.run(args, capture_output=True, text=True, timeout=120)
            if done.returncode == 0:
                break
            shutil.rmtree(self.data, ignore_errors=True)
        else:
            raise Unavailable(f"initdb failed: {' '.join(done.stderr.split())[-300:]}")
        hba = f"local all {PASSWORD_ROLE} scram-sha-256\nlocal all all trust\n"
        (self.data / "pg_hba.conf").write_text(hba)

    def start(self) -> None:
        # killed with the test session: SIGINT is postgres' fast shutdown
        death = ["setpriv", "--pdeathsig", "INT"] if shutil.which("setpriv") else []
        if self.prefix:
            death = [*self.prefix[:1], "--pdeathsig", "INT", *self.prefix[1:]]
        args = [*death, str(self.bin / "postgres"), "-D", str(self.data), "-p", str(PORT),
                "-c", "listen_addresses=", "-c", f"unix_socket_directories={self.root}",
                "-c", "max_connections=60", "-c", "password_encryption=scram-sha-256"]  # fmt: skip
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Unavailable(f"postgres exited {self.proc.returncode}: {self._log_tail()}")
            try:
                self.admin("SELECT 1", dbname="postgres")
                return
            except Exception:
                time.sleep(0.05)
        self.stop()
        raise Unavailable(f"postgres did not accept connections in 30 s: {self._log_tail()}")

    def stop(self) -> None:
        """Fast shutdown: clients are disconnected, running transactions rolled back."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _log_tail(self) -> str:
        try:
            return " ".join(self.log.read_text(errors="replace").split())[-400:]
        except OSError:
            return "(no log)"

    # -- clients ---------------------------------------------------------------------------------
    def url(self, *, user: str = ADMIN, password: str | None = None, schema: str | None = None,
            dbname: str = DATABASE) -> str:  # fmt: skip
        auth = quote(user) + (f":{quote(password, safe='')}" if password is not None else "")
        query = f"host={quote(str(self.root), safe='/')}&port={PORT}"
        if schema is not None:
            query += f"&options={quote(f'-csearch_path={schema}', safe='')}"
        return f"postgresql://{auth}@/{dbname}?{query}"

    def admin(self, sql: str, params: tuple = (), *, dbname: str = DATABASE) -> list[tuple]:
        import psycopg

        with psycopg.connect(host=str(self.root), port=PORT, user=ADMIN, dbname=dbname,
                             autocommit=True) as conn:  # fmt: skip
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def fresh_url(self, *, user: str = ADMIN, password: str | None = None) -> str:
        """The URL of a new, empty schema (``user`` may create tables in it)."""
        schema = f"t{os.getpid()}_{next(self._schemas)}"
        self.admin(f"CREATE SCHEMA {schema}")
        self.admin(f"GRANT ALL ON SCHEMA {schema} TO {PASSWORD_ROLE}")
        return self.url(user=user, password=password, schema=schema)


def required() -> bool:
    """Whether the server tests must run rather than skip: in CI (``CI`` set), outside the
    suite's container, whose image (the GPU job's env) has neither a server nor psycopg."""
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")
    return ci and os.environ.get("PERFGATE_IN_CONTAINER") != "1"


def sql(location: str | os.PathLike[str], statement: str, params: tuple = ()) -> list[tuple]:
    """Run one statement on a store (``?`` placeholders), as a user of the store would with
    sqlite3 or psql; the rows it returns."""
    from perfgate.history.store import is_server

    if not is_server(location):
        import sqlite3

        with sqlite3.connect(location) as c:
            return c.execute(statement, params).fetchall()
    import psycopg

    with psycopg.connect(str(location), autocommit=True) as conn:
        cur = conn.execute(statement.replace("?", "%s"), params)
        return cur.fetchall() if cur.description else []
