"""A clean git checkout of this working tree, as it is: C0 of the planted chains the tests build
(tests/perfgate/planted_causes.py) and of the lab's H200 checks and history figures.

The GPU machine gets a copy of the tree whose ``.git`` HEAD is stale and whose files differ from
it: every run there would be ``git_dirty``, which the history refuses. :func:`clean_clone` makes
a new repository elsewhere holding exactly the files git would see in this tree (tracked and
untracked, less the ignored ones and ``.whl/``, where the device run carries wheels), committed
as one commit on ``main``; the lab's scripts run perfgate from there (``lab/scripts/bisect_chain.py``,
``lab/scripts/history_gate_check.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # tests/perfgate/ -> the checkout
SKIPPED = (".whl/",)  # carried wheels: installed for the run, never part of the measured tree
IDENTITY = ["-c", "user.name=perfgate tools", "-c", "user.email=tools@perfgate.invalid"]
IDENTITY += ["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"]


class CloneError(RuntimeError):
    """The clean clone could not be made; one line."""


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "safe.directory=*", *IDENTITY, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        raise CloneError(f"git {' '.join(args)} in {cwd}: {' '.join(proc.stderr.split())}")
    return proc.stdout


def tree_files(src: Path = REPO) -> list[str]:
    """The paths git sees in ``src``'s working tree (tracked or not, never ignored), less
    :data:`SKIPPED`; tracked files deleted from the tree are left out."""
    listed = git(src, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    return sorted(
        p
        for p in dict.fromkeys(listed)
        if p and not p.startswith(SKIPPED) and os.path.lexists(src / p)
    )


def clean_clone(dest: Path, src: Path = REPO, message: str = "the working tree as is") -> str:
    """``src``'s working tree committed into a new repository at ``dest`` (which must not
    exist) on branch ``main``; returns the commit."""
    if dest.exists():
        raise CloneError(f"{dest}: exists; give a new directory")
    files = tree_files(src)
    dest.mkdir(parents=True)
    git(dest, "init", "-q")
    git(dest, "symbolic-ref", "HEAD", "refs/heads/main")
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target, follow_symlinks=False)
    git(dest, "add", "-A")
    return commit(dest, message)


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def is_clean(repo: Path) -> bool:
    return git(repo, "status", "--porcelain").strip() == ""
