"""``lab.scripts.leaderboard_levels`` on the CPU: the summary's arithmetic and the orchestration of its
workers (faked); the measurement itself needs a GPU."""

from __future__ import annotations

import json
import statistics
import subprocess

import pytest

from lab.scripts import leaderboard_levels as lv


def _rows(levels: dict[int, list[float]], shape: str = "m4-n2880-k512") -> list[dict]:
    return [
        {"process": p, "epoch": e, "shape": shape, "median": m}
        for p, medians in levels.items()
        for e, m in enumerate(medians)
    ]


def test_summarise_separates_the_process_factor_from_the_rest():
    # process 1 sits 6.25% above process 0 on both shapes (a factor common to all shapes); inside
    # process 0 the epochs move by 3.125%. Binary fractions: every ratio is exact.
    rows = _rows({0: [8.0, 8.25, 8.0], 1: [8.5, 8.5, 8.5]}) + _rows(
        {0: [16.0, 16.0], 1: [17.0, 17.0]}, shape="m16-n2112-k7168"
    )
    out = lv.summarise(rows)
    a, b = out["shapes"]["m4-n2880-k512"], out["shapes"]["m16-n2112-k7168"]
    assert a["levels"] == [8.0, 8.5] and b["levels"] == [16.0, 17.0]
    assert a["across"] == b["across"] == 0.0625
    # each level against its shape's median (8.25, 16.5): -1/33 and +1/33 on both shapes
    assert out["factors"] == [8.0 / 8.25 - 1, 8.5 / 8.25 - 1]
    assert a["residual"] < 1e-12 and b["residual"] < 1e-12  # the factor explains it all
    assert a["within"] == statistics.median([0.03125, 0.0]) and b["within"] == 0.0


def test_summarise_refuses_what_it_cannot_compare():
    with pytest.raises(ValueError, match="need >= 2 processes"):
        lv.summarise(_rows({0: [10.0, 10.5]}))
    partial = _rows({0: [8.0], 1: [8.5]}) + _rows({0: [16.0]}, shape="m16-n2112-k7168")
    with pytest.raises(ValueError, match="m16-n2112-k7168: measured by processes \\[0\\], not all"):
        lv.summarise(partial)
    assert lv.summarise(_rows({0: [10.0], 1: [10.5]}))["shapes"]["m4-n2880-k512"]["within"] is None


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

    monkeypatch.setattr(lv.spawn, "run", fake_run)
    out = tmp_path / "levels.json"
    args = ["--processes", "3", "--epochs", "2", "--rounds", "7", "--keep-placement"]
    assert lv.main([*args, "--json", str(out)]) == 0
    assert [c[c.index("--worker") + 1] for c in commands] == ["0", "1", "2"]
    assert all("--keep-placement" in c and c[c.index("--rounds") + 1] == "7" for c in commands)
    summary = json.loads(out.read_text())["summary"]["shapes"]["m4-n2880-k512"]
    assert summary["levels"] == [8.0, 8.25, 8.5] and summary["within"] == 0.0
    printed = capsys.readouterr().out
    assert "across 6.25%" in printed and "process factors (common to all shapes)" in printed


def test_a_failing_worker_fails_the_tool(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr(
        lv.spawn,
        "run",
        lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, stdout="", stderr="wrong output"),
    )
    assert lv.main(["--processes", "2"]) == 2  # a broken worker is no regression
    assert (
        capsys.readouterr().err == "lab.scripts.leaderboard_levels: worker 0 failed: wrong output\n"
    )
