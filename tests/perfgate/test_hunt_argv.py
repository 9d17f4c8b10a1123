"""The hunt (``perfgate bisect``, triage's culprits) drives ``python -m perfgate ab`` through an
argv of its own making. Every argv it can pass is parsed here by ``ab``'s own parser, then run by
``ab`` itself up to the GPU (its checks of the outputs, the mode, the groups and ``-k``), so that
renaming a flag of ``ab``, or narrowing what it accepts, fails on the CPU instead of at run time on
a GPU, in the middle of a triage. A source check keeps the list of builders complete."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from perfgate import catalog
from perfgate.__main__ import build_parser, main
from perfgate.commands import ab as ab_command
from perfgate.commands import base
from perfgate.hunt import bisect as bs
from perfgate.hunt import culprits, lines
from perfgate.modes import AB_MODE_NAMES, times_group

ROOT = Path(__file__).resolve().parents[2]
# where the hunt builds a `python -m perfgate ...` command line; each is driven below
BUILDERS = {"perfgate/hunt/bisect.py": "subprocess_runner"}
A, B = "a" * 40, "b" * 40


@pytest.fixture
def argvs(monkeypatch):
    """Every command the hunt spawns (none runs: each A/B exits 2 without a report)."""
    seen: list[list[str]] = []

    def spawned(cmd, **kwargs):
        seen.append(list(cmd))
        return SimpleNamespace(returncode=2)

    monkeypatch.setattr(bs.spawn, "run", spawned)
    return seen


@pytest.fixture
def ab_accepts(monkeypatch, capsys):
    """``ab`` given the hunt's argv: parsed by its parser, then run on a machine without a GPU
    (the revisions taken as named: the hunt's are commits it resolved itself)."""
    monkeypatch.setattr(ab_command, "resolve", lambda rev: rev)
    monkeypatch.setattr(base, "gpu_available", lambda: False)
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU", raising=False)

    def accepts(cmd: list[str]):
        assert cmd[:3] == [sys.executable, "-m", "perfgate"], cmd
        args = build_parser().parse_args(cmd[3:])  # a flag ab lacks: SystemExit(2) here
        assert args.command == "ab"
        capsys.readouterr()
        code = main(cmd[3:])
        out, err = capsys.readouterr()
        assert (code, err) == (0, ""), f"ab refused the hunt's {cmd[3:]}: {err}"
        assert "perfgate ab: no GPU on this machine" in out  # every check before the GPU passed
        return args

    return accepts


def _timed_by(mode: str) -> dict[str, list[str]]:
    """The benchmarks ``mode`` times on the A/B path, by group: what its reports can flag."""
    return {
        name: [group.nodeid(item) for item in group.items]
        for name, group in catalog.GROUPS.items()
        if name != "host" and times_group(mode, name)
    }


@pytest.mark.parametrize(
    "given, groups, keyword",
    [
        ([], "leaderboard,reducer", None),
        (["--groups", "leaderboard", "-k", "m16-n2112-k7168"], "leaderboard", "m16-n2112-k7168"),
        (["--groups", "reducer"], "reducer", None),
    ],
)
def test_the_bisect_command_s_ab_takes_its_argv(
    argvs, ab_accepts, monkeypatch, tmp_path, given, groups, keyword
):
    # perfgate bisect as a user runs it, up to its first A/B (the premise, which exits 2 here)
    monkeypatch.setattr(lines, "commit_range", lambda repo, good, bad: [A, B])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    argv = ["bisect", "--good", "G", "--bad", "B", "--results-dir", str(tmp_path / "r"), *given]
    assert main(argv) == 2
    ((cmd,),) = [argvs]
    args = ab_accepts(cmd)
    assert (args.base, args.head, args.groups, args.keyword) == (A, B, groups, keyword)
    assert args.mode == "device"


def test_the_bisect_runner_s_ab_takes_its_argv(argvs, ab_accepts, tmp_path):
    run = bs.subprocess_runner(tmp_path, keyword="m16-n2112-k7168",
                               extra=["--groups", "leaderboard,reducer"],
                               out_dir=tmp_path / "steps")  # fmt: skip
    assert run(A, B).outcome == bs.UNMEASURED
    args = ab_accepts(argvs[-1])
    assert (args.base, args.head, args.keyword) == (A, B, "m16-n2112-k7168")
    step = tmp_path / "steps" / f"{A[:12]}-{B[:12]}"
    assert (args.results_dir, args.json_out, args.markdown_out) == (
        step, str(step / "ab.json"), str(step / "ab.md"))  # fmt: skip


@pytest.mark.parametrize("mode", AB_MODE_NAMES)
def test_triage_s_ab_takes_its_argv_for_each_group_and_for_several_benchmarks(
    argvs, ab_accepts, tmp_path, mode
):
    make = culprits.subprocess_factory(tmp_path, tmp_path / "steps")
    timed = _timed_by(mode)
    assert timed, mode
    everything = tuple(name for names in timed.values() for name in names)
    for benchmarks in (*((names[0],) for names in timed.values()), everything):
        make(mode, benchmarks)(A, B)
        args = ab_accepts(argvs[-1])
        assert args.mode == mode and (args.base, args.head) == (A, B)
        assert args.groups == ",".join(sorted({culprits.ab_group(b) for b in benchmarks}))
        assert args.keyword == (benchmarks[0] if len(benchmarks) == 1 else None)


def _perfgate_command_lines(source: str) -> list[str]:
    """The top-level functions and classes of ``source`` that hold a command line of
    ``python -m perfgate`` (a list or tuple with both words)."""
    found = []
    for top in ast.parse(source).body:
        for node in ast.walk(top):
            if isinstance(node, (ast.List, ast.Tuple)):
                words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if "-m" in words and "perfgate" in words:
                    found.append(getattr(top, "name", f"line {top.lineno}"))
                    break
    return found


def test_every_perfgate_command_line_of_the_hunt_is_driven_here():
    hunt = [ROOT / "perfgate" / "commands" / f"{c}.py" for c in ("bisect", "triage")]
    hunt += sorted((ROOT / "perfgate" / "hunt").glob("*.py"))
    built = {
        str(path.relative_to(ROOT)): name
        for path in hunt
        for name in _perfgate_command_lines(path.read_text(encoding="utf-8"))
    }
    assert built == BUILDERS


def test_the_source_check_finds_a_builder():
    source = """
def runner(base):
    def run(head):
        return [sys.executable, "-m", "perfgate", "ab", "--base", base, "--head", head]
    return run


COMMAND = ("python", "-m", "perfgate", "triage")


def unrelated():
    return ["-m", "pytest"]
"""
    assert _perfgate_command_lines(source) == ["runner", "line 8"]
