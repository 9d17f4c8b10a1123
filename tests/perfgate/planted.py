"""Planted git histories for the bisect and triage tests, and a fake same-job A/B that decides
by what each commit holds.

Every commit of a :class:`PlantedRepo` holds ``perf.json``: each benchmark's level (a time; a
missing benchmark or ``null`` cannot be measured at that commit). :class:`ContentAB` compares
two commits' levels as an A/B would: a regression when the head is more than 1.5% slower.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from perfgate.hunt import bisect as bs

PERF = "perf.json"
THRESHOLD = 1.015


class PlantedRepo:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "t@example.invalid")
        self.git("config", "user.name", "t")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.path, check=True, capture_output=True, text=True
        ).stdout.strip()

    def commit(self, message: str, levels: dict | None = None, touch: str | None = None) -> str:
        """A commit changing ``perf.json`` to ``levels`` (None: unchanged) and adding the file
        ``touch`` (so that commits of two branches never conflict)."""
        if levels is not None:
            (self.path / PERF).write_text(json.dumps(levels, sort_keys=True))
        (self.path / (touch or f"note-{message}")).write_text(message)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def checkout(self, rev: str, new_branch: str | None = None) -> None:
        if new_branch:
            self.git("checkout", "-q", "-b", new_branch, rev)
        else:
            self.git("checkout", "-q", rev)

    def merge(self, branch: str, message: str, resolved_levels: dict | None = None) -> str:
        """``git merge --no-ff branch``; ``resolved_levels``: the merge's own ``perf.json``, as
        a conflict resolution would write it."""
        self.git("merge", "-q", "--no-ff", "--no-commit", branch)
        if resolved_levels is not None:
            (self.path / PERF).write_text(json.dumps(resolved_levels, sort_keys=True))
            self.git("add", PERF)
        self.git("commit", "-q", "-m", message)
        return self.head()

    def levels(self, commit: str) -> dict:
        return json.loads(self.git("show", f"{commit}:{PERF}"))


class ContentAB:
    """A same-job A/B of ``benchmarks`` (head against base) from the planted levels; every call
    is logged in ``calls`` as ``(base, head, benchmarks)``."""

    def __init__(self, repo: PlantedRepo, benchmarks: tuple[str, ...], calls: list) -> None:
        self.repo, self.benchmarks, self.calls = repo, tuple(benchmarks), calls

    def __call__(self, base: str, head: str) -> bs.ABResult:
        self.calls.append((base, head, self.benchmarks))
        old, new = self.repo.levels(base), self.repo.levels(head)
        rows, lines = [], ["| benchmark | change | verdict |", "| --- | --- | --- |"]
        for name in self.benchmarks:
            a, b = old.get(name), new.get(name)
            if a is None or b is None:
                return bs.ABResult(base, head, bs.UNMEASURED, f"(no build at {head[:7]})")
            verdict = "regression" if b / a > THRESHOLD else "unchanged"
            rows.append({"name": name, "verdict": verdict, "ratio": b / a})
            lines.append(f"| {name} | {b / a - 1:+.1%} | {verdict} |")
        regressions = sum(r["verdict"] == "regression" for r in rows)
        detail = {"benchmarks": rows, "summary": {"counts": {"regression": regressions}}}
        outcome = bs.REGRESSION if regressions else bs.UNCHANGED
        return bs.ABResult(base, head, outcome, "\n".join(lines), detail)


def factory(repo: PlantedRepo, calls: list):
    """The triage's runner factory over :class:`ContentAB`: ``(mode, benchmarks) -> runner``."""

    def make(mode: str, benchmarks: tuple[str, ...]) -> ContentAB:
        return ContentAB(repo, benchmarks, calls)

    return make
