"""The lines of commits a bisection walks, read from git.

- :func:`commit_range`: GOOD, then the first-parent line from it to BAD (main's line).
- :meth:`GitLines.merged_branch`: what a merge brought in, as a line of its own: the commit the
  merged branch starts from, then the second parent's first-parent ancestors that the first
  parent does not hold, oldest first. For a branch that never merged main back, that start is
  the merge base of the two parents. A branch that did merge main back has its line start at
  its fork point all the same (the merge base is then a commit of main that the branch's line
  never passes through), and the merge of main back into it is a merge on that line, descended
  into in turn.

Git runs through :mod:`perfgate.git` (a killed bisection leaves no git behind).
"""

from __future__ import annotations

from pathlib import Path

from perfgate import git
from perfgate.refusal import Refusal


class RevisionError(Refusal, ValueError):
    """A revision or range that cannot be bisected; one line."""


def resolve(repo: Path, rev: str, option: str) -> str:
    proc = git.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=repo)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RevisionError(f"{option} {rev}: not a commit of {repo}")
    return proc.stdout.strip()


def commit_range(repo: Path, good: str, bad: str) -> list[str]:
    """GOOD, then the first-parent path from it to BAD, oldest first."""
    g, b = resolve(repo, good, "--good"), resolve(repo, bad, "--bad")
    if g == b:
        raise RevisionError(f"--good {good} and --bad {bad} are the same commit")
    if git.run("merge-base", "--is-ancestor", g, b, cwd=repo).returncode != 0:
        raise RevisionError(f"--good {good} is not an ancestor of --bad {bad}")
    proc = git.run(
        "rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{g}..{b}", cwd=repo
    )
    path = proc.stdout.split()
    if proc.returncode != 0 or not path or path[-1] != b:
        raise RevisionError(f"--bad {bad}: no first-parent path from --good {good}")
    first = git.run("rev-parse", f"{path[0]}^", cwd=repo).stdout.strip()
    if first != g:
        raise RevisionError(
            f"--good {good} is not on the first-parent line of --bad {bad} (a merged branch); "
            "give a commit of that line"
        )
    return [g, *path]


class GitLines:
    """The merges of one repository, as :func:`perfgate.hunt.bisect.bisect_merges` asks, and
    what the triage asks of its commits."""

    def __init__(self, repo: Path) -> None:
        self.repo = Path(repo)

    def parents(self, commit: str) -> list[str]:
        proc = git.run("rev-list", "--parents", "-n", "1", commit, cwd=self.repo)
        if proc.returncode != 0 or not proc.stdout.split():
            raise RevisionError(f"{commit}: not a commit of {self.repo}")
        return proc.stdout.split()[1:]

    def merged_branch(self, commit: str) -> list[str] | None:
        """The line ``commit`` merged in (see the module's docstring), its start first; None
        when ``commit`` is not a merge. RevisionError (one line) for a merge that cannot be
        descended into: an octopus, or a branch with no commit of its own."""
        parents = self.parents(commit)
        if len(parents) < 2:
            return None
        if len(parents) > 2:
            raise RevisionError(
                f"{commit[:12]} merges {len(parents) - 1} branches at once (an octopus merge): "
                "not descended into"
            )
        first, second = parents
        proc = git.run(
            "rev-list", "--reverse", "--first-parent", second, f"^{first}", cwd=self.repo
        )
        own = proc.stdout.split()
        if proc.returncode != 0 or not own:
            raise RevisionError(
                f"{commit[:12]}'s second parent {second[:12]} is already in its first parent "
                f"{first[:12]}: the merge brought no commit of its own"
            )
        start = self.parents(own[0])
        if not start:
            raise RevisionError(
                f"the branch {commit[:12]} merged starts at a root commit {own[0][:12]}: "
                "nothing to compare its first commit with"
            )
        return [start[0], *own]

    def is_ancestor(self, ancestor: str, commit: str) -> bool:
        """Whether ``ancestor`` is ``commit`` or one of its ancestors."""
        return (
            git.run("merge-base", "--is-ancestor", ancestor, commit, cwd=self.repo).returncode == 0
        )

    def subject(self, commit: str) -> str:
        """The commit's one-line subject ('' when git cannot say)."""
        proc = git.run("log", "-1", "--format=%s", commit, cwd=self.repo)
        return proc.stdout.strip() if proc.returncode == 0 else ""
