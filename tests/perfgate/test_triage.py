"""perfgate triage on the CPU, end to end but for the A/B: a planted git history whose commits
hold each benchmark's level (tests/perfgate/planted.py), a history store with main's runs and
their gate verdicts, the gate's real comparison report of the flagged run, fake A/B runners that
decide by the planted levels, and the GitHub issues API served over HTTP by the local stand-in
(tests/perfgate/github_standin.py).

Covered: one culprit for two benchmarks (one A/B groups them, one issue), two culprits (two
issues), a culprit inside a merge, a rerun (the same issue updated and commented, never a
second), no passing run in the history (the baseline's commit, said in one line; none: exit 2),
no token, the API failing (one line, exit 2, the summary still written), the step limit and the
time budget, nothing flagged, usage errors."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from perfgate.__main__ import main
from perfgate.gate import compare
from perfgate.history import records, store
from perfgate.hunt import culprits, github
from perfgate.hunt import triage as tg
from perfgate.refusal import RunFailure
from tests.perfgate.conftest import gpu_like, make_result
from tests.perfgate.github_standin import Standin
from tests.perfgate.planted import PlantedRepo, factory

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="plants git histories")

A = "tests/perf/test_leaderboard.py::test_leaderboard[m256-n3072-k1536]"
B = "tests/perf/test_leaderboard.py::test_leaderboard[m64-n7168-k2048]"
C = "tests/perf/test_leaderboard.py::test_leaderboard[m4-n2880-k512]"
REPO_NAME = "perfgate/mxfp4"


class World:
    """A planted main line c0..c7 (c0 fast), a store, the gate's report at the head."""

    def __init__(self, tmp_path, slow: dict[str, str] | None = None, with_merge: bool = False):
        self.tmp = tmp_path
        self.repo = PlantedRepo(tmp_path / "repo")
        self.c: dict[str, str] = {}
        levels = {A: 10.0, B: 20.0, C: 5.0}
        slow = slow or {}
        for i in range(8):
            name = f"c{i}"
            if with_merge and name == "c5":
                self._merge(levels, slow)
                continue
            for bench, at in slow.items():
                if at == name:
                    levels = {**levels, bench: levels[bench] * 1.1}
            self.c[name] = self.repo.commit(name, dict(levels))
        self.bad = self.c["c7"]
        self.db = tmp_path / "history.sqlite"
        self.calls: list = []

    def _merge(self, levels, slow) -> None:
        """c5 is a merge of feat (from c4: f1, f2, f3); a benchmark slow at 'f2' is slow there."""
        base = self.c["c4"]
        self.repo.checkout(base, "feat")
        for name in ("f1", "f2", "f3"):
            for bench, at in slow.items():
                if at == name:
                    levels[bench] = levels[bench] * 1.1
            self.c[name] = self.repo.commit(name, dict(levels))
        self.repo.checkout("main")
        self.c["c5"] = self.repo.merge("feat", "Merge branch 'feat'")

    def main_run(self, commit: str, verdict: str | None, i: int) -> None:
        """A run of main at ``commit`` kept with ``verdict``."""
        data = make_result({n: gpu_like(i) for n in (A, B, C)}, git_commit=commit)
        data["datetime"] = f"2026-11-{i + 1:02d}T00:00:00+00:00"
        path = self.tmp / f"run-{i}.json"
        path.write_text(json.dumps(data))
        run = records.read_run(path, branch="main")
        with store.open_store(self.db, write=True) as s:
            s.add_run(records.Run(**{**run.__dict__, "verdict": verdict}))

    def gate_report(self, flagged=(A, B), baseline_commit: str | None = None):
        """The gate's report of the run at the head: ``flagged`` 10% slower than the baseline."""
        base = make_result(
            {n: gpu_like(50 + k) for k, n in enumerate((A, B, C))},
            git_commit=baseline_commit or "f" * 40,
        )
        head = make_result(
            {
                n: gpu_like(50 + k, factor=1.1 if n in flagged else 1.0)
                for k, n in enumerate((A, B, C))
            },
            git_commit=self.bad,
        )
        results = self.tmp / "results"
        results.mkdir(exist_ok=True)
        (results / "baseline.json").write_text(json.dumps(base))
        (results / "device.json").write_text(json.dumps(head))
        report = results / "device.compare.json"
        compare.compare_files(results / "baseline.json", results / "device.json", json_out=report)
        return report

    def request(self, report, **kw) -> tg.Request:
        defaults = dict(
            reports=(report,),
            repo=self.repo.path,
            db=self.db,
            branch="main",
            bad=self.bad,
            summary=self.tmp / "summary.md",
            json_out=self.tmp / "triage.json",
            run_url="https://github.invalid/perfgate/mxfp4/actions/runs/7",
        )
        return tg.Request(**{**defaults, **kw})

    def triage(self, report, api, **kw) -> int:
        return tg.triage(self.request(report, **kw), factory(self.repo, self.calls), api)

    def answer(self) -> dict:
        return json.loads((self.tmp / "triage.json").read_text())


@pytest.fixture
def standin():
    with Standin(repo=REPO_NAME, token="t0ken") as server:
        yield server


def _api(server: Standin) -> github.IssuesAPI:
    return github.IssuesAPI(server.url, REPO_NAME, "t0ken")


def test_one_culprit_for_two_benchmarks_is_one_issue(tmp_path, standin, capsys):
    w = World(tmp_path, slow={A: "c3", B: "c3"})
    w.main_run(w.c["c1"], "pass", 1)
    w.main_run(w.c["c2"], "fail", 2)  # a failing run is never the good commit
    report = w.gate_report()
    assert w.triage(report, _api(standin)) == 0
    out = capsys.readouterr().out
    assert f"good: the newest run of main on nvidia-h200 (device mode, this fingerprint segment) that passed the gate: {w.c['c1'][:12]}" in out  # fmt: skip
    # A is bisected (from c1); B joins it after one A/B of the culprit against its parent
    assert all(call[2] == (A,) for call in w.calls[:-1])
    assert w.calls[-1] == (w.c["c2"], w.c["c3"], (B,))
    assert w.calls[0][:2] == (w.c["c1"], w.bad)  # the premise
    (issue,) = standin.issues
    assert issue["body"].startswith(f"<!-- perfgate-triage culprit={w.c['c3']} -->")
    assert issue["title"] == (
        f"perfgate: {w.c['c3'][:12]} made test_leaderboard[m256-n3072-k1536], "
        "test_leaderboard[m64-n7168-k2048] slower on nvidia-h200"
    )
    assert [x["name"] for x in issue["labels"]] == [github.LABEL]
    summary = (tmp_path / "summary.md").read_text()
    assert "## perfgate triage: 1 culprit(s) for 2 flagged benchmark(s)" in summary
    assert f"The A/B that convicts it (`{w.c['c3'][:12]}` against its parent `{w.c['c2'][:12]}`)" in summary  # fmt: skip
    assert "| `test_leaderboard[m64-n7168-k2048]` | device | +" in summary
    assert "regression +10.0%" in summary and "Issue [#1](" in summary and "opened" in summary
    answer = w.answer()
    (finding,) = answer["findings"]
    assert finding["culprit"] == w.c["c3"] and [b["name"] for b in finding["benchmarks"]] == [A, B]
    assert finding["issue"]["action"] == "opened" and answer["exit_code"] == 0
    assert answer["steps_used"] == len(w.calls)


def test_two_culprits_are_two_issues(tmp_path, standin):
    w = World(tmp_path, slow={A: "c2", B: "c5"})
    w.main_run(w.c["c0"], "pass", 0)
    assert w.triage(w.gate_report(), _api(standin)) == 0
    culprits = [f["culprit"] for f in w.answer()["findings"]]
    assert culprits == [w.c["c2"], w.c["c5"]] or culprits == [w.c["c5"], w.c["c2"]]
    assert sorted(i["body"].splitlines()[0] for i in standin.issues) == sorted(
        f"<!-- perfgate-triage culprit={c} -->" for c in culprits
    )
    # after the first culprit, one A/B of it for the other benchmark, which it did not slow
    first = w.answer()["findings"][0]
    (check,) = first["checks"]
    assert check["outcome"] == "unchanged" and len(w.answer()["findings"][1]["checks"]) == 0


def test_a_culprit_inside_a_merge_names_both(tmp_path, standin, capsys):
    w = World(tmp_path, slow={A: "f2"}, with_merge=True)
    w.main_run(w.c["c0"], "pass", 0)
    assert w.triage(w.gate_report(flagged=(A,)), _api(standin)) == 0
    (finding,) = w.answer()["findings"]
    assert finding["chain"] == [w.c["c5"], w.c["f2"]] and finding["culprit"] == w.c["f2"]
    assert (
        f"culprit {w.c['f2'][:12]} (inside the merge {w.c['c5'][:12]})" in capsys.readouterr().out
    )
    (issue,) = standin.issues
    assert f"the merge `{w.c['c5'][:12]}` (Merge branch 'feat'); inside it: `{w.c['f2'][:12]}` (f2)" in issue["body"]  # fmt: skip
    assert f"against its parent `{w.c['f1'][:12]}`" in issue["body"]


def test_a_rerun_updates_the_same_issue(tmp_path, standin):
    for k in range(120):  # two pages of other triage issues, a pull request holding the marker
        standin.add_issue(f"old {k}", f"<!-- perfgate-triage culprit={k:040d} -->", [github.LABEL])
    w = World(tmp_path, slow={A: "c3", B: "c3"})
    w.main_run(w.c["c1"], "pass", 1)
    report = w.gate_report()
    marker = f"<!-- perfgate-triage culprit={w.c['c3']} -->"
    standin.add_issue("a PR quoting it", marker, [github.LABEL], pull_request=True)
    assert w.triage(report, _api(standin)) == 0
    assert w.answer()["findings"][0]["issue"]["action"] == "opened"  # not the pull request
    before = len(standin.issues)
    ours = standin.issues[-1]
    assert "pull_request" not in ours and ours["body"].startswith(marker)
    ours["body"] = ours["body"].replace("benchmarks slower", "STALE")
    ours["state"] = "closed"  # someone closed it: commented, not reopened
    assert w.triage(report, _api(standin), run_url="https://github.invalid/runs/8") == 0
    assert len(standin.issues) == before  # no second issue
    assert "STALE" not in ours["body"] and ours["body"].startswith(marker)
    assert "https://github.invalid/runs/8" in ours["body"] and ours["state"] == "closed"
    (comment,) = standin.comments
    assert (
        comment["issue"] == ours["number"] and f"found `{w.c['c3'][:12]}` again" in comment["body"]
    )
    assert w.answer()["findings"][0]["issue"]["action"] == "updated"
    pages = [p for m, p in standin.requests if m == "GET"]
    assert any("page=2" in p for p in pages)  # the marker was looked for past the first page


def test_no_passing_run_uses_the_baselines_commit_and_says_so(tmp_path, standin, capsys):
    w = World(tmp_path, slow={A: "c4"})
    w.main_run(w.c["c2"], "fail", 2)
    report = w.gate_report(flagged=(A,), baseline_commit=w.c["c1"])
    assert w.triage(report, _api(standin)) == 0
    good = [line for line in capsys.readouterr().out.splitlines() if "good:" in line]
    assert good == [
        f"perfgate triage: good: no run of main on nvidia-h200 (device mode, this fingerprint "
        f"segment) that measured it passed the gate in {w.db}; good = {w.c['c1'][:12]}, the "
        f"commit {tmp_path / 'results' / 'baseline.json'} was recorded at"
    ]
    assert w.answer()["findings"][0]["culprit"] == w.c["c4"]
    assert w.calls[0][:2] == (w.c["c1"], w.bad)


@pytest.mark.parametrize("store_state", ["missing", "schema-1"])
def test_no_good_commit_at_all_is_exit_2_and_bisects_nothing(
    tmp_path, standin, capsys, store_state
):
    w = World(tmp_path, slow={A: "c4"})
    if store_state == "schema-1":
        import sqlite3

        with sqlite3.connect(w.db) as c:
            for statement in store.MIGRATIONS[1]:
                c.execute(statement)
            c.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    report = w.gate_report(flagged=(A,))  # the baseline's commit is not in this repository
    assert w.triage(report, _api(standin)) == 2
    out = capsys.readouterr().out
    why = "no history store at" if store_state == "missing" else "is of an older schema"
    (line,) = [x for x in out.splitlines() if "good:" in x]
    assert why in line and line.endswith("nothing to bisect from; give --good REV")
    assert w.calls == [] and standin.issues == []
    assert (
        "### No culprit: `test_leaderboard[m256-n3072-k1536]`"
        in (tmp_path / "summary.md").read_text()
    )


def test_good_given_by_hand(tmp_path):
    w = World(tmp_path, slow={A: "c4"})
    assert w.triage(w.gate_report(flagged=(A,)), None, good=w.c["c2"]) == 0
    assert w.calls[0][:2] == (w.c["c2"], w.bad) and w.answer()["findings"][0]["issue"] is None
    with pytest.raises(
        culprits.TriageError, match="not an older commit of --bad's first-parent line"
    ):
        w.triage(w.gate_report(flagged=(A,)), None, good=w.bad)


def test_the_api_failing_is_one_line_and_exit_2_after_the_summary(tmp_path, standin, capsys):
    w = World(tmp_path, slow={A: "c3"})
    w.main_run(w.c["c1"], "pass", 1)
    standin.fail_with = 502
    # main prints a RunFailure as one line, exit with its code (tests/perfgate/test_refusal.py)
    with pytest.raises(RunFailure) as failed:
        w.triage(w.gate_report(flagged=(A,)), _api(standin))
    assert failed.value.code == 2 and capsys.readouterr().err == ""
    assert str(failed.value).startswith(
        f"GitHub API GET /repos/{REPO_NAME}/issues: HTTP 502 Bad Gateway: "
        "stand-in failure: the issue of"
    )
    assert "GitHub API GET" in (tmp_path / "summary.md").read_text()
    answer = w.answer()
    assert answer["exit_code"] == 2 and answer["findings"][0]["culprit"] == w.c["c3"]
    standin.fail_with = None
    bad_token = github.IssuesAPI(standin.url, REPO_NAME, "wrong")
    with pytest.raises(RunFailure, match="HTTP 401 Unauthorized: Bad credentials"):
        w.triage(w.gate_report(flagged=(A,)), bad_token)
    closed = github.IssuesAPI("http://127.0.0.1:9", REPO_NAME, "t0ken")  # nothing listens
    with pytest.raises(RunFailure, match=r"cannot reach http://127\.0\.0\.1:9"):
        w.triage(w.gate_report(flagged=(A,)), closed)


def test_the_step_limit_stops_it_and_says_so(tmp_path, standin, capsys):
    w = World(tmp_path, slow={A: "c3", B: "c5"})
    w.main_run(w.c["c0"], "pass", 0)
    assert w.triage(w.gate_report(), _api(standin), max_steps=2) == 0
    out = capsys.readouterr().out
    assert (
        "perfgate triage: stopped early: the step limit of 2 A/Bs (--max-steps) was reached" in out
    )
    assert len(w.calls) == 2 and standin.issues == []
    answer = w.answer()
    assert answer["stopped"].startswith("the step limit of 2") and answer["steps_used"] == 2
    first, second = answer["findings"]
    assert first["culprit"] is None and "the step limit of 2" in first["bisection"]["message"]
    assert second["note"].startswith("not bisected: the step limit of 2")
    assert "**Stopped early: the step limit of 2 A/Bs" in (tmp_path / "summary.md").read_text()


def test_the_time_budget_stops_before_an_ab_that_would_not_fit():
    now = [0.0]

    def slow_ab(base, head):
        now[0] += 100.0
        return None

    budget = culprits.Budget(99, 250.0, 60.0, clock=lambda: now[0])
    run = budget.wrap(slow_ab)
    run("a", "b")  # 0 + 60 expected <= 250
    run("a", "b")  # 100 + 100 (the slowest so far) <= 250
    with pytest.raises(
        culprits.bs.StepLimit, match=r"time budget of 250 s .* \(about 100 s each\)"
    ):
        run("a", "b")  # 200 + 100 > 250
    assert budget.used == 2 and budget.spent.startswith("the time budget")


@pytest.mark.parametrize(
    ("flagged", "commits", "seconds", "expected"),
    [(1, 7, 3600, 11), (2, 7, 3600, 22), (1, 1000, 3600, 25), (3, 100, 600, 5)],
)
def test_the_default_step_limit(flagged, commits, seconds, expected):
    assert culprits.default_max_steps(flagged, commits, seconds, 120) == expected


def test_nothing_flagged_is_exit_0(tmp_path, standin, capsys):
    w = World(tmp_path)
    assert w.triage(w.gate_report(flagged=()), _api(standin)) == 0
    assert "nothing to do" in capsys.readouterr().out and w.calls == [] and standin.requests == []
    assert "nothing to triage" in (tmp_path / "summary.md").read_text()


def test_a_report_of_another_commit_or_mode_is_refused(tmp_path):
    w = World(tmp_path, slow={A: "c3"})
    report = w.gate_report(flagged=(A,))
    with pytest.raises(culprits.TriageError, match=f"its run measured {w.bad[:12]}, not --bad"):
        w.triage(report, None, bad=w.c["c6"])
    data = json.loads(report.read_text())
    data["summary"]["mode"] = "host"
    report.write_text(json.dumps(data))
    with pytest.raises(
        culprits.TriageError, match="a host-mode report; perfgate ab measures device"
    ):
        w.triage(report, None)
    report.write_text("{}")
    with pytest.raises(culprits.TriageError, match="not a perfgate comparison report"):
        w.triage(report, None)


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], {}, "GITHUB_TOKEN is not set: it opens the issues"),
        ([], {"GITHUB_TOKEN": "x"}, "--repo: not given and GITHUB_REPOSITORY is not set"),
        (["--repo", "no-slash"], {"GITHUB_TOKEN": "x"}, "--repo 'no-slash': expected OWNER/NAME"),
        (
            [],
            {"GITHUB_TOKEN": "x", "GITHUB_REPOSITORY": "a/b", "GITHUB_API_URL": "ftp://x"},
            "ftp://x",
        ),
        (
            ["--no-issues", "--summary", "README.md"],
            {},
            "--summary README.md: is a tracked file or folder of the repository",
        ),
        (["--no-issues", "--repo", "a/b"], {}, "--repo a/b: names where issues go; --no-issues"),
        (["--no-issues", "--json", "REPORT"], {}, "is the input REPORT"),
        (["--no-issues", "--summary", "r/x.md", "--results-dir", "r"], {}, "inside --results-dir"),
        (["--no-issues", "--good", "HEAD~1"], {}, "no GPU visible: each step is an A/B measured"),
        (["--max-steps", "0"], {}, "argument --max-steps: expected an integer > 0, got '0'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, argv, env, message):
    """Through the command line, before any A/B (this checkout's HEAD, a report flagging it)."""
    from perfgate.commands import base
    from perfgate.gate import paths

    for key in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_API_URL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(base, "gpu_available", lambda: False)
    head = culprits.lines.resolve(paths.REPO, "HEAD", "--bad")
    data = make_result({A: gpu_like(1, factor=1.2)}, git_commit=head)
    (tmp_path / "device.json").write_text(json.dumps(data))
    (tmp_path / "base.json").write_text(json.dumps(make_result({A: gpu_like(2)}, git_commit=head)))
    report = tmp_path / "device.compare.json"
    compare.compare_files(tmp_path / "base.json", tmp_path / "device.json", json_out=report)
    monkeypatch.chdir(paths.REPO if "README.md" in argv else tmp_path)
    argv = [a.replace("REPORT", str(report)) for a in argv]
    capsys.readouterr()
    try:
        code = main(["triage", str(report), "--db", str(tmp_path / "none.sqlite"), *argv])
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r").exists()
    assert os.environ.get("GITHUB_TOKEN") == env.get("GITHUB_TOKEN")


def test_an_issue_body_without_its_marker_is_refused(standin):
    with pytest.raises(ValueError, match="must hold its marker"):
        github.publish(_api(standin), "<!-- m -->", "t", "no marker", "note")
    assert standin.requests == []


def test_publish_opens_the_issues_of_a_triage_made_without_a_token(
    tmp_path, standin, monkeypatch, capsys
):
    """The workflow's split: the triage in the GPU container (--no-issues, no token there), then
    `triage --publish` of its JSON outside, with the token; twice: one issue, updated."""
    w = World(tmp_path, slow={A: "c3", B: "c3"})
    w.main_run(w.c["c1"], "pass", 1)
    assert w.triage(w.gate_report(), None) == 0 and standin.requests == []
    saved = tmp_path / "triage.json"
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    monkeypatch.setenv("GITHUB_API_URL", standin.url + "/")
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    capsys.readouterr()
    argv = ["triage", "--publish", str(saved), "--repo", REPO_NAME]
    assert main([*argv, "--summary", str(tmp_path / "issues.md")]) == 0
    assert capsys.readouterr().out == (
        f"perfgate triage: issue #1 opened: https://github.invalid/{REPO_NAME}/issues/1\n"
    )
    assert main(argv) == 0
    assert len(standin.issues) == 1 and len(standin.comments) == 1
    assert standin.issues[0]["body"] == w.answer()["findings"][0]["issue_text"]["body"]
    assert f"- `{w.c['c3'][:12]}`: [#1](" in (tmp_path / "issues.md").read_text()
    standin.fail_with = 403
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HTTP 403 Forbidden" in err
    saved.write_text('{"not": "a triage"}')
    assert main(argv) == 2
    assert "not the JSON of perfgate triage --json" in capsys.readouterr().err
