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
"""

from __future__ import annotations

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


def _die_with_parent() -> Callable[[], None] | None:
    """The ``preexec_fn`` that makes the child receive SIGTERM when this process dies."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the forked child
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)

    return preexec
