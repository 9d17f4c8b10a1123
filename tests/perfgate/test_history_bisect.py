"""perfgate bisect on the CPU: the bisection over fake same-job A/B runners (a planted slow commit
is found and convicted against its parent; unmeasurable commits are skipped; a slowdown spread
over commits is said so), the git range it walks, and how an A/B's reports are read."""

from __future__ import annotations

import json
import subprocess

import pytest

from perfgate.__main__ import main
from perfgate.history import bisect as bs

COMMITS = [f"{i:02x}" * 20 for i in range(1, 18)]  # GOOD, 15 commits, BAD


class FakeAB:
    """Same-job A/B on a chain whose commit ``i`` has time ``level[i]``: a regression when the
    head is more than 1.5% slower than the base; commits in ``broken`` cannot be measured."""

    def __init__(self, level: list[float], broken: frozenset[int] = frozenset()):
        self.level, self.broken, self.calls = level, broken, []

    def __call__(self, base: str, head: str) -> bs.ABResult:
        b, h = COMMITS.index(base), COMMITS.index(head)
        self.calls.append((b, h))
        if h in self.broken:
            return bs.ABResult(base, head, bs.UNMEASURED, "head did not build")
        ratio = self.level[h] / self.level[b]
        outcome = bs.REGRESSION if ratio > 1.015 else bs.UNCHANGED
        return bs.ABResult(
            base, head, outcome, f"| {head[-2:]} vs {base[-2:]} | {ratio - 1:+.2%} |"
        )


def _step_at(j: int, size: float = 0.05) -> list[float]:
    return [1.0 if i < j else 1.0 + size for i in range(len(COMMITS))]


@pytest.mark.parametrize("j", range(1, len(COMMITS)))
def test_every_planted_commit_is_found_and_convicted(j):
    ab = FakeAB(_step_at(j))
    result = bs.bisect(COMMITS, ab)
    assert result.found and result.first_bad == COMMITS[j] and result.last_good == COMMITS[j - 1]
    assert (result.conviction.base, result.conviction.head) == (COMMITS[j - 1], COMMITS[j])
    assert result.conviction.outcome == bs.REGRESSION and "+5.00%" in result.conviction.table
    assert ab.calls[0] == (0, len(COMMITS) - 1)  # the premise first
    # each step: a midpoint against the last good commit
    good = 0
    for base, head in ab.calls[1:]:
        assert base == good or (base, head) == (j - 1, j)
        if head < j:
            good = head
    assert len(ab.calls) <= 2 + 4 + 1  # premise, log2(16) steps, the conviction


def test_bad_not_slower_than_good_is_refused():
    ab = FakeAB([1.0] * len(COMMITS))
    result = bs.bisect(COMMITS, ab)
    assert not result.found and "is not slower than" in result.message and ab.calls == [(0, 16)]


def test_unmeasurable_commits_are_skipped():
    broken = frozenset({4, 6, 12, 13})  # not the culprit (9) or its parent
    ab = FakeAB(_step_at(9), broken=broken)
    result = bs.bisect(COMMITS, ab)
    assert result.found and result.first_bad == COMMITS[9] and result.conviction.base == COMMITS[8]
    tried = {h for _, h in ab.calls}
    assert broken & tried and not result.skipped


def test_a_culprit_hidden_by_skipped_commits_gives_the_range():
    ab = FakeAB(_step_at(9), broken=frozenset({8}))  # the culprit's parent cannot be measured
    result = bs.bisect(COMMITS, ab)
    assert not result.found and result.skipped == (COMMITS[8],)
    assert result.last_good == COMMITS[7]
    assert f"one of {COMMITS[8][:12]}, {COMMITS[9][:12]}" in result.message


def test_a_slowdown_spread_over_commits_is_said_so():
    level = [1.004**i for i in range(len(COMMITS))]  # +0.4% a commit, +6.6% in all
    result = bs.bisect(COMMITS, FakeAB(level))
    assert not result.found and "spread over several commits" in result.message
    assert result.conviction is not None and result.conviction.outcome == bs.UNCHANGED


def _git(repo, *args):
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "config", "user.email", "t@example.invalid")
    _git(tmp_path, "config", "user.name", "t")
    shas = []
    for i in range(5):
        (tmp_path / "f").write_text(str(i))
        _git(tmp_path, "add", "f")
        _git(tmp_path, "commit", "-q", "-m", f"c{i}")
        shas.append(_git(tmp_path, "rev-parse", "HEAD"))
    _git(tmp_path, "checkout", "-q", "-b", "side", shas[1])
    (tmp_path / "g").write_text("side")
    _git(tmp_path, "add", "g")
    _git(tmp_path, "commit", "-q", "-m", "side")
    side = _git(tmp_path, "rev-parse", "HEAD")
    _git(tmp_path, "checkout", "-q", "main")
    _git(tmp_path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = _git(tmp_path, "rev-parse", "HEAD")
    return tmp_path, shas, side, merge


def test_commit_range_walks_the_first_parent_line(repo):
    path, shas, _side, merge = repo
    assert bs.commit_range(path, shas[0], shas[4]) == shas
    assert bs.commit_range(path, "HEAD~3", "HEAD") == [*shas[2:], merge]  # the merge, not its side


@pytest.mark.parametrize(
    ("good", "bad", "expected"),
    [
        ("nope", "HEAD", "--good nope: not a commit"),
        ("HEAD", "HEAD", "are the same commit"),
        ("HEAD", "HEAD~2", "is not an ancestor"),
        ("side", "HEAD", "not on the first-parent line"),
    ],
)
def test_commit_range_refuses(repo, good, bad, expected):
    with pytest.raises(bs.RevisionError, match=expected):
        bs.commit_range(repo[0], good, bad)


def test_reading_an_ab_report(tmp_path):
    j, md = tmp_path / "ab.json", tmp_path / "ab.md"
    assert bs.read_ab("a", "b", 2, j, md).outcome == bs.UNMEASURED  # no report at all
    md.write_text("| table |")
    for counts, rc, outcome in (
        ({"regression": 1}, 1, bs.REGRESSION),
        ({"regression": 0, "unchanged": 9}, 0, bs.UNCHANGED),
        ({"regression": 0, "inconclusive": 1}, 1, bs.UNMEASURED),
    ):
        j.write_text(json.dumps({"summary": {"counts": counts}}))
        result = bs.read_ab("a", "b", rc, j, md)
        assert result.outcome == outcome and result.table == "| table |"


def test_bisect_command_refuses_bad_revisions(capsys):
    assert main(["bisect", "--good", "no-such-rev", "--bad", "HEAD"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--good no-such-rev: not a commit" in err
