"""The history job's store script (.github/scripts/history-store.sh) against local git remotes: it
never pushes a store it did not read, a failed read fails, an absent branch is started only on
purpose, and a store written meanwhile by another job is not overwritten."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".github" / "scripts" / "history-store.sh"
pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("bash") is None, reason="needs git and bash"
)


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def _remote_with_store(tmp_path: Path, content: bytes | None) -> Path:
    """A bare remote, with a perf-history branch holding ``content`` unless None."""
    bare = tmp_path / "remote.git"
    _git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    if content is not None:
        seed = tmp_path / "seed"
        seed.mkdir()
        _git("init", "-q", "-b", "perf-history", cwd=seed)
        (seed / "history.sqlite").write_bytes(content)
        _git("add", "history.sqlite", cwd=seed)
        _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s", cwd=seed)
        _git("push", "-q", str(bare), "perf-history", cwd=seed)
    return bare


def _checkout(tmp_path: Path, remote: Path | str) -> Path:
    work = tmp_path / "checkout"
    work.mkdir()
    _git("init", "-q", cwd=work)
    _git("remote", "add", "origin", str(remote), cwd=work)
    return work


def _run(work: Path, *args, **env):
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=work, capture_output=True, text=True,
        env=dict(os.environ, HISTORY_FETCH_TRIES="1", GIT_TERMINAL_PROMPT="0", **env),
    )  # fmt: skip


def _branch_content(remote: Path) -> bytes:
    return subprocess.run(
        ["git", "show", "perf-history:history.sqlite"], cwd=remote, capture_output=True, check=True
    ).stdout


def test_read_then_replaced(tmp_path):
    remote = _remote_with_store(tmp_path, b"kept runs")
    work = _checkout(tmp_path, remote)
    store = work / ".perfgate" / "history.sqlite"
    done = _run(work, "fetch", str(store))
    assert done.returncode == 0, done.stderr
    assert store.read_bytes() == b"kept runs"
    store.write_bytes(b"kept runs + one")
    done = _run(work, "push", str(store))
    assert done.returncode == 0, done.stderr
    assert _branch_content(remote) == b"kept runs + one"


def test_an_unreachable_remote_fails_and_pushes_nothing(tmp_path):
    work = _checkout(tmp_path, tmp_path / "no-such-remote.git")
    store = work / ".perfgate" / "history.sqlite"
    started = time.monotonic()
    done = _run(work, "fetch", str(store))
    assert done.returncode == 1
    assert "could not read origin after 1 tries" in done.stderr
    # no wait after the last try (the first wait is 5 s): the failure is not delayed
    assert time.monotonic() - started < 5
    assert not store.exists() and not Path(f"{store}.from").exists()
    # the job's next step: nothing read, so nothing is pushed over the branch
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_bytes(b"an empty store")
    done = _run(work, "push", str(store))
    assert done.returncode == 1 and "was not read from perf-history" in done.stderr


def test_an_absent_branch_is_started_only_on_purpose(tmp_path):
    remote = _remote_with_store(tmp_path, None)
    work = _checkout(tmp_path, remote)
    store = work / ".perfgate" / "history.sqlite"
    done = _run(work, "fetch", str(store))
    assert done.returncode == 1 and "set PERFGATE_HISTORY_CREATE=1" in done.stderr
    done = _run(work, "fetch", str(store), PERFGATE_HISTORY_CREATE="1")
    assert done.returncode == 0, done.stderr
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_bytes(b"first run")
    assert _run(work, "push", str(store)).returncode == 0
    assert _branch_content(remote) == b"first run"


def test_a_store_written_meanwhile_is_not_overwritten(tmp_path):
    remote = _remote_with_store(tmp_path, b"v1")
    work = _checkout(tmp_path, remote)
    store = work / ".perfgate" / "history.sqlite"
    assert _run(work, "fetch", str(store)).returncode == 0
    other = tmp_path / "other"
    other.mkdir()
    second = _checkout(other, remote)
    other_store = second / "h.sqlite"
    assert _run(second, "fetch", str(other_store)).returncode == 0
    other_store.write_bytes(b"v2 by another job")
    assert _run(second, "push", str(other_store)).returncode == 0
    store.write_bytes(b"v1 + mine")
    done = _run(work, "push", str(store))
    assert done.returncode == 1 and "push refused" in done.stderr
    assert _branch_content(remote) == b"v2 by another job"


def test_usage(tmp_path):
    assert _run(tmp_path, "bogus").returncode == 2


APPEND = ROOT / ".github" / "scripts" / "history-append.sh"


def _append(results: Path, log: Path):
    """history-append.sh with a stand-in for `perfgate history` that logs its arguments."""
    cmd = ["bash", "-c", 'printf "%s\\n" "$*" >> "$0"', str(log)]
    return subprocess.run(["bash", str(APPEND), str(results), *cmd], capture_output=True,
                          text=True)  # fmt: skip


def test_append_keeps_the_runs_the_gate_compared_with_their_verdicts(tmp_path):
    results, log = tmp_path / "results", tmp_path / "log"
    results.mkdir()
    for name in ("device.json", "device.compare.json", "host.json", "ab.json", "device.md"):
        (results / name).write_text("{}")
    done = _append(results, log)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [
        f"add {results}/device.json --branch main --verdicts",
        f"add {results}/host.json --branch main",
    ]


def test_append_without_results_adds_nothing_and_says_so(tmp_path):
    done = _append(tmp_path, tmp_path / "log")
    assert done.returncode == 0 and "nothing to append" in done.stdout
    assert not (tmp_path / "log").exists()
    assert subprocess.run(["bash", str(APPEND)], capture_output=True).returncode == 2
