"""``lab.scripts.host_report`` on the CPU: the table it prints (the measurement needs a GPU)."""

from __future__ import annotations

import json

import pytest

from lab.scripts import host_report


def test_a_checkout_without_the_before_launcher_prints_no_before_column(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.get_device_name", lambda *a: "fake GPU")
    rows = iter([{"bound": 12.5, "unbound": 40.0, "torch.matmul": 9.25}] * 6)
    monkeypatch.setattr(host_report, "measure_shape", lambda shape: dict(next(rows)))
    assert host_report.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "host us per call, back to back (fake GPU):"
    assert lines[1].split() == ["shape", "bound", "unbound", "torch.matmul"]
    assert lines[2].split()[1:] == ["12.5", "40.0", "9.2"]
    assert not any("nan" in line for line in lines) and len(lines) == 2 + 6


def test_the_before_column_is_shown_where_it_was_measured():
    table = {"m4": {"before": 30.0, "bound": 10.0, "unbound": 20.0, "torch.matmul": 5.0}}
    header, row = host_report.render(table, "g").splitlines()[1:]
    assert header.split() == ["shape", "before", "bound", "unbound", "torch.matmul"]
    assert row.split() == ["m4", "30.0", "10.0", "20.0", "5.0"]
    with pytest.raises(ValueError, match="shape m8 lacks before"):
        host_report.render(
            {**table, "m8": {"bound": 1.0, "unbound": 1.0, "torch.matmul": 1.0}}, "g"
        )


def test_json_goes_through_the_output_check_before_any_measurement(monkeypatch, tmp_path, capsys):
    def no_gpu_work():
        raise AssertionError("measured before the output was checked")

    monkeypatch.setattr("torch.cuda.is_available", no_gpu_work)
    assert host_report.main(["--json", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"lab.scripts.host_report: error: --json {tmp_path}: is a directory, expected a file path\n"
    )
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.get_device_name", lambda *a: "g")
    monkeypatch.setattr(host_report, "measure_shape", lambda shape: {"bound": 1.0})
    assert host_report.main(["--json", str(tmp_path / "t.json")]) == 0
    from kernels.shapes import LEADERBOARD

    assert set(json.loads((tmp_path / "t.json").read_text())) == {s.id for s in LEADERBOARD}
