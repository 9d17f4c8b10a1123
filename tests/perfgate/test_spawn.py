"""A killed command takes its children with it, and leaves no half-written or temporary file:
real processes, really killed (perfgate.spawn, perfgate.atomic, perfgate.__main__)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
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
time.sleep(3)
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


def _as_a_terminal_job() -> None:
    """A child as a terminal starts it: Ctrl-C delivered. A container or CI shell may start
    this run with SIGINT ignored, which every child inherits and Python then keeps (as it
    should: a job started that way asked for it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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


@contextlib.contextmanager
def _reaped(proc: subprocess.Popen):
    """``proc``, killed if it still runs and waited for however the test ends: a failed test
    must not leave an exited child for the next ``os.wait()`` of its process (mutmut's runner,
    which runs the tests in its own process, reaps any child and stops at one it did not start)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


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
    with _reaped(parent):
        assert _wait_for(lambda: first.is_file() and first.read_text()), "the child never started"
        child = int(first.read_text())
        started = time.monotonic()
        parent.send_signal(sig)
        _, err = parent.communicate(timeout=30)
    assert parent.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 128 + sig), err
    # gone at once, long before the 3 s after which it would write
    assert _wait_for(lambda: _gone(child), timeout=2), "the child outlived its parent"
    time.sleep(3.5 - (time.monotonic() - started))
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


# A child that cleans up when asked: on SIGTERM it ends its own child (a sleeper it started
# without perfgate, so nothing else would stop it), writes how that child ended, and exits 3.
_POLITE = """
import signal, subprocess, sys
from pathlib import Path
out = Path(sys.argv[1])
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

def clean_up(signum, frame):
    sleeper.terminate()
    (out / "cleaned").write_text(str(sleeper.wait()))
    sys.exit(3)

signal.signal(signal.SIGTERM, clean_up)
(out / "ready").write_text(str(sleeper.pid))
signal.pause()
"""

# A child that outstays SIGTERM: it notes when the signal came (CLOCK_MONOTONIC, which every
# process on the machine shares) and goes on sleeping.
_STUBBORN = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda s, f: (out / "term").write_text(repr(time.monotonic())))
(out / "ready").write_text("")
while True:
    time.sleep(60)
"""


@contextlib.contextmanager
def _child(script: str, tmp_path: Path, watchdog_s: float):
    """``script`` started through spawn.popen, once it is ready; a watchdog kills it after
    ``watchdog_s``, so that a stop that never kills cannot hang the test (it fails instead)."""
    proc = spawn.popen([sys.executable, "-c", script, str(tmp_path)])
    watchdog = threading.Timer(watchdog_s, lambda: proc.poll() is None and proc.kill())
    with _reaped(proc):
        try:
            assert _wait_for((tmp_path / "ready").is_file), "the child never got ready"
            watchdog.start()
            yield proc
        finally:
            watchdog.cancel()


def test_stop_asks_first_and_a_child_that_listens_cleans_up(tmp_path):
    grace = 10.0
    with _child(_POLITE, tmp_path, watchdog_s=2 * grace) as proc:
        sleeper = int((tmp_path / "ready").read_text())
        try:
            start = time.monotonic()
            spawn.stop(proc, grace=grace)
            took = time.monotonic() - start
        finally:  # a child killed outright leaves its sleeper behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(sleeper, signal.SIGKILL)
    assert proc.returncode == 3  # its own exit, from its SIGTERM handler: not killed
    assert (tmp_path / "cleaned").read_text() == str(-signal.SIGTERM)  # it ended its child
    assert took < grace  # returned as soon as the child was gone, not after the grace


def test_stop_kills_a_child_that_outstays_sigterm_only_after_the_grace(tmp_path):
    grace = 2.0
    with _child(_STUBBORN, tmp_path, watchdog_s=grace + 20) as proc:
        start = time.monotonic()
        spawn.stop(proc, grace=grace)
        end = time.monotonic()
        assert proc.returncode == -signal.SIGKILL
    asked = float((tmp_path / "term").read_text())
    assert start <= asked < start + grace  # SIGTERM first, at once
    assert end - start >= grace  # SIGKILL only once the grace was over
    assert end - start < grace + 10  # and then at once: the watchdog never had to


def test_stop_leaves_an_ended_child_alone(tmp_path):
    proc = spawn.popen([sys.executable, "-c", "raise SystemExit(5)"])
    proc.wait()
    sent = []
    proc.send_signal = sent.append  # terminate() and kill() both send through it
    spawn.stop(proc, grace=0.0)
    assert (proc.returncode, sent) == (5, [])


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
    with _reaped(writer):
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


# A spec provider whose every compile records its worker's pid, then takes a minute: the pool
# of `perfgate isa --jobs 2` busy compiling, as when Ctrl-C or a kill reaches it.
_SLOW_PROVIDER = """
import os, sys, time
from pathlib import Path
from kernels.compile import CompileSpec

MARKS = Path(os.environ["SLOW_PROVIDER_MARKS"])

class SlowSpec(CompileSpec):
    def compile(self, target):
        (MARKS / str(os.getpid())).write_text("")
        time.sleep(60)

def compile_specs(target):
    return [SlowSpec(f"slow{i}", None, {}, {}, config={"i": i}) for i in range(4)]
"""


def _slow_isa(tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    """`perfgate isa` compiling with 2 workers, in a session of its own (as a terminal's job)."""
    (tmp_path / "slow_provider.py").write_text(_SLOW_PROVIDER)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = dict(_env(), SLOW_PROVIDER_MARKS=str(marks))
    env.pop("TRITON_INTERPRET", None)  # tests/conftest.py sets it on a CPU; `isa` refuses it
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    cmd = [sys.executable, "-m", "perfgate", "isa", "--target", "gfx950", "--skip-native",
           "--providers", "slow_provider", "--jobs", "2", "--json", str(tmp_path / "out.json")]  # fmt: skip
    isa = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, preexec_fn=_as_a_terminal_job,
    )  # fmt: skip
    if not _wait_for(lambda: len(list(marks.iterdir())) == 2, timeout=60):
        with _reaped(isa):
            pytest.fail("no worker compiled")
    return isa, [int(p.name) for p in marks.iterdir()]


@pytest.mark.parametrize("how", ["ctrl-c", "SIGTERM", "SIGKILL"])
def test_a_stopped_isa_gate_leaves_no_compile_worker_behind(tmp_path, how):
    # Ctrl-C reaches the whole process group; a kill reaches perfgate alone. Either way its pool
    # workers go at once: orphans held the caller's output pipe open and compiled for minutes.
    isa, workers = _slow_isa(tmp_path)
    try:
        if how == "ctrl-c":
            os.killpg(isa.pid, signal.SIGINT)
        else:
            isa.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
        # EOF on the pipe once nothing holds it: perfgate gone and no orphan either
        isa.communicate(timeout=spawn.GRACE_S)
        assert all(_wait_for(lambda pid=pid: _gone(pid), timeout=2) for pid in workers)
    finally:  # whatever failed above, leave nothing running
        for pid in [isa.pid, *workers]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        isa.wait()
    expected = {"ctrl-c": 130, "SIGTERM": 128 + signal.SIGTERM, "SIGKILL": -signal.SIGKILL}[how]
    assert isa.returncode == expected
    assert not (tmp_path / "out.json").exists()


# `update-baselines --isa` whose first target compiles at once and whose second is the slow child.
_SECOND_SLOW = """
import sys
from pathlib import Path
from perfgate import spawn
from perfgate.__main__ import main

real, calls = spawn.run, []
def isa(cmd, **kwargs):
    calls.append(cmd)
    out = cmd[cmd.index("--json") + 1]
    if len(calls) == 1:
        Path(out).write_text("the first target's new report")
        return real([sys.executable, "-c", ""], **kwargs)
    return real([sys.executable, "-c", CHILD, f"{sys.argv[1]}.0", out], **kwargs)
spawn.run = isa
sys.exit(main(["update-baselines", "--isa", "--baselines-dir", sys.argv[2]]))
"""


@pytest.mark.parametrize("how", ["ctrl-c", "SIGTERM", "SIGHUP"])
def test_an_isa_update_stopped_at_its_second_target_replaces_no_baseline(tmp_path, how):
    mark, isa = tmp_path / "child", tmp_path / "pb" / "isa"
    isa.mkdir(parents=True)
    old = {name: f"old {name}" for name in ("gfx950.json", "sm90.json")}
    for name, text in old.items():
        (isa / name).write_text(text)
    parent = subprocess.Popen(
        [sys.executable, "-c", f"CHILD = {_CHILD!r}\n{_SECOND_SLOW}", str(mark), str(isa.parent)],
        cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=_as_a_terminal_job,
    )  # fmt: skip
    second = Path(f"{mark}.0")
    with _reaped(parent):
        assert _wait_for(lambda: second.is_file() and second.read_text()), "never reached target 2"
        if how == "ctrl-c":
            os.killpg(parent.pid, signal.SIGINT)
        else:
            parent.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGHUP)
        _, err = parent.communicate(timeout=30)
    expected = (
        130 if how == "ctrl-c" else 128 + (signal.SIGTERM if how == "SIGTERM" else signal.SIGHUP)
    )
    assert parent.returncode == expected, err
    assert _wait_for(lambda: _gone(int(second.read_text())), timeout=2)
    assert {p.name: p.read_text() for p in isa.iterdir()} == old  # the first one's too


def test_write_all_holds_a_stop_signal_until_every_file_is_in_place(tmp_path, monkeypatch):
    seen: list[str] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append("SIGTERM"))
    real = atomic.write_bytes

    def write(path, data):
        real(path, data)
        seen.append(Path(path).name)
        if len(seen) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # a stop between the first file and the second

    monkeypatch.setattr(atomic, "write_bytes", write)
    try:
        atomic.write_all({tmp_path / "a.json": b"a", tmp_path / "b.json": b"b"})
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == ["a.json", "b.json", "SIGTERM"]  # delivered, but after the last rename


@pytest.mark.parametrize(
    ("returncode", "said", "code"),
    [(0, "exited 0", 0), (1, "exited 1", 1), (2, "exited 2", 2), (-9, "was killed by SIGKILL", 137),
     (-15, "was killed by SIGTERM", 143), (-11, "was killed by SIGSEGV", 139),
     (-200, "was killed by signal 200", 328)],
)  # fmt: skip
def test_how_a_child_ended(returncode, said, code):
    assert (spawn.describe(returncode), spawn.exit_code(returncode)) == (said, code)


# -- run and popen against subprocess's own contract ---------------------------------------------
# A child that echoes its stdin upper-cased to stdout, writes to stderr, and exits 4.
_ECHO = (
    "import sys; print(sys.stdin.read().upper(), end=''); print('e', file=sys.stderr); sys.exit(4)"
)


def test_run_feeds_input_and_captures_both_streams():
    cmd = (sys.executable, "-c", _ECHO)
    done = spawn.run(cmd, input="abc", capture_output=True, text=True)
    assert (done.args, done.returncode, done.stdout, done.stderr) == (list(cmd), 4, "ABC", "e\n")


def test_run_without_input_or_capture_leaves_the_streams_to_the_caller(tmp_path):
    # stdin, stdout and stderr as given (files here), nothing captured, no error for exit 4
    (tmp_path / "in").write_text("xyz")
    with (tmp_path / "in").open() as stdin, (tmp_path / "out").open("w") as stdout:
        done = spawn.run([sys.executable, "-c", _ECHO], stdin=stdin, stdout=stdout,
                         stderr=subprocess.DEVNULL)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (4, None, None)
    assert (tmp_path / "out").read_text() == "XYZ"


def test_run_with_check_raises_on_a_failed_child():
    with pytest.raises(subprocess.CalledProcessError) as failed:
        spawn.run([sys.executable, "-c", _ECHO], input=b"", capture_output=True, check=True)
    assert (failed.value.returncode, failed.value.stderr) == (4, b"e\n")


def test_run_stops_its_child_at_the_timeout(monkeypatch):
    started, popen = [], spawn.popen
    monkeypatch.setattr(
        spawn, "popen", lambda cmd, **kw: started.append(popen(cmd, **kw)) or started[0]
    )
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        spawn.run([sys.executable, "-c", "import time; time.sleep(10)"], timeout=1.0)
    assert time.monotonic() - start < 1.0 + spawn.GRACE_S  # not the child's 10 s
    (proc,) = started
    assert proc.returncode == -signal.SIGTERM  # asked to stop, and reaped


# The child reads its own parent-death signal: prctl(PR_GET_PDEATHSIG) = 2.
_DEATH_SIGNAL = """
import ctypes
sig = ctypes.c_int(-1)
ctypes.CDLL(None).prctl(2, ctypes.byref(sig))
print(sig.value)
"""


def test_popen_children_get_sigterm_when_their_parent_dies():
    proc = spawn.popen([sys.executable, "-c", _DEATH_SIGNAL], stdout=subprocess.PIPE, text=True)
    with _reaped(proc):
        out, _ = proc.communicate(timeout=30)
    assert int(out) == signal.SIGTERM
    plain = subprocess.run([sys.executable, "-c", _DEATH_SIGNAL], capture_output=True, text=True)
    assert int(plain.stdout) == 0  # what the probe reads without spawn: none


def test_popen_refuses_a_preexec_fn_of_the_callers():
    with pytest.raises(TypeError, match=r"^spawn\.popen sets preexec_fn itself$"):
        spawn.popen([sys.executable, "-c", ""], preexec_fn=lambda: None)


def test_init_worker_ignores_ctrl_c_restores_the_stop_signals_and_asks_for_the_death_signal(
    monkeypatch,
):
    # run in this process with the system calls recorded: a real one would change pytest's own
    # handlers and death signal
    calls = []
    monkeypatch.setattr(spawn.signal, "signal", lambda sig, handler: calls.append((sig, handler)))
    monkeypatch.setattr(spawn, "_prctl", lambda: lambda option, arg: calls.append((option, arg)))
    spawn.init_worker(os.getppid())
    assert calls == [
        (signal.SIGINT, signal.SIG_IGN),
        (signal.SIGTERM, signal.SIG_DFL),
        (signal.SIGHUP, signal.SIG_DFL),
        (1, signal.SIGTERM),  # PR_SET_PDEATHSIG
    ]


def test_init_worker_exits_when_its_parent_died_before_it_asked(monkeypatch):
    # os.getppid() is no longer the parent that forked it: the death signal came too late to
    # ever fire, so the worker ends itself
    class Exited(Exception):
        pass

    def _exit(code):
        raise Exited(code)

    monkeypatch.setattr(spawn.signal, "signal", lambda sig, handler: None)
    monkeypatch.setattr(spawn, "_prctl", lambda: lambda option, arg: None)
    monkeypatch.setattr(spawn.os, "_exit", _exit)
    spawn.init_worker(os.getppid())  # its parent is alive: it goes on
    with pytest.raises(Exited) as exited:
        spawn.init_worker(os.getppid() + 1)
    (code,) = exited.value.args
    assert isinstance(code, int) and code != 0
