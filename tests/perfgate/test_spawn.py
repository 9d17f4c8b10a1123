"""A killed command takes its children with it, and leaves no half-written or temporary file:
real processes, really killed (perfgate.spawn, perfgate.atomic, perfgate.__main__)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfgate import atomic, spawn

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's (prctl)"
)

# The `perfgate isa` child of `update-baselines --isa`, slowed down: it says it has started,
# then rewrites its --json target after a while, as the real one did 6 s after its parent died.
_CHILD = """
import sys, time
from pathlib import Path
Path(sys.argv[1]).write_text(str(__import__("os").getpid()))
time.sleep(5)
Path(sys.argv[2]).parent.mkdir(parents=True, exist_ok=True)
Path(sys.argv[2]).write_text("rewritten by an orphan")
"""

# `python -m perfgate update-baselines --isa`, whose children are the slow child above.
_PARENT = """
import sys
from perfgate import spawn
from perfgate.__main__ import main

real, marks = spawn.run, iter(range(100))
def slow_isa(cmd, **kwargs):
    out = cmd[cmd.index("--json") + 1]
    return real([sys.executable, "-c", CHILD, f"{sys.argv[1]}.{next(marks)}", out], **kwargs)
spawn.run = slow_isa
sys.exit(main(["update-baselines", "--isa", "--baselines-dir", sys.argv[2]]))
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _gone(pid: int) -> bool:
    """Exited (a zombie nobody reaped yet counts: it runs nothing and writes nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" in status.read_text()
    except OSError:
        return True


def _wait_for(check, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_update_baselines_isa_takes_its_child_with_it(tmp_path, sig):
    mark = tmp_path / "child"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"CHILD = {_CHILD!r}\n{_PARENT}", str(mark), str(tmp_path / "pb")],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = Path(f"{mark}.0")
    assert _wait_for(lambda: first.is_file() and first.read_text()), "the child never started"
    child = int(first.read_text())
    started = time.monotonic()
    parent.send_signal(sig)
    _, err = parent.communicate(timeout=30)
    assert parent.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 128 + sig), err
    # gone at once, long before the 5 s after which it would write
    assert _wait_for(lambda: _gone(child), timeout=2), "the child outlived its parent"
    time.sleep(5.5 - (time.monotonic() - started))
    assert not (tmp_path / "pb" / "isa").exists()  # the orphan never rewrote a baseline
    assert not Path(f"{mark}.1").exists()  # and no second target was started


def test_run_stops_its_child_when_waiting_ends_in_an_exception(tmp_path):
    # what a SIGTERM to perfgate becomes (SystemExit) while it waits for a child
    mark = tmp_path / "pid"
    code = f"import os, time; open({str(mark)!r}, 'w').write(str(os.getpid())); time.sleep(30)"

    def interrupt(signum, frame):
        raise SystemExit(143)

    previous = signal.signal(signal.SIGALRM, interrupt)
    start = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(SystemExit):
            spawn.run([sys.executable, "-c", code])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # stopped at once (SIGTERM), not waited for until its 30 s were up
    assert time.monotonic() - start < 1.0 + spawn.GRACE_S
    assert _gone(int(mark.read_text()))


# A writer that stops inside perfgate's atomic write (before the rename), as `python -m perfgate`
# runs it: with its signal handling.
_WRITER = """
import os, sys, time
from pathlib import Path
from perfgate import atomic
from perfgate.__main__ import _stopping_on_signals

def slow_fsync(fd):
    Path(sys.argv[2]).write_text("in the write")
    time.sleep(60)

atomic.os.fsync = slow_fsync
with _stopping_on_signals():
    atomic.write_text(sys.argv[1], "new")
"""


def _killed_writer(tmp_path: Path, sig: int) -> Path:
    target = tmp_path / "baseline.json"
    target.write_text("old")
    ready = tmp_path / "ready"
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(target), str(ready)], cwd=ROOT, env=_env()
    )
    assert _wait_for(ready.is_file), "the writer never reached the write"
    writer.send_signal(sig)
    writer.wait(timeout=30)
    assert writer.returncode == (-sig if sig == signal.SIGKILL else 128 + sig)
    assert target.read_text() == "old"  # never half of either
    return target


def _temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_a_write_stopped_by_a_signal_removes_its_temporary_file(tmp_path):
    _killed_writer(tmp_path, signal.SIGTERM)
    assert _temporaries(tmp_path) == []


def test_a_write_killed_outright_leaves_a_temporary_that_the_next_write_removes(tmp_path):
    target = _killed_writer(tmp_path, signal.SIGKILL)
    (left,) = _temporaries(tmp_path)  # nothing could run in the killed process
    assert left.startswith(".baseline.json.")
    # a live writer's temporary (this process's) is not stale and stays
    live = tmp_path / f".baseline.json.{os.getpid()}.abcdefgh.tmp"
    live.write_text("being written")
    atomic.write_text(target, "newer")
    assert target.read_text() == "newer"
    assert _temporaries(tmp_path) == [live.name]
