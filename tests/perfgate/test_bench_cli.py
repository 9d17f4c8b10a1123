"""``perfgate bench`` / ``update-baselines`` on the CPU: the no-GPU answer, the pytest command
line, baseline paths, and the whole flow with pytest replaced by a fake that writes results."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perfgate import bench
from perfgate.__main__ import build_parser, main
from perfgate.baseline import load, write_atomic
from perfgate.isa import collect

NAMES = [
    "tests/perf/test_leaderboard.py::test_leaderboard[m4-n2880-k512]",
    "tests/perf/test_reducer.py::test_reducer[s8-m16-n2112]",
]


def _parse(*argv: str):
    return build_parser().parse_args(list(argv))


# -- no GPU -------------------------------------------------------------------------------------
@pytest.fixture
def no_pytest(monkeypatch):
    """Fail the test if anything is run."""

    def refuse(*a, **k):
        raise AssertionError(f"ran {a!r} on a machine without a GPU")

    monkeypatch.setattr(bench.subprocess, "run", refuse)


def test_bench_without_gpu_runs_nothing_and_exits_0(monkeypatch, capsys, no_pytest, tmp_path):
    monkeypatch.setattr(bench, "gpu_available", lambda: False)
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU", raising=False)
    assert main(["bench", "--mode", "both", "--results-dir", str(tmp_path)]) == 0
    assert "no GPU" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # no results, no report


def test_bench_without_gpu_is_an_error_when_a_gpu_is_required(monkeypatch, capsys, no_pytest):
    monkeypatch.setattr(bench, "gpu_available", lambda: False)
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", "1")
    assert main(["bench"]) == 2
    assert "PERFGATE_REQUIRE_GPU" in capsys.readouterr().err


def test_update_without_gpu_writes_nothing_and_fails(monkeypatch, no_pytest, tmp_path):
    monkeypatch.setattr(bench, "gpu_available", lambda: False)
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU", raising=False)
    assert main(["update-baselines", "--baselines-dir", str(tmp_path)]) == 2
    assert list(tmp_path.iterdir()) == []


# -- the command line ---------------------------------------------------------------------------
def test_default_pytest_command():
    cmd = bench.pytest_command(
        "device", Path("/r/device.json"), keyword=None, markers=None, extra=[]
    )
    assert cmd[1:4] == ["-m", "pytest", "tests/perf"]
    assert cmd[cmd.index("-m", 2) + 1] == "bench and not slow"  # leaderboard + reducer, no grid
    for flag in ("--benchmark-enable", "--benchmark-save-data", "--perfgate-mode=device"):
        assert flag in cmd
    assert "--benchmark-json=/r/device.json" in cmd
    assert "-k" not in cmd


def test_selection_and_passthrough_reach_pytest():
    args = _parse(
        "bench", "--mode", "leaderboard", "-k", "grid and n7168", "-m", "slow", "--", "-x"
    )
    assert bench.passthrough(args.pytest_args) == ["-x"]
    cmd = bench.pytest_command(
        "leaderboard", Path("l.json"), keyword=args.keyword, markers=args.markers, extra=["-x"]
    )
    assert cmd[cmd.index("-m", 2) + 1] == "slow"  # the user's -m replaces the default
    assert cmd[cmd.index("-k") + 1] == "grid and n7168"
    assert cmd[-1] == "-x" and "--perfgate-mode=leaderboard" in cmd
    assert bench.selection_given(args.keyword, args.markers, ["-x"])
    assert not bench.selection_given(None, None, [])


def test_modes_map_to_suites():
    assert bench.suites("both") == ("device", "leaderboard")
    assert bench.suites("leaderboard") == ("leaderboard",)
    with pytest.raises(ValueError, match="mode"):
        bench.suites("host")


def test_baseline_path_per_device_key():
    assert bench.baseline_path(Path("pb"), "nvidia-h200", "device") == Path(
        "pb/nvidia-h200/device.json"
    )
    assert bench.baseline_path(Path("pb"), "gfx950-mi355x", "leaderboard") == Path(
        "pb/gfx950-mi355x/leaderboard.json"
    )
    for bad in ("", "..", "a/b"):  # a key must never escape perf_baselines
        with pytest.raises(ValueError, match="device_key"):
            bench.baseline_path(Path("pb"), bad, "device")
    with pytest.raises(ValueError, match="suite"):
        bench.baseline_path(Path("pb"), "nvidia-h200", "both")


# -- the flow, with a fake pytest ---------------------------------------------------------------
@pytest.fixture
def fake_gpu(monkeypatch, tmp_path, make_result, gpu_like):
    """A GPU machine whose pytest writes results with the samples in ``state["factor"]``."""
    state = {"factor": 1.0, "rc": 0, "commands": [], "names": NAMES}
    monkeypatch.setattr(bench, "gpu_available", lambda: True)

    def fake_run(cmd, cwd=None, env=None, check=False):
        state["commands"].append(cmd)
        if state["rc"] == 0:
            path = Path(next(a for a in cmd if a.startswith("--benchmark-json=")).split("=", 1)[1])
            mode = next(a for a in cmd if a.startswith("--perfgate-mode=")).split("=", 1)[1]
            data = make_result(
                {n: gpu_like(i, 40, factor=state["factor"]) for i, n in enumerate(state["names"])},
                mode=mode,
            )
            write_atomic(path, data)
        assert env["PERFGATE_REQUIRE_GPU"] == "1"
        return subprocess.CompletedProcess(cmd, state["rc"])

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    state["dirs"] = [
        "--results-dir",
        str(tmp_path / "results"),
        "--baselines-dir",
        str(tmp_path / "pb"),
    ]
    state["tmp"] = tmp_path
    return state


def test_bench_without_baseline_fails_visibly(fake_gpu, capsys):
    assert main(["bench", *fake_gpu["dirs"]]) == 2
    err = capsys.readouterr().err
    assert "no device baseline for device 'nvidia-h200'" in err and "update-baselines" in err
    md = (fake_gpu["tmp"] / "results" / "device.md").read_text()
    assert "no device baseline" in md  # the CI summary shows it too
    assert main(["bench", "--allow-missing-baseline", *fake_gpu["dirs"]]) == 0


def test_update_then_bench_passes_then_catches_a_slowdown(fake_gpu, capsys):
    assert main(["update-baselines", "--mode", "both", *fake_gpu["dirs"]]) == 0
    for suite in ("device", "leaderboard"):
        written = load(fake_gpu["tmp"] / "pb" / "nvidia-h200" / f"{suite}.json")
        assert written["machine_info"]["perfgate"]["mode"] == suite
    assert main(["bench", "--mode", "both", *fake_gpu["dirs"]]) == 0  # same samples: unchanged
    report = json.loads((fake_gpu["tmp"] / "results" / "device.compare.json").read_text())
    assert {b["verdict"] for b in report["benchmarks"]} == {"unchanged"}
    fake_gpu["factor"] = 1.2
    assert main(["bench", *fake_gpu["dirs"]]) == 1


def test_a_failing_benchmark_fails_bench_and_keeps_the_baseline(fake_gpu):
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 0
    path = fake_gpu["tmp"] / "pb" / "nvidia-h200" / "device.json"
    before = path.read_bytes()
    fake_gpu["rc"] = 1  # pytest: a benchmark's output check failed
    fake_gpu["factor"] = 2.0
    assert main(["bench", *fake_gpu["dirs"]]) == 1
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 1
    assert path.read_bytes() == before
    fake_gpu["rc"] = 5  # the selection matched nothing
    assert main(["bench", "-k", "nothing", *fake_gpu["dirs"]]) == 2


def test_narrowed_bench_tolerates_unselected_benchmarks(fake_gpu):
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 0
    fake_gpu["names"] = NAMES[:1]
    assert main(["bench", "-k", "leaderboard", *fake_gpu["dirs"]]) == 0
    assert main(["bench", *fake_gpu["dirs"]]) == 1  # default selection: a vanished benchmark fails


def test_update_refuses_to_drop_benchmarks_unless_asked(fake_gpu, capsys):
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 0
    fake_gpu["names"] = NAMES[:1]
    assert main(["update-baselines", "-k", "leaderboard", *fake_gpu["dirs"]]) == 2
    assert "drop 1 benchmark" in capsys.readouterr().err
    assert main(["update-baselines", "-k", "leaderboard", "--allow-drop", *fake_gpu["dirs"]]) == 0


def test_update_refuses_an_injected_slowdown(fake_gpu, monkeypatch):
    monkeypatch.setenv("MXFP4_BENCH_INJECT_SLOWDOWN", "0.05")
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 2
    assert fake_gpu["commands"] == []
    assert not (fake_gpu["tmp"] / "pb").exists()


def test_update_isa_delegates_to_the_isa_gate(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(
        bench.subprocess,
        "run",
        lambda cmd, cwd=None, check=False: (
            seen.append(cmd[1:]) or subprocess.CompletedProcess(cmd, 0)
        ),
    )
    assert main(["update-baselines", "--isa", "--baselines-dir", str(tmp_path)]) == 0
    assert seen == [
        ["-m", "perfgate", "isa", "--target", t, "--json", str(tmp_path / "isa" / f"{t}.json")]
        for t in collect.TARGETS  # every statically compilable target of the registry
    ]


def test_experiments_report_spread_false_alarms_and_injection(
    monkeypatch, tmp_path, make_result, gpu_like
):
    from perfgate import experiments

    monkeypatch.setattr(bench, "gpu_available", lambda: True)
    seeds = iter(range(100, 200))

    def fake_run(mode, json_path, *, inject, extra, log):
        factor = 1.0 + (inject or 0.0) * 4  # a 20% slowdown when injected: surely flagged
        data = make_result({n: gpu_like(next(seeds), 40, factor=factor) for n in NAMES}, mode=mode)
        write_atomic(json_path, data)
        return 0

    monkeypatch.setattr(experiments, "_run", fake_run)
    assert experiments.main([str(tmp_path), "--runs", "3"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    for mode in ("device", "leaderboard"):
        res = summary["modes"][mode]
        assert res["runs"] == 3
        assert res["false_alarms"]["comparisons"] == 3 * len(NAMES)  # 3 pairs x 2 benchmarks
        assert res["injection"]["flagged"] == len(NAMES)
        assert set(res["spread"]) == set(NAMES)
        assert (tmp_path / "perf_baselines" / "nvidia-h200" / f"{mode}.json").is_file()
    assert "False alarms" in (tmp_path / "summary.md").read_text()


def test_spread():
    from perfgate.experiments import spread

    assert spread([4.0, 5.0, 4.5]) == 0.25
    with pytest.raises(ValueError):
        spread([4.0])  # one run has no spread
