"""The H200 figure tools on the CPU: the clean clone of a dirty tree, the planted chain, and both
tools' flow with the perfgate subprocesses replaced by fakes that write their reports."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.scripts import bisect_chain, history_gate_check
from perfgate.gate import paths
from tests.perfgate import history_clone

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the tools make git commits")
SHAPE = (16, 2112, 7168)


def _git(cwd: Path, *args: str) -> str:
    return history_clone.git(cwd, *args)


@pytest.fixture
def src(tmp_path):
    """A dirty checkout: a modified tracked file, an untracked one, an ignored one, a deleted
    tracked one, a carried wheel, and the real NVIDIA config table."""
    root = tmp_path / "src"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(paths.REPO / bisect_chain.CONFIGS, root / bisect_chain.CONFIGS)
    (root / ".gitignore").write_text("*.log\n")
    (root / "tracked.txt").write_text("committed\n")
    (root / "gone.txt").write_text("deleted later\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "stale HEAD")
    (root / "tracked.txt").write_text("edited, not committed\n")
    (root / "new.txt").write_text("untracked\n")
    (root / "run.log").write_text("ignored\n")
    (root / "gone.txt").unlink()
    (root / ".whl").mkdir()
    (root / ".whl" / "ruptures.whl").write_bytes(b"wheel")
    return root


def test_clean_clone_commits_the_working_tree_as_it_is(src, tmp_path):
    dest = tmp_path / "clone"
    commit = history_clone.clean_clone(dest, src)
    files = sorted(_git(dest, "ls-files").split())
    assert files == [".gitignore", "kernels/_configs_nvidia.py", "new.txt", "tracked.txt"]
    assert (dest / "tracked.txt").read_text() == "edited, not committed\n"
    assert history_clone.is_clean(dest)
    assert _git(dest, "rev-parse", "HEAD").strip() == commit
    assert _git(dest, "symbolic-ref", "--short", "HEAD").strip() == "main"
    with pytest.raises(history_clone.CloneError, match="exists"):
        history_clone.clean_clone(dest, src)


def test_slow_config_unsplits_one_entry_only():
    text = (paths.REPO / bisect_chain.CONFIGS).read_text()
    slow = bisect_chain.slow_config(text, SHAPE)
    changed = [(a, b) for a, b in zip(text.splitlines(), slow.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and "split_k=14" in changed[0][0]
    assert changed[0][1] == changed[0][0].replace("split_k=14", "split_k=1")
    tables = {}
    for name, source in (("fast", text), ("slow", slow)):
        scope: dict = {}
        exec(compile(source, name, "exec"), scope)  # the edited module still imports
        tables[name] = scope["TUNED"]["sm90"]
    assert tables["slow"][SHAPE].split_k == 1 and tables["fast"][SHAPE].split_k == 14
    assert {k: v for k, v in tables["slow"].items() if k != SHAPE} == {
        k: v for k, v in tables["fast"].items() if k != SHAPE
    }
    with pytest.raises(ValueError, match="expected one entry"):
        bisect_chain.slow_config(text, (1, 2, 3))
    with pytest.raises(ValueError, match="not split"):
        bisect_chain.slow_config(text, (4, 2880, 512))


def test_the_chain_plants_the_slowdown_in_its_middle_commit(src, tmp_path):
    clone = tmp_path / "clone"
    c0, c1, c2 = bisect_chain.make_chain(clone, SHAPE, src)
    assert _git(clone, "rev-list", "--reverse", "HEAD").split() == [c0, c1, c2]
    assert _git(clone, "diff", "--name-only", c0, c1).split() == [str(bisect_chain.CONFIGS)]
    assert _git(clone, "diff", "--name-only", c1, c2).split() == ["BISECT_CHAIN.txt"]
    assert history_clone.is_clean(clone)


def _fake_bisect(answer_index: int | None, seen: list):
    def run(cmd, cwd=None, stdout=None, stderr=None, timeout=None):
        seen.append((cmd, cwd, timeout))
        commits = _git(Path(cwd), "rev-list", "--reverse", "HEAD").split()
        out = Path(cmd[cmd.index("--json") + 1])
        first = None if answer_index is None else commits[answer_index]
        out.write_text(
            json.dumps(
                {
                    "first_bad": first,
                    "message": f"first bad commit: {first}",
                    "steps": [{"base": commits[0], "head": commits[2], "outcome": "regression"}],
                }
            )
        )
        return subprocess.CompletedProcess(cmd, 0)

    return run


@pytest.mark.parametrize(("answer", "code"), [(1, 0), (2, 1), (None, 1)])
def test_bisect_chain_reports_whether_the_middle_commit_was_found(
    src, tmp_path, monkeypatch, answer, code
):
    from perfgate import spawn

    seen: list = []
    monkeypatch.setattr(spawn, "run", _fake_bisect(answer, seen))
    real = bisect_chain.make_chain
    monkeypatch.setattr(bisect_chain, "make_chain", lambda clone, shape: real(clone, shape, src))
    out = tmp_path / "out"
    assert bisect_chain.main(["--out", str(out), "--timeout-s", "99"]) == code
    ((cmd, cwd, timeout),) = seen
    assert cmd[1:5] == ["-m", "perfgate", "bisect", "--good"]
    assert cmd[cmd.index("-k") + 1] == "m16-n2112-k7168" and timeout == 99
    assert not Path(cwd).exists()  # the clone is removed afterwards
    summary = json.loads((out / "bisect-chain.json").read_text())
    assert summary["correct"] is (answer == 1)
    assert summary["found_first_bad"] == (
        None if answer is None else list(summary["commits"].values())[answer]
    )
    assert ("**correct**" in (out / "bisect-chain.md").read_text()) is (answer == 1)


def _fake_perfgate(verdicts: dict[str, list[str]], seen: list):
    """bench writes a compare report with ``verdicts[step]``; the rest writes nothing."""

    def run(cmd, cwd=None, stdout=None, stderr=None, timeout=None, env=None):
        assert env["PERFGATE_REQUIRE_GPU"] == "1"
        seen.append((cmd[3], timeout))
        if cmd[3] == "bench":
            step_dir = Path(cmd[cmd.index("--results-dir") + 1])
            step_dir.mkdir(parents=True, exist_ok=True)
            names = [f"b{i}" for i in range(len(verdicts[step_dir.name]))]
            base = "device.history-baseline.json" if "--against" in cmd else "device.json"
            report = {
                "summary": {
                    "baseline": f"/x/{base}",
                    "exit_code": int("regression" in verdicts[step_dir.name]),
                    "counts": {
                        v: verdicts[step_dir.name].count(v) for v in set(verdicts[step_dir.name])
                    },
                },
                "benchmarks": [
                    {"name": n, "verdict": v, "ratio": 1.0, "threshold": 0.025}
                    for n, v in zip(names, verdicts[step_dir.name], strict=True)
                ],
            }
            (step_dir / "device.compare.json").write_text(json.dumps(report))
            return subprocess.CompletedProcess(cmd, report["summary"]["exit_code"])
        return subprocess.CompletedProcess(cmd, 0)

    return run


def test_history_gate_check_runs_appends_then_judges_against_history(src, tmp_path, monkeypatch):
    from perfgate import spawn

    seen: list = []
    verdicts = {
        "run-1": ["unchanged", "regression"],
        "run-2": ["unchanged", "unchanged"],
        "against": ["unchanged", "unchanged"],
    }
    monkeypatch.setattr(spawn, "run", _fake_perfgate(verdicts, seen))
    real = history_clone.clean_clone
    monkeypatch.setattr(history_gate_check, "clean_clone", lambda d, message: real(d, src, message))
    out = tmp_path / "out"
    assert history_gate_check.main(["--out", str(out), "--runs", "2", "--rounds", "50"]) == 0
    assert [s for s, _ in seen] == ["bench", "bench", "bench", "history", "history", "history"]
    summary = json.loads((out / "history-gate.json").read_text())
    assert summary["false_alarms_history"] == "0 in 2 judgements"
    assert summary["false_alarms_stored"] == "1 in 4 judgements"  # no stored compare: no device
    assert summary["clean_after"] is True and summary["not_run"] == []
    md = (out / "history-gate.md").read_text()
    assert "| against | 0 | `device.history-baseline.json` | 0 | 2 | 0 |" in md


def test_history_gate_check_plans_the_commands_it_documents(tmp_path):
    steps = history_gate_check.plan(tmp_path, 2, "m16", 50)
    assert [name for name, _, _ in steps] == ["run-1", "run-2", "against", "list", "detect", "plot"]
    run1 = steps[0][1]
    assert run1[3:] == [
        *("bench", "-k", "m16", "--rounds-device", "50"),
        *("--results-dir", str(tmp_path / "runs" / "run-1"), "--db", str(tmp_path / "h.sqlite")),
        *("--history", "--history-branch", "main", "--allow-missing-baseline"),
    ]
    assert steps[2][1][-2:] == ["--against", "history"] and "--history" not in steps[2][1]
    assert [gpu for _, _, gpu in steps] == [True, True, True, False, False, False]


def test_history_gate_check_stops_starting_gpu_steps_past_its_budget(src, tmp_path, monkeypatch):
    from perfgate import spawn

    seen: list = []
    monkeypatch.setattr(spawn, "run", _fake_perfgate({}, seen))
    real = history_clone.clean_clone
    monkeypatch.setattr(history_gate_check, "clean_clone", lambda d, message: real(d, src, message))
    out = tmp_path / "out"
    assert history_gate_check.main(["--out", str(out), "--budget-s", "0"]) == 2
    summary = json.loads((out / "history-gate.json").read_text())
    assert summary["not_run"] == ["run-1", "run-2", "run-3", "against"]
    assert [s for s, _ in seen] == ["history"] * 3
