"""``tools.leaderboard_levels`` on the CPU: the summary's arithmetic and the orchestration of its
workers (faked); the measurement itself needs a GPU."""

from __future__ import annotations

import json
import subprocess

import pytest

from tools import leaderboard_levels as lv


def _rows(levels: dict[int, list[float]], shape: str = "m4-n2880-k512") -> list[dict]:
    return [
        {"process": p, "epoch": e, "shape": shape, "median": m}
        for p, medians in levels.items()
        for e, m in enumerate(medians)
    ]


def test_summarise_separates_levels_across_and_within_processes():
    # process 1 sits 6.25% above process 0; inside each the epochs move by at most 3.125%
    # (binary fractions, so every spread is exact)
    out = lv.summarise(_rows({0: [8.0, 8.25, 8.0], 1: [8.5, 8.5, 8.75]}))
    s = out["m4-n2880-k512"]
    assert s["levels"] == [8.0, 8.5]
    assert s["across"] == 0.0625
    assert s["within"] == 0.03125


def test_summarise_needs_two_processes_and_allows_single_epochs():
    with pytest.raises(ValueError, match="need >= 2 processes"):
        lv.summarise(_rows({0: [10.0, 10.1]}))
    assert lv.summarise(_rows({0: [10.0], 1: [10.5]}))["m4-n2880-k512"]["within"] is None


def test_one_process_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        lv.main(["--processes", "1"])
    assert info.value.code == 2 and "--processes must be >= 2" in capsys.readouterr().err


def test_without_a_gpu_it_says_so(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert lv.main([]) == 2
    assert "needs a GPU" in capsys.readouterr().err


def test_workers_run_one_after_another_and_are_summarised(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.get_device_name", lambda *a: "fake GPU")
    commands = []

    def fake_run(cmd, **kwargs):
        commands.append(cmd)
        process = int(cmd[cmd.index("--worker") + 1])
        rows = _rows({process: [8.0 + 0.25 * process, 8.0 + 0.25 * process]})
        return subprocess.CompletedProcess(cmd, 0, stdout="log\n" + json.dumps(rows), stderr="")

    monkeypatch.setattr(lv.subprocess, "run", fake_run)
    out = tmp_path / "levels.json"
    args = ["--processes", "3", "--epochs", "2", "--rounds", "7", "--keep-placement"]
    assert lv.main([*args, "--json", str(out)]) == 0
    assert [c[c.index("--worker") + 1] for c in commands] == ["0", "1", "2"]
    assert all("--keep-placement" in c and c[c.index("--rounds") + 1] == "7" for c in commands)
    summary = json.loads(out.read_text())["summary"]["m4-n2880-k512"]
    assert summary["levels"] == [8.0, 8.25, 8.5] and summary["within"] == 0.0
    assert "across 6.25%" in capsys.readouterr().out


def test_a_failing_worker_fails_the_tool(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr(
        lv.subprocess,
        "run",
        lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, stdout="", stderr="wrong output"),
    )
    assert lv.main(["--processes", "2"]) == 1
    assert "worker 0 failed" in capsys.readouterr().err
