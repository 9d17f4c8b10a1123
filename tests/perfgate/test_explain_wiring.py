"""The gates' "Why" section (perfgate/explain/wiring.py): ab, bench's stored gate and triage add
the explanation of each flagged benchmark to their report, job summary and issue, within a time
budget, never changing a verdict or an exit code; a failure is one line, never a traceback. The
planted triage chain with the explanation real is the lab's (tests/lab/test_triage_chain.py)."""

from __future__ import annotations

import types

import pytest

from perfgate.explain import explain as ex
from perfgate.explain import ranking, wiring
from perfgate.gate.report import Report, Row, render_markdown

NAME = "tests/perf/test_leaderboard.py::test_leaderboard[m256-n3072-k1536]"


def _fake_explanation(base, head, benchmarks, **kwargs):
    diff = ranking.Difference(1, 100, "launch", "sm90", "split_k", 2, 1,
                              "sm90 launch: config split_k 2 -> 1", "reducer")  # fmt: skip
    bx = ex.BenchmarkExplanation(benchmarks[0], {}, [diff], [])
    return ex.Explanation(base, head, ("sm90", "gfx950"), "sm90", [], [bx], False, 1.0)


def test_why_section_names_each_flagged_benchmark_with_its_ranked_causes(monkeypatch):
    monkeypatch.setattr(ex, "explain", _fake_explanation)
    lines = wiring.why_section("a" * 40, "b" * 40, [NAME], budget_s=10, own_target="sm90")
    text = "\n".join(lines)
    assert lines[0] == wiring.HEADING
    assert f"**`{NAME}`**" in text and "1. sm90 launch: config split_k 2 -> 1" in text
    assert f"perfgate explain --base {'a' * 12} --head {'b' * 12} -k m256-n3072-k1536" in text


@pytest.mark.parametrize(
    ("base", "budget", "says"),
    [
        ("a" * 40, 0, "not explained: --explain-budget-s 0"),
        (None, 10, "the gate's baseline records no commit"),
    ],
)
def test_why_section_says_why_it_is_missing(base, budget, says):
    lines = wiring.why_section(base, None, [NAME], budget_s=budget)
    assert lines[0] == wiring.HEADING and says in "\n".join(lines)


def test_a_failing_explanation_is_one_line_never_a_traceback(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("the compiler\nfell over")

    monkeypatch.setattr(ex, "explain", boom)
    lines = wiring.why_section("a" * 40, None, [NAME], budget_s=10, own_target="sm90")
    (line,) = [x for x in lines if x.startswith("- could not explain")]
    assert line == "- could not explain `m256-n3072-k1536`: RuntimeError: the compiler fell over"
    assert wiring.why_section("a" * 40, None, [], budget_s=10) == []  # nothing flagged


def _report(verdict: str, why=()) -> Report:
    row = Row(NAME, verdict, "r", ratio=1.2)
    return Report("b.json", "c.json", "nvidia-h200", "device", [row], 1, {}, why=list(why))


def test_the_report_carries_the_section_only_when_there_is_one():
    plain = _report("regression")
    assert "why" not in plain.to_json() and wiring.HEADING not in render_markdown(plain)
    why = [wiring.HEADING, "", "1. sm90 launch: config split_k 2 -> 1"]
    shown = _report("regression", why)
    assert shown.to_json()["why"] == why
    assert render_markdown(shown).rstrip().endswith("1. sm90 launch: config split_k 2 -> 1")


def test_ab_explains_its_flagged_benchmarks_and_keeps_the_verdict(monkeypatch):
    from perfgate.commands import ab

    seen = []
    monkeypatch.setattr(wiring, "why_section", lambda *a, **k: seen.append((a, k)) or ["W"])
    args = types.SimpleNamespace(explain_budget_s=7.0)
    rep = ab._explained(args, _report("regression"), "a" * 40, None)
    assert rep.why == ["W"] and rep.exit_code == 1
    assert seen == [(("a" * 40, None, [NAME]), {"budget_s": 7.0})]
    assert ab._explained(args, _report("unchanged"), "a" * 40, None).why == []


def test_bench_explains_against_the_baselines_commit(monkeypatch):
    from perfgate.commands import bench

    seen = []
    monkeypatch.setattr(wiring, "why_section", lambda *a, **k: seen.append(a) or ["W"])
    args = types.SimpleNamespace(explain_budget_s=5.0, submission=None)

    def doc(commit, dirty=False):
        fp = {"git_commit": commit, "git_dirty": dirty}
        return {"machine_info": {"perfgate": {"fingerprint": fp}}}

    assert bench._explained(args, _report("regression"), doc("b" * 40), doc("c" * 40)).why == ["W"]
    bench._explained(args, _report("regression"), doc("b" * 40), doc("c" * 40, dirty=True))
    assert seen == [("b" * 40, "c" * 40, [NAME]), ("b" * 40, None, [NAME])]
    assert bench._explained(args, _report("unchanged"), doc("b"), doc("c")).why == []


def test_the_budget_options_refuse_a_negative_budget(capsys):
    from perfgate.__main__ import main

    for argv in (["ab", "--base", "HEAD"], ["bench"], ["triage", "--no-issues"]):
        assert main([*argv, "--explain-budget-s", "-1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--explain-budget-s must be" in err[0], err
