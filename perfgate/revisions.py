"""Git revisions as trees to measure: a commit resolved, checked out in a temporary worktree, its
native reducer built into a cache of its own. ``perfgate ab`` and ``perfgate bisect`` use these."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from perfgate import git as git_cli
from perfgate import spawn
from perfgate.gate import paths
from perfgate.refusal import RunFailure

# The benchmark groups a revision is measured on by default (what device mode times, less the grid).
DEFAULT_GROUPS = ("leaderboard", "reducer")


def add_revision_options(
    parser: argparse.ArgumentParser,
    old: tuple[str, str],
    new: tuple[str, str],
    *,
    old_required: bool = True,
    new_required: bool = True,
    groups_default: str | None = ",".join(DEFAULT_GROUPS),
    groups_help: str | None = None,
) -> None:
    """The options of a command that measures one revision against another (``ab``, ``bisect``):
    ``old`` and ``new`` as ``(flag, help)`` pairs, then ``--groups`` and ``-k``."""
    from perfgate import catalog

    timed = [name for name in catalog.GROUPS if name != "host"]  # what device mode times
    parser.add_argument(old[0], required=old_required, metavar="REV", help=old[1])
    parser.add_argument(new[0], required=new_required, metavar="REV", help=new[1])
    parser.add_argument(
        "--groups",
        default=groups_default,
        help=groups_help
        or f"comma-separated benchmark groups of {', '.join(timed)} (default: %(default)s)",
    )
    parser.add_argument(
        "-k", dest="keyword", metavar="TEXT", help="only benchmarks whose name holds TEXT"
    )


class AbError(RunFailure):
    """A run that cannot be judged; ``code`` is the exit code (2 unless the head is at fault),
    the message one line."""


# -- revisions ----------------------------------------------------------------------------------
def git(*args: str, cwd: Path | None = None) -> str:
    """``git args`` in ``cwd`` (default: this checkout, :data:`paths.REPO`); AbError if it fails."""
    proc = git_cli.run(*args, cwd=paths.REPO if cwd is None else cwd)
    if proc.returncode:
        raise AbError(f"git {' '.join(args)}: {' '.join(proc.stderr.split()) or 'failed'}")
    return proc.stdout.strip()


def resolve(rev: str) -> str:
    """The commit ``rev`` names; AbError (exit 2) for an unknown revision."""
    if not rev or rev.startswith("-"):
        raise AbError(f"--base/--head must name a git revision, got {rev!r}")
    try:
        return git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except AbError:
        raise AbError(f"{rev!r} names no commit of {paths.REPO} (fetch it first?)") from None


@contextlib.contextmanager
def worktree(
    commit: str, parent: Path, label: str = "rev", repo: Path | None = None
) -> Iterator[Path]:
    """``commit`` checked out (detached) under ``parent`` as ``<label>-<commit>``; removed
    afterwards whatever happens. The label keeps two sides of one revision apart (``--base X
    --head X``, the null check): each gets its own tree (and, their reducers being the same, one
    build: perfgate.measure.ab.build_cache). ``repo``: the repository (default: this checkout)."""
    path = parent / f"{label}-{commit[:12]}"
    git("worktree", "add", "--detach", "--quiet", str(path), commit, cwd=repo)
    try:
        yield path
    finally:
        # git() raises; cleanup must not: a failed removal is pruned with the temporary dir
        for args in (("worktree", "remove", "--force", str(path)), ("worktree", "prune")):
            with contextlib.suppress(AbError):
                git(*args, cwd=repo)


def build(root: Path, cache: Path | None, label: str) -> None:
    """The side's native reducer, built in its own tree (a tree without the build skips it: the
    worker then reports which reducer ran)."""
    if not (root / "kernels" / "reducer" / "build.py").is_file():
        print(f"perfgate ab: {label}: no kernels/reducer/build.py; nothing to build", flush=True)
        return
    env = side_env(cache)
    cmd = [sys.executable, "-m", "kernels.reducer.build"]
    proc = spawn.run(cmd, cwd=root, env=env, check=False)
    if proc.returncode:
        raise AbError(f"{label}: python -m kernels.reducer.build exited {proc.returncode}")


def side_env(cache: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if cache is not None:
        # Each side's reducer in its own cache: both record a manifest for the same arch.
        env["MXFP4_CACHE_DIR"] = str(cache)
    return env
