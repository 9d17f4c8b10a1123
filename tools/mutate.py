"""Mutation measurement: ``python -m tools.mutate MUTANTS.json [--jobs N] [--json OUT]``.

Plants each bug of ``MUTANTS.json`` (kept OUTSIDE the project, so the suite is never tuned to
particular lines) one at a time in a private copy of the committed tree, runs the CPU tests with
``CI=true``, and prints a table of killed and surviving mutants with the kill rate.

``MUTANTS.json`` is a list of objects::

    {"name": "short-name", "file": "kernels/mxfp4.py", "old": "exact text", "new": "replacement",
     "tests": ["tests/test_mxfp4.py"]}

``old`` must occur exactly once in ``file``. ``tests`` (pytest arguments; optional) selects what
runs; without it, the whole CPU suite (``-m "not bench"``). The working tree is never touched:
the tree is exported with ``git archive`` (``--ref``, default HEAD) into a temporary directory,
one copy per worker. Before any mutant, every test selection must pass on the unmutated copy, or
nothing is measured (a red baseline would count every mutant as killed).

Statuses: ``killed`` (tests failed, collection broke, or the run timed out), ``survived`` (tests
passed), ``invalid`` (``old`` not found exactly once, or pytest found no tests). Exit status: 0 when
every valid mutant is killed, 1 when one survived, 2 on unusable input or a failing baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not bench"]
# pytest exit codes: 1 tests failed, 2 interrupted (e.g. a collection error the mutant caused),
# 3 internal error, 4 usage error, 5 no tests collected.
KILLING_CODES = {1, 2, 3}


class MutantError(ValueError):
    """MUTANTS.json is unusable; the message names the entry and the field."""


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    name: str
    file: str
    status: str  # killed, survived, invalid
    detail: str
    seconds: float


def load_mutants(path: Path) -> list[Mutant]:
    """Parse and check ``path``; MutantError with a one-line reason."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MutantError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MutantError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(data, list) or not data:
        raise MutantError(f"{path}: expected a non-empty JSON list of mutants")
    mutants, names = [], set()
    for i, entry in enumerate(data):
        where = f"{path}: mutant #{i}"
        if not isinstance(entry, dict):
            raise MutantError(f"{where}: expected an object, got {type(entry).__name__}")
        for key in ("name", "file", "old", "new"):
            if not isinstance(entry.get(key), str) or (key != "new" and not entry[key]):
                raise MutantError(f"{where}: '{key}' must be a non-empty string")
        tests = entry.get("tests", [])
        if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
            raise MutantError(f"{where}: 'tests' must be a list of pytest arguments")
        if entry["old"] == entry["new"]:
            raise MutantError(f"{where} ({entry['name']}): 'old' and 'new' are the same text")
        if entry["name"] in names:
            raise MutantError(f"{where}: name {entry['name']!r} is used twice")
        names.add(entry["name"])
        mutants.append(
            Mutant(entry["name"], entry["file"], entry["old"], entry["new"], tuple(tests))
        )
    return mutants


def export_tree(ref: str, dest: Path, repo: Path = ROOT) -> None:
    """The committed tree at ``ref`` into ``dest`` (no .git: nothing shared with the repo)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", ref], capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise MutantError(f"git archive {ref} failed: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    env.update(CI="true", PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    env["MXFP4_CACHE_DIR"] = str(tree / ".cache" / "mxfp4")  # never a shared reducer build
    return env


def run_tests(tree: Path, tests: tuple[str, ...], timeout_s: float) -> tuple[int | None, str]:
    """(pytest's exit code or None on timeout, the last line it printed)."""
    try:
        proc = subprocess.run(
            [*PYTEST, *tests],
            cwd=tree,
            env=_env(tree),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout_s:.0f} s"
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    return proc.returncode, lines[-1] if lines else ""


def run_mutant(mutant: Mutant, tree: Path, timeout_s: float) -> Outcome:
    """Plant ``mutant`` in ``tree``, run its tests, restore the file."""
    start = time.monotonic()
    path = tree / mutant.file
    try:
        original = path.read_text(encoding="utf-8")
    except OSError as exc:
        return Outcome(mutant.name, mutant.file, "invalid", f"cannot read: {exc.strerror}", 0.0)
    count = original.count(mutant.old)
    if count != 1:
        detail = f"'old' occurs {count} times in {mutant.file}, expected exactly once"
        return Outcome(mutant.name, mutant.file, "invalid", detail, 0.0)
    path.write_text(original.replace(mutant.old, mutant.new), encoding="utf-8")
    try:
        code, last = run_tests(tree, mutant.tests, timeout_s)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.monotonic() - start
    if code is None or code in KILLING_CODES:
        status = "killed"
    elif code == 0:
        status = "survived"
    else:
        status = "invalid"
    return Outcome(mutant.name, mutant.file, status, last, seconds)


def check_baseline(mutants: list[Mutant], tree: Path, timeout_s: float) -> None:
    """Every distinct test selection passes on the unmutated tree, or MutantError. A selection
    that collects nothing (exit 5) is left to its mutants, which come out invalid."""
    for tests in sorted({m.tests for m in mutants}):
        code, last = run_tests(tree, tests, timeout_s)
        if code not in (0, 5):
            shown = " ".join(tests) or "the whole CPU suite"
            raise MutantError(f"unmutated tree fails {shown} (exit {code}: {last}); fix it first")


def measure(
    mutants: list[Mutant], ref: str, jobs: int, timeout_s: float, workdir: Path, progress=None
) -> list[Outcome]:
    """Outcomes in the order of ``mutants``; ``jobs`` private copies run side by side."""
    base = workdir / "base"
    export_tree(ref, base)
    check_baseline(mutants, base, timeout_s)
    trees = [base] + [workdir / f"worker-{i}" for i in range(1, jobs)]
    for tree in trees[1:]:
        shutil.copytree(base, tree)
    free = list(trees)

    def one(mutant: Mutant) -> Outcome:
        tree = free.pop()  # list.pop/append are atomic: each worker holds its own copy
        try:
            outcome = run_mutant(mutant, tree, timeout_s)
        finally:
            free.append(tree)
        if progress is not None:
            progress(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, mutants))


def render(outcomes: list[Outcome]) -> None:
    from rich.console import Console
    from rich.table import Table

    style = {"killed": "green", "survived": "bold red", "invalid": "yellow"}
    table = Table(title="planted bugs")
    for column in ("mutant", "file", "status", "s", "last line of pytest"):
        table.add_column(column, overflow="fold")
    for o in outcomes:
        table.add_row(
            o.name, o.file, f"[{style[o.status]}]{o.status}[/]", f"{o.seconds:.0f}", o.detail
        )
    console = Console(width=max(Console().width, 140))
    console.print(table)
    console.print(summary(outcomes))


def summary(outcomes: list[Outcome]) -> str:
    valid = [o for o in outcomes if o.status != "invalid"]
    killed = sum(o.status == "killed" for o in valid)
    rate = 100.0 * killed / len(valid) if valid else 0.0
    invalid = len(outcomes) - len(valid)
    return f"killed {killed} of {len(valid)} ({rate:.1f}%)" + (
        f"; {invalid} invalid" if invalid else ""
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.mutate", description=__doc__.splitlines()[0]
    )
    parser.add_argument("mutants", type=Path, help="JSON list of planted bugs (keep it outside)")
    parser.add_argument("--ref", default="HEAD", help="commit to mutate (default: HEAD)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run side by side (1)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per test run")
    parser.add_argument("--json", type=Path, help="also write the outcomes here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary trees")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    workdir = Path(tempfile.mkdtemp(prefix="mxfp4-mutate-"))
    try:
        mutants = load_mutants(args.mutants)
        outcomes = measure(
            mutants,
            args.ref,
            args.jobs,
            args.timeout,
            workdir,
            progress=lambda o: print(f"{o.status:>8}  {o.name}", file=sys.stderr, flush=True),
        )
    except MutantError as exc:
        print(f"mutate: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"mutate: trees kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    render(outcomes)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    return 1 if any(o.status == "survived" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
