"""The hunt (bisect, triage's culprits) drives ``python -m perfgate ab`` through an argv of its
own making: every argv it can pass is parsed here by ``ab``'s own parser, so renaming a flag of
``ab`` fails on the CPU instead of at run time on a GPU, in the middle of a triage."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from perfgate import catalog
from perfgate.__main__ import build_parser
from perfgate.hunt import bisect as bs
from perfgate.hunt import culprits


@pytest.fixture
def argvs(monkeypatch):
    """Every command the hunt spawns (none runs: each A/B exits 2 without a report)."""
    seen: list[list[str]] = []

    def spawned(cmd, **kwargs):
        seen.append(list(cmd))
        return SimpleNamespace(returncode=2)

    monkeypatch.setattr(bs.spawn, "run", spawned)
    return seen


def _parsed_as_ab(cmd: list[str]):
    assert cmd[:3] == [sys.executable, "-m", "perfgate"], cmd
    args = build_parser().parse_args(cmd[3:])  # a flag ab lacks: SystemExit(2) here
    assert args.command == "ab"
    return args


def test_bisects_ab_takes_its_argv(argvs, tmp_path):
    # what `perfgate bisect` passes: its --groups, its -k
    run = bs.subprocess_runner(tmp_path, keyword="m16-n2112-k7168",
                               extra=["--groups", "leaderboard,reducer"],
                               out_dir=tmp_path / "steps")  # fmt: skip
    assert run("a" * 40, "b" * 40).outcome == bs.UNMEASURED
    args = _parsed_as_ab(argvs[-1])
    assert (args.base, args.head, args.keyword) == ("a" * 40, "b" * 40, "m16-n2112-k7168")


@pytest.mark.parametrize("mode", culprits.AB_MODES)
def test_triages_ab_takes_its_argv_for_one_and_for_several_benchmarks(argvs, tmp_path, mode):
    make = culprits.subprocess_factory(tmp_path, tmp_path / "steps")
    names = [
        group.nodeid(item)
        for name, group in catalog.GROUPS.items()
        if name != "host"
        for item in group.items
    ]
    for benchmarks in ((names[0],), tuple(names)):
        make(mode, benchmarks)("a" * 40, "b" * 40)
        args = _parsed_as_ab(argvs[-1])
        assert args.mode == mode and args.base == "a" * 40
        assert args.keyword == (benchmarks[0] if len(benchmarks) == 1 else None)
