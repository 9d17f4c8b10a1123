"""perfgate's one way to run git: every git child perfgate starts is started here
(tests/perfgate/test_git.py reads perfgate's source and refuses a git command line anywhere else).

- :func:`run`: ``git ARGS`` in a repository, its output captured; git's own failure is the return
  code, for callers that word it themselves (:mod:`perfgate.revisions`, :mod:`perfgate.hunt.lines`).
- :func:`read`: its output, or None when git is absent, fails or hangs, for facts that may be
  unknown (a fingerprint's commit, a commit's date, the tracked files).

Every child goes through :mod:`perfgate.spawn` (a killed command leaves no git behind), with
``safe.directory=*``: inside the ROCm container the mounted checkout belongs to another user, and
git refuses such a repository otherwise. Output is read as UTF-8, what git writes for paths and
commit subjects, whatever the locale.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from perfgate import spawn

# Bound once: a test that stands in for the children perfgate measures with (pytest, ab) by
# replacing spawn.run still has git read the real checkout.
_start = spawn.run


def run(*args: str, cwd: Path, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd``, stdout and stderr captured. OSError when git cannot start,
    subprocess.TimeoutExpired past ``timeout`` (the child stopped)."""
    cmd = ["git", "-c", "safe.directory=*", *args]
    return _start(cmd, cwd=cwd, capture_output=True, encoding="utf-8", timeout=timeout)


def read(*args: str, cwd: Path, timeout: float | None = None) -> str | None:
    """The stdout of ``git ARGS`` in ``cwd``; None when git is absent, exits non-zero or outlasts
    ``timeout``."""
    try:
        proc = run(*args, cwd=cwd, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None
