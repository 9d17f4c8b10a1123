"""perfgate's one way to start a child process: a killed command takes its children with it.

Every child perfgate starts (pytest runs, ``perfgate isa`` per target, git, the reducer build,
the A/B and experiment workers, nvidia-smi) is started here:

- **the parent killed outright** (SIGKILL, the OOM killer): on Linux each child asks the kernel
  for SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``), so no child outlives the
  command; a child that is itself ``python -m perfgate`` passes it on to its own children;
- **the parent told to stop** (SIGTERM, SIGHUP, Ctrl-C): ``python -m perfgate`` turns the signal
  into an exception (:func:`perfgate.__main__.main`), and :func:`run` answers any exception
  while it waits by stopping its child: SIGTERM, then SIGKILL after :data:`GRACE_S`.

Decision: children stay in the parent's process group, so that Ctrl-C in a terminal reaches the
whole tree at once, as users expect; the two mechanisms above cover the signals a group does not.
Outside Linux there is no parent-death signal, and only the second applies.

Workers that perfgate forks without this module (the compile pool of ``perfgate isa``) call
:func:`init_worker` first: a fork clears the parent-death signal, and a worker that inherited
perfgate's signal handlers would finish a minutes-long compile before it noticed a stop.
:func:`describe` and :func:`exit_code` say how a child ended and what that makes perfgate's exit
code: a child killed by signal N is reported by name and counts as 128 + N, as a shell has it,
never as its negative return code (which ``max(rc, ...)`` reads as a pass).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1


def popen(cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **kwargs)`` for a child that dies with this process."""
    if "preexec_fn" in kwargs:
        raise TypeError("spawn.popen sets preexec_fn itself")
    return subprocess.Popen(list(cmd), preexec_fn=_die_with_parent(), **kwargs)


def run(
    cmd: Sequence[str],
    *,
    input: Any = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess:
    """``subprocess.run`` for a child that dies with this process, and is stopped (SIGTERM, then
    SIGKILL) when waiting for it ends in any exception: a timeout, KeyboardInterrupt, or the
    SystemExit that a signal to ``python -m perfgate`` becomes."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with popen(cmd, **kwargs) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            stop(proc)
            raise
    done = subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def stop(proc: subprocess.Popen, grace: float = GRACE_S) -> None:
    """End ``proc``: SIGTERM (so that it can clean up and stop its own children), SIGKILL if it
    is still there after ``grace`` seconds; returns once it is gone."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def describe(returncode: int) -> str:
    """How a child ended, for a message: "exited 1", "was killed by SIGKILL"."""
    if returncode >= 0:
        return f"exited {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"was killed by {name}"


def exit_code(returncode: int) -> int:
    """A child's return code as an exit code of perfgate's: killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def init_worker(parent: int) -> None:
    """First thing in a worker forked outside :func:`popen` (a process pool's ``initializer``,
    with ``initargs=(os.getpid(),)``): SIGTERM to it when ``parent`` dies; SIGTERM and SIGHUP
    end it at once (their default), and Ctrl-C is left to the parent, which stops its pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        _prctl()(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the death signal was asked for
            os._exit(1)


def _prctl() -> Callable[..., int]:
    return ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> Callable[[], None] | None:
    """The ``preexec_fn`` that makes the child receive SIGTERM when this process dies."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = _prctl()  # resolved here, not in the forked child
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)

    return preexec
