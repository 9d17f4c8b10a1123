"""perfgate bisect on the CPU: the bisection over fake same-job A/B runners (a planted slow commit
is found and convicted against its parent; unmeasurable commits are skipped; a slowdown spread
over commits is said so; a step limit stops it with the range left), into merges on planted git
histories (the commit inside a merge, nested merges, a slowdown made by the merge itself), the
git range it walks, and how an A/B's reports are read."""

from __future__ import annotations

import json
import subprocess

import pytest

from perfgate.__main__ import main
from perfgate.hunt import bisect as bs
from perfgate.hunt import lines
from tests.perfgate.planted import ContentAB, PlantedRepo

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
    assert lines.commit_range(path, shas[0], shas[4]) == shas
    # the merge, not its side
    assert lines.commit_range(path, "HEAD~3", "HEAD") == [*shas[2:], merge]


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
    with pytest.raises(lines.RevisionError, match=expected):
        lines.commit_range(repo[0], good, bad)


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


class Limited:
    """A runner that raises StepLimit after ``n`` A/Bs."""

    def __init__(self, run, n: int):
        self.run, self.n = run, n

    def __call__(self, base, head):
        if self.n == 0:
            raise bs.StepLimit("the step limit of 3 A/Bs (--max-steps) was reached")
        self.n -= 1
        return self.run(base, head)


@pytest.mark.parametrize("allowed", range(0, 8))
def test_a_step_limit_stops_with_the_range_left(allowed):
    ab = FakeAB(_step_at(9))
    full = bs.bisect(COMMITS, FakeAB(_step_at(9)))
    result = bs.bisect(COMMITS, Limited(ab, allowed))
    assert len(ab.calls) == min(allowed, len(full.steps))
    if allowed >= len(full.steps):
        assert result.found and result.first_bad == COMMITS[9] and result.stopped is None
        return
    assert not result.found and result.stopped.startswith("the step limit of 3")
    assert result.stopped in result.message
    if allowed == 0:
        assert "before its first A/B" in result.message and result.last_good is None
        return
    lo = COMMITS.index(result.last_good)
    named = [c for c in COMMITS if c[:12] in result.message]
    # the undecided range: every commit after the last good one up to the bad end, the culprit in it
    assert COMMITS[9] in named and COMMITS[lo] in named and lo < 9
    assert all(COMMITS.index(c) >= lo for c in named)


# -- into merges, on planted git histories ------------------------------------------------------
B = "tests/perf/test_leaderboard.py::test_leaderboard[m16-n2112-k7168]"
FAST, SLOW = {B: 10.0}, {B: 11.0}


@pytest.fixture
def planted(tmp_path):
    return PlantedRepo(tmp_path / "repo")


def _merge_history(planted: PlantedRepo, slow_at: str):
    """main: m0 m1 m2 M(merge of feat) m3; feat from m1: f1 f2 f3, one of them slow."""
    c = {"m0": planted.commit("m0", FAST), "m1": planted.commit("m1")}
    planted.checkout(c["m1"], "feat")
    for name in ("f1", "f2", "f3"):
        c[name] = planted.commit(name, SLOW if name == slow_at else None)
    planted.checkout("main")
    c["m2"] = planted.commit("m2")
    c["M"] = planted.merge("feat", "Merge branch 'feat'")
    c["m3"] = planted.commit("m3")
    return c


def _bisect(planted: PlantedRepo, good: str, bad: str, calls: list):
    commits = lines.commit_range(planted.path, good, bad)
    return bs.bisect_merges(commits, ContentAB(planted, (B,), calls), lines.GitLines(planted.path))


@pytest.mark.parametrize("slow_at", ["f1", "f2", "f3"])
def test_bisect_names_the_commit_inside_a_merge(planted, slow_at):
    c = _merge_history(planted, slow_at)
    calls: list = []
    result = _bisect(planted, c["m0"], c["m3"], calls)
    assert result.first_bad == c["M"] and result.conviction.base == c["m2"]  # main's line
    assert result.culprit == c[slow_at] and result.chain == (c["M"], c[slow_at])
    before = {"f1": "m1", "f2": "f1", "f3": "f2"}[slow_at]
    assert (result.convicting.base, result.convicting.head) == (c[before], c[slow_at])
    assert result.inside.steps[0].base == c["m1"]  # inside, the branch's start is the good end
    assert result.inside.steps[0].head == c["f3"]
    assert f"a merge; inside it, first bad commit: {c[slow_at]}" in result.message
    # every A/B inside compares two commits of the branch's own line
    branch = {c["m1"], c["f1"], c["f2"], c["f3"]}
    assert all({s.base, s.head} <= branch for s in result.inside.steps)
    assert len(calls) == len(result.all_steps)


def test_bisect_descends_nested_merges(planted):
    """main: m0 m1 M(merge of feat) m2; feat from m1: f1 N(merge of sub) f2; sub from f1: s1 s2
    (slow) s3."""
    c = {"m0": planted.commit("m0", FAST), "m1": planted.commit("m1")}
    planted.checkout(c["m1"], "feat")
    c["f1"] = planted.commit("f1")
    planted.checkout(c["f1"], "sub")
    c["s1"] = planted.commit("s1")
    c["s2"] = planted.commit("s2", SLOW)
    c["s3"] = planted.commit("s3")
    planted.checkout("feat")
    c["N"] = planted.merge("sub", "Merge branch 'sub' into feat")
    c["f2"] = planted.commit("f2")
    planted.checkout("main")
    c["M"] = planted.merge("feat", "Merge branch 'feat'")
    c["m2"] = planted.commit("m2")
    result = _bisect(planted, c["m0"], c["m2"], [])
    assert result.chain == (c["M"], c["N"], c["s2"]) and result.culprit == c["s2"]
    assert (result.convicting.base, result.convicting.head) == (c["s1"], c["s2"])
    assert result.inside.steps[0].base == c["m1"] and result.inside.inside.steps[0].base == c["f1"]
    assert result.message.count("a merge; inside it") == 2


def test_a_slowdown_made_by_the_merge_resolution_is_said_so(planted):
    """Neither parent is slow; the merge's own resolution of perf.json is."""
    c = {"m0": planted.commit("m0", FAST), "m1": planted.commit("m1")}
    planted.checkout(c["m1"], "feat")
    c["f1"], c["f2"] = planted.commit("f1"), planted.commit("f2")
    planted.checkout("main")
    c["m2"] = planted.commit("m2")
    c["M"] = planted.merge("feat", "Merge branch 'feat'", resolved_levels=SLOW)
    c["m3"] = planted.commit("m3")
    calls: list = []
    result = _bisect(planted, c["m0"], c["m3"], calls)
    assert result.first_bad == c["M"] and result.culprit == c["M"] and result.chain == (c["M"],)
    assert result.convicting.base == c["m2"]  # the merge against its first parent
    assert not result.inside.found and not result.inside.reproduced
    assert (calls[-1][0], calls[-1][1]) == (c["m1"], c["f2"])  # the branch's tip against its start
    assert "the merged branch's commits cannot place it" in result.message
    assert f"its tip {c['f2'][:12]} is not slower than {c['m1'][:12]}" in result.message
    assert "appears only at the merge (its conflict resolution" in result.message


def test_a_branch_that_merged_main_back_starts_at_its_fork(planted):
    """feat from m1: f1, S (main merged back: m2), f2 (slow); main: m2, m3, M. The merge base of
    M's parents is m2; the branch's own line starts at m1 and passes S, a merge of main."""
    c = {"m0": planted.commit("m0", FAST), "m1": planted.commit("m1")}
    planted.checkout(c["m1"], "feat")
    c["f1"] = planted.commit("f1")
    planted.checkout("main")
    c["m2"] = planted.commit("m2")
    planted.checkout("feat")
    c["S"] = planted.merge("main", "Merge branch 'main' into feat")
    c["f2"] = planted.commit("f2", SLOW)
    planted.checkout("main")
    c["m3"] = planted.commit("m3")
    c["M"] = planted.merge("feat", "Merge branch 'feat'")
    assert planted.git("merge-base", c["m3"], c["f2"]) == c["m2"]
    assert lines.GitLines(planted.path).merged_branch(c["M"]) == [c["m1"], c["f1"], c["S"], c["f2"]]
    result = _bisect(planted, c["m0"], c["M"], [])
    assert result.chain == (c["M"], c["f2"])
    assert (result.convicting.base, result.convicting.head) == (c["S"], c["f2"])


def test_merges_that_cannot_be_descended_say_why(planted):
    c = {"m0": planted.commit("m0", FAST)}
    planted.checkout(c["m0"], "a")
    planted.commit("a1")
    planted.checkout(c["m0"], "b")
    planted.commit("b1")
    planted.checkout("main")
    planted.git("merge", "-q", "--no-ff", "-m", "octopus", "a", "b")
    octopus = planted.head()
    with pytest.raises(lines.RevisionError, match="an octopus merge"):
        lines.GitLines(planted.path).merged_branch(octopus)
    assert lines.GitLines(planted.path).merged_branch(c["m0"]) is None


def test_the_bisect_command_says_both_the_merge_and_the_commit_inside(planted, tmp_path, capsys):
    import argparse

    from perfgate.commands import bisect as command

    c = _merge_history(planted, "f2")
    result = _bisect(planted, c["m0"], c["m3"], [])
    out = tmp_path / "answer.json"
    assert command._present(argparse.Namespace(json_out=out), result) == 0
    text = capsys.readouterr().out
    assert f"on the first-parent line: {c['M']} (a merge)" in text
    assert f"inside it: {c['f2']}" in text
    assert f"convicts the merge ({c['M'][:12]} against its parent {c['m2'][:12]})" in text
    assert f"convicts it ({c['f2'][:12]} against its parent {c['f1'][:12]})" in text
    answer = json.loads(out.read_text())
    assert (answer["first_bad"], answer["culprit"]) == (c["M"], c["f2"])
    assert answer["inside"]["first_bad"] == c["f2"] and answer["inside"]["inside"] is None
    assert answer["inside"]["conviction"]["base"] == c["f1"]
