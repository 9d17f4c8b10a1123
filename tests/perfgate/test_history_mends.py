"""One definition each: the fingerprint segment is the baseline's environment keys; ab's and
bisect's revision options come from one function; bisect checks its selection before any A/B."""

from __future__ import annotations

import copy

import pytest

from perfgate.__main__ import build_parser, main
from perfgate.gate import baseline as bl
from perfgate.history import records
from perfgate.revisions import DEFAULT_GROUPS
from tests.perfgate.conftest import FINGERPRINT


def test_segment_fields_are_the_baseline_environment_keys():
    assert records.SEGMENT_FIELDS is bl.ENVIRONMENT_KEYS
    assert set(bl.FINGERPRINT_KEYS) - set(records.SEGMENT_FIELDS) == {"git_commit"}


@pytest.mark.parametrize("key", bl.FINGERPRINT_KEYS)
def test_every_environment_key_and_only_those_start_a_segment(key):
    changed = copy.deepcopy(FINGERPRINT)
    changed[key] = {"changed": True}
    moved = records.segment_key(changed) != records.segment_key(FINGERPRINT)
    assert moved == (key != "git_commit")
    diff = records.segment_difference(FINGERPRINT, changed)
    assert (diff.startswith(f"{key} ")) == (key != "git_commit")


def _actions(argv):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return {a.dest: a for a in sub.choices[argv]._actions}


def test_ab_and_bisect_share_their_revision_options():
    ab, bisect = _actions("ab"), _actions("bisect")
    assert (ab["keyword"].option_strings, ab["keyword"].help) == (
        bisect["keyword"].option_strings,
        bisect["keyword"].help,
    )
    assert ab["groups"].option_strings == bisect["groups"].option_strings == ["--groups"]
    assert bisect["groups"].default == ",".join(DEFAULT_GROUPS)
    # ab's default follows --mode (leaderboard mode: leaderboard)
    assert ab["groups"].default is None
    # ab needs --base unless two submission files are compared (checked after parsing)
    assert (ab["base"].required, ab["head"].required) == (False, False)
    assert (bisect["good"].required, bisect["bad"].required) == (True, True)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--groups", "bogus"], "--groups must name some of"),
        (["-k", "no-such-shape"], "-k 'no-such-shape' matches no benchmark of leaderboard,reducer"),
    ],
)
def test_bisect_checks_its_selection_before_any_ab(monkeypatch, capsys, extra, message):
    from perfgate.hunt import bisect as bs
    from perfgate.hunt import lines

    monkeypatch.setattr(lines, "commit_range", lambda repo, good, bad: ["a" * 40, "b" * 40])

    def refuse(*a, **k):
        raise AssertionError("an A/B ran")

    monkeypatch.setattr(bs, "subprocess_runner", refuse)
    assert main(["bisect", "--good", "A", "--bad", "B", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("perfgate bisect: error: ") and message in err
