"""lab.scripts.triage_chain on the CPU: the planted chain made for real, its two ``bench`` runs faked
(results, the gate's real comparison report, the store appended by ``history add --verdicts``
as ``bench --history`` would), and ``perfgate triage`` run in this process as the command line
asks, in the clone, against the tool's own issues stand-in over HTTP, with only the A/B faked
(it reads which commits hold the unsplit shape)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from lab.scripts import bisect_chain, triage_chain
from perfgate.gate import compare, paths
from perfgate.hunt import bisect as bs
from tests.perfgate import history_clone
from tests.perfgate.conftest import gpu_like, make_result

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the tool makes git commits")
SHAPE = (16, 2112, 7168)
NAME = f"tests/perf/test_leaderboard.py::test_leaderboard[{bisect_chain.shape_id(SHAPE)}]"


@pytest.fixture
def src(tmp_path):
    root = tmp_path / "src"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(paths.REPO / bisect_chain.CONFIGS, root / bisect_chain.CONFIGS)
    history_clone.git(root, "init", "-q")
    history_clone.git(root, "add", "-A")
    history_clone.git(root, "commit", "-q", "-m", "src")
    return root


def _head(cwd) -> str:
    return history_clone.git(Path(cwd), "rev-parse", "HEAD").strip()


def _slow_at(cwd, commit: str) -> bool:
    text = history_clone.git(Path(cwd), "show", f"{commit}:{bisect_chain.CONFIGS}")
    (line,) = [x for x in text.splitlines() if x.lstrip().startswith(f"{SHAPE}:")]
    return re.search(r"split_k=1\b", line) is not None


class ChainAB:
    """The fake same-job A/B of the chain: 3x slower where the shape is unsplit (or, with
    ``wrong``, only at the last commit)."""

    def __init__(self, cwd, wrong: bool, seen: list):
        self.cwd, self.wrong, self.seen = cwd, wrong, seen

    def slow(self, commit: str) -> bool:
        if self.wrong:
            return commit == _head(self.cwd)
        return _slow_at(self.cwd, commit)

    def __call__(self, base: str, head: str) -> bs.ABResult:
        self.seen.append((base, head))
        ratio = 3.0 if self.slow(head) and not self.slow(base) else 1.0
        verdict = "regression" if ratio > 1 else "unchanged"
        detail = {
            "benchmarks": [{"name": NAME, "verdict": verdict, "ratio": ratio}],
            "summary": {"counts": {"regression": int(ratio > 1)}},
        }
        outcome = bs.REGRESSION if ratio > 1 else bs.UNCHANGED
        return bs.ABResult(base, head, outcome, f"| {NAME} | {ratio - 1:+.0%} |", detail)


def _fake_spawn(monkeypatch, tmp_path, seen: list, c0_exit: int = 0, wrong: bool = False):
    """spawn.run with perfgate's bench and triage faked as the module docstring says; every
    other child (git) runs for real."""
    from perfgate import spawn
    from perfgate.__main__ import build_parser, main
    from perfgate.commands import base
    from perfgate.commands import triage as command
    from perfgate.hunt import culprits

    real = spawn.run
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(make_result({NAME: gpu_like(1)}, git_commit="f" * 40)))

    def bench(cmd, cwd):
        results = Path(cmd[cmd.index("--results-dir") + 1])
        results.mkdir(parents=True, exist_ok=True)
        head = _head(cwd)
        factor = 3.0 if _slow_at(cwd, head) else (1.0 if c0_exit == 0 else 1.3)
        data = make_result({NAME: gpu_like(2, factor=factor)}, git_commit=head)
        (results / "device.json").write_text(json.dumps(data))
        rc = compare.compare_files(
            baseline, results / "device.json", json_out=results / "device.compare.json"
        )
        if "--history" in cmd:
            db = cmd[cmd.index("--db") + 1]
            add = ["history", "add", str(results / "device.json"), "--db", db]
            assert main([*add, "--branch", "main", "--verdicts"]) == 0
        return rc

    def triage(cmd, cwd, env):
        args = build_parser().parse_args(cmd[3:])
        with monkeypatch.context() as m:
            for key in ("GITHUB_API_URL", "GITHUB_TOKEN", "GITHUB_REPOSITORY"):
                m.setenv(key, env[key])
            m.setattr(paths, "REPO", Path(cwd))
            m.setattr(base, "gpu_available", lambda: True)
            m.setattr(
                culprits,
                "subprocess_factory",
                lambda repo, out, announce=None: lambda mode, names: ChainAB(cwd, wrong, seen),
            )
            return command._run(args)

    def run(cmd, cwd=None, stdout=None, stderr=None, timeout=None, env=None, **kwargs):
        if list(cmd[1:3]) != ["-m", "perfgate"]:
            return real(cmd, cwd=cwd, stdout=stdout, stderr=stderr, timeout=timeout, env=env, **kwargs)  # fmt: skip
        seen.append(cmd[3])
        rc = bench(cmd, cwd) if cmd[3] == "bench" else triage(cmd, cwd, env)
        return subprocess.CompletedProcess(cmd, rc)

    monkeypatch.setattr(spawn, "run", run)
    real_chain = bisect_chain.make_chain
    monkeypatch.setattr(
        bisect_chain, "make_chain", lambda clone, shape: real_chain(clone, shape, tmp_path / "src")
    )


@pytest.mark.parametrize(("wrong", "code"), [(False, 0), (True, 1)])
def test_triage_chain_names_the_slow_commit_and_opens_its_issue(
    src, tmp_path, monkeypatch, capsys, wrong, code
):
    seen: list = []
    _fake_spawn(monkeypatch, tmp_path, seen, wrong=wrong)
    out = tmp_path / "out"
    # this test's own temporary directory: a clone another worker's test makes meanwhile is not
    # this one's to remove
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own))
    assert triage_chain.main(["--out", str(out), "--timeout-s", "300"]) == code
    assert list(own.glob("perfgate-triage-chain-*")) == []  # removed
    assert [s for s in seen if isinstance(s, str)] == ["bench", "bench", "triage"]
    summary = json.loads((out / "triage-chain.json").read_text())
    c0, c1, c2 = summary["commits"].values()
    assert summary["exits"] == {"bench C0": 0, "bench C2": 1, "triage": 0}
    assert summary["good"]["commit"] == c0 and "passed the gate" in summary["good"]["why"]
    ab_calls = [s for s in seen if isinstance(s, tuple)]
    assert ab_calls[0] == (c0, c2)  # the premise: bad against the good commit from the store
    issues = json.loads((out / "issues.json").read_text())
    assert len(issues) == 1
    text = capsys.readouterr().out
    if wrong:
        assert summary["found_culprit"] == c2 and not summary["correct"] and "WRONG" in text
        return
    assert summary["found_culprit"] == c1 and summary["correct"]
    assert summary["issue"]["title"] == f"perfgate: {c1[:12]} made test_leaderboard[m16-n2112-k7168] slower on nvidia-h200"  # fmt: skip
    assert f"The issue it would open: **{summary['issue']['title']}**" in text
    assert issues[0]["body"].startswith(f"<!-- perfgate-triage culprit={c1} -->")
    assert "**correct**" in (out / "triage-chain.md").read_text()
    assert (out / "triage.md").read_text().startswith("## perfgate triage: 1 culprit(s)")


def test_triage_chain_refuses_when_c0_does_not_pass_the_gate(src, tmp_path, monkeypatch, capsys):
    seen: list = []
    _fake_spawn(monkeypatch, tmp_path, seen, c0_exit=1)
    out = tmp_path / "out"
    assert triage_chain.main(["--out", str(out)]) == 2
    assert [s for s in seen if isinstance(s, str)] == ["bench", "bench"]  # no triage
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "C0's bench exited 1 (see bench-c0.log)" in err


def test_the_triage_command_it_runs(tmp_path):
    from perfgate.__main__ import build_parser

    cmd = triage_chain.triage_command(tmp_path, 299.6)
    args = build_parser().parse_args(cmd[3:])
    assert args.reports == [tmp_path / "bench-c2" / "device.compare.json"]
    assert (args.time_budget_s, args.max_steps, args.no_issues) == (300.0, 4, False)
    assert args.db == str(tmp_path / "history.sqlite")


# -- the planted triage chain, the explanation real -------------------------------------------
@pytest.fixture
def kernels_src(tmp_path):
    """A repository holding this tree's kernels/ (what a revision's children import)."""
    from tests.perfgate.planted_causes import kernels_repo

    return kernels_repo(tmp_path / "src")


@pytest.mark.skipif(shutil.which("git") is None, reason="the chain is git commits")
def test_the_planted_triage_chains_issue_names_the_planted_cause(
    kernels_src, tmp_path, monkeypatch, capsys
):
    from perfgate.explain import wiring

    seen: list = []
    _fake_spawn(monkeypatch, tmp_path, seen)  # its src fixture's place: tmp_path / "src"
    out = tmp_path / "out"
    assert triage_chain.main(["--out", str(out), "--timeout-s", "600"]) == 0
    (issue,) = json.loads((out / "issues.json").read_text())
    body = issue["body"]
    why = body[body.index(wiring.HEADING) :]
    assert "1. sm90 launch: config split_k 14 -> 1" in why, why
    assert "test_leaderboard[m16-n2112-k7168]" in why
    assert wiring.HEADING in Path(out / "triage.md").read_text()
