"""``perfgate bench`` / ``update-baselines`` on the CPU: the no-GPU answer, the pytest command
line, baseline paths, and the whole flow with pytest replaced by a fake that writes results."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from perfgate.__main__ import build_parser, main
from perfgate.atomic import write_json as write_atomic
from perfgate.commands import base, bench
from perfgate.gate import paths
from perfgate.gate.baseline import load
from perfgate.isa import collect
from perfgate.measure import session

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

    monkeypatch.setattr(bench.spawn, "run", refuse)


def test_bench_without_gpu_runs_nothing_and_exits_0(monkeypatch, capsys, no_pytest, tmp_path):
    monkeypatch.setattr(base, "gpu_available", lambda: False)
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU", raising=False)
    assert main(["bench", "--mode", "both", "--results-dir", str(tmp_path)]) == 0
    assert "no GPU" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # no results, no report


def test_bench_without_gpu_is_an_error_when_a_gpu_is_required(monkeypatch, capsys, no_pytest):
    monkeypatch.setattr(base, "gpu_available", lambda: False)
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", "1")
    assert main(["bench"]) == 2
    assert "PERFGATE_REQUIRE_GPU" in capsys.readouterr().err


def test_update_without_gpu_writes_nothing_and_fails(monkeypatch, no_pytest, tmp_path):
    monkeypatch.setattr(base, "gpu_available", lambda: False)
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU", raising=False)
    assert main(["update-baselines", "--baselines-dir", str(tmp_path)]) == 2
    assert list(tmp_path.iterdir()) == []


# -- the command line ---------------------------------------------------------------------------
def test_default_pytest_command():
    cmd = session.pytest_command(
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
    assert session.passthrough(args.pytest_args) == ["-x"]
    cmd = session.pytest_command(
        "leaderboard", Path("l.json"), keyword=args.keyword, markers=args.markers, extra=["-x"]
    )
    assert cmd[cmd.index("-m", 2) + 1] == "slow"  # the user's -m replaces the default
    assert cmd[cmd.index("-k") + 1] == "grid and n7168"
    assert cmd[-1] == "-x" and "--perfgate-mode=leaderboard" in cmd
    assert session.selection_given(args.keyword, args.markers, ["-x"])
    assert not session.selection_given(None, None, [])


def test_mode_option_maps_to_modes():
    assert session.modes("both") == bench.MODE_NAMES
    assert session.modes("leaderboard") == ("leaderboard",)
    with pytest.raises(ValueError, match="mode"):
        session.modes("nosuchmode")


def test_a_refused_mode_does_not_keep_the_next_from_running():
    from perfgate.refusal import Refusal

    ran = []

    def run(mode):
        ran.append(mode)
        if mode == bench.MODE_NAMES[0]:
            raise Refusal(f"no {mode} baseline")
        return 1

    with pytest.raises(Refusal, match=f"no {bench.MODE_NAMES[0]} baseline"):
        session.each_mode("both", run)
    assert ran == list(bench.MODE_NAMES)  # every mode ran, then the refusal rose
    assert session.each_mode("both", lambda mode: {"host": 1}.get(mode, 0)) == 1


def test_rerun_command_names_the_benchmarks_and_every_bench_marker():
    # the rerun of inconclusive grid benchmarks must not be deselected by "not slow"
    cmd = session.pytest_command(
        "device", Path("d.json"), keyword=None, markers="bench", extra=[], targets=NAMES
    )
    assert cmd[3:5] == NAMES and "tests/perf" not in cmd
    assert cmd[cmd.index("-m", 2) + 1] == "bench"


def test_baseline_path_per_device_key():
    assert paths.baseline_path(Path("pb"), "nvidia-h200", "device") == Path(
        "pb/nvidia-h200/device.json"
    )
    assert paths.baseline_path(Path("pb"), "gfx950-mi355x", "leaderboard") == Path(
        "pb/gfx950-mi355x/leaderboard.json"
    )
    for bad in ("", "..", "a/b"):  # a key must never escape perf_baselines
        with pytest.raises(ValueError, match="device_key"):
            paths.baseline_path(Path("pb"), bad, "device")
    with pytest.raises(ValueError, match="mode"):
        paths.baseline_path(Path("pb"), "nvidia-h200", "both")


# -- the flow, with a fake pytest ---------------------------------------------------------------
@pytest.fixture
def fake_gpu(monkeypatch, tmp_path, make_result, gpu_like):
    """A GPU machine whose pytest writes results with the samples in ``state["factor"]``."""
    state = {"factor": 1.0, "rc": 0, "commands": [], "names": NAMES, "fingerprint": {}}
    monkeypatch.setattr(base, "gpu_available", lambda: True)

    def fake_run(cmd, cwd=None, env=None, check=False):
        state["commands"].append(cmd)
        if state["rc"] == 0:
            path = Path(next(a for a in cmd if a.startswith("--benchmark-json=")).split("=", 1)[1])
            mode = next(a for a in cmd if a.startswith("--perfgate-mode=")).split("=", 1)[1]
            rounds = [int(a.split("=")[1]) for a in cmd if a.startswith("--perfgate-rounds=")]
            run = len(state["commands"])  # every run its own samples: independent runs
            names = [n for n in state["names"] if "tests/perf" in cmd or n in cmd]
            factor = state["factor"]
            data = make_result(
                {
                    n: gpu_like(100 * run + i, (rounds or [40])[0], factor=factor(n, run))
                    if callable(factor)
                    else gpu_like(100 * run + i, (rounds or [40])[0], factor=factor)
                    for i, n in enumerate(names)
                },
                mode=mode,
                **state["fingerprint"],
            )
            for b in data["benchmarks"]:
                b.setdefault("extra_info", {}).update(state.get("extra_info", {}))
            write_atomic(path, data)
        assert env["PERFGATE_REQUIRE_GPU"] == "1"
        return subprocess.CompletedProcess(cmd, state["rc"])

    monkeypatch.setattr(bench.spawn, "run", fake_run)
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


def test_update_refuses_a_run_with_variants(fake_gpu, monkeypatch, capsys):
    monkeypatch.setenv("PERFGATE_VARIANTS", "lab.variants")
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 2
    assert capsys.readouterr().err == (
        "perfgate update-baselines: error: PERFGATE_VARIANTS is set; an injected slowdown must "
        "never become a baseline\n"
    )
    assert fake_gpu["commands"] == []
    assert not (fake_gpu["tmp"] / "pb").exists()


def test_update_refuses_results_that_record_an_injection(fake_gpu, capsys):
    # results that say they were slowed on purpose, however they were made
    fake_gpu["extra_info"] = {"injected_fraction_requested": 0.05, "injected_cycles": 1234}
    assert main(["update-baselines", "-k", "leaderboard", *fake_gpu["dirs"]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("perfgate update-baselines: error: the run records an injection (")
    assert "injected_fraction_requested = 0.05" in err
    assert err.endswith("a baseline must time the kernels alone; baseline unchanged\n")
    assert not (fake_gpu["tmp"] / "pb").exists()
    fake_gpu["extra_info"] = {"injected_host_us": 0.0}  # host mode's record of no injection
    assert main(["update-baselines", "-k", "leaderboard", *fake_gpu["dirs"]]) == 0


def _fake_isa(monkeypatch, outcomes: dict[str, int] | None = None) -> list[list[str]]:
    """``perfgate isa`` children that write their --json report, or end with ``outcomes[target]``
    (an exit code; negative: killed by that signal) without writing it."""
    seen: list[list[str]] = []

    def run(cmd, cwd=None, check=False):
        seen.append(cmd[1:])
        target, report = cmd[cmd.index("--target") + 1], Path(cmd[cmd.index("--json") + 1])
        code = (outcomes or {}).get(target, 0)
        if code == 0:
            report.write_text(f"the {target} report\n")
        return subprocess.CompletedProcess(cmd, code)

    monkeypatch.setattr(bench.spawn, "run", run)
    return seen


def test_update_isa_delegates_to_the_isa_gate(monkeypatch, tmp_path, capsys):
    seen = _fake_isa(monkeypatch)
    assert main(["update-baselines", "--isa", "--baselines-dir", str(tmp_path)]) == 0
    assert [cmd[:5] for cmd in seen] == [
        ["-m", "perfgate", "isa", "--target", t]
        for t in collect.TARGETS  # every statically compilable target of the registry
    ]
    for target in collect.TARGETS:
        written = tmp_path / "isa" / f"{target}.json"
        assert written.read_text() == f"the {target} report\n"
    assert capsys.readouterr().out.splitlines()[-1].endswith("; commit them")


@pytest.mark.parametrize(
    ("code", "exit_code", "how"),
    [
        (1, 1, "exited 1"),  # a config that no longer compiles: a regression
        (2, 2, "exited 2"),
        (-signal.SIGKILL, 128 + signal.SIGKILL, "was killed by SIGKILL"),  # was exit 0
        (-signal.SIGSEGV, 128 + signal.SIGSEGV, "was killed by SIGSEGV"),
    ],
)
@pytest.mark.parametrize("failing", range(len(collect.TARGETS)))
def test_update_isa_is_all_or_nothing(monkeypatch, tmp_path, capsys, code, exit_code, how,
                                      failing):  # fmt: skip
    old = {t: f"the old {t} baseline\n" for t in collect.TARGETS}
    (tmp_path / "isa").mkdir()
    for target, text in old.items():
        (tmp_path / "isa" / f"{target}.json").write_text(text)
    target = collect.TARGETS[failing]
    seen = _fake_isa(monkeypatch, {target: code})
    assert main(["update-baselines", "--isa", "--baselines-dir", str(tmp_path)]) == exit_code
    assert len(seen) == failing + 1  # stopped at the failing target
    assert {t: (tmp_path / "isa" / f"{t}.json").read_text() for t in old} == old  # none replaced
    assert sorted(p.name for p in (tmp_path / "isa").iterdir()) == sorted(f"{t}.json" for t in old)
    err = capsys.readouterr().err
    # main answers the failure: the line names the command (update-baselines), as every other
    assert err == (
        f"perfgate update-baselines: error: perfgate isa --target {target} {how}; no ISA "
        "baseline written\n"
    )


def test_update_isa_whose_child_writes_nothing_is_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(
        bench.spawn, "run", lambda cmd, cwd=None, check=False: subprocess.CompletedProcess(cmd, 0)
    )
    assert main(["update-baselines", "--isa", "--baselines-dir", str(tmp_path)]) == 2
    assert "wrote no report; no ISA baseline written" in capsys.readouterr().err
    assert not (tmp_path / "isa").exists()


def test_update_pools_independent_runs_and_records_their_spread(fake_gpu):
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 0
    # a warm-up pass (min_samples rounds, discarded), then baseline_runs = 3 pytest processes
    warmup, *runs = fake_gpu["commands"]
    assert "--perfgate-rounds=10" in warmup and any(a.endswith(".warmup.json") for a in warmup)
    assert len(runs) == 3 and not any("--perfgate-rounds=10" in c for c in runs)
    written = load(fake_gpu["tmp"] / "pb" / "nvidia-h200" / "device.json")
    for bench_ in written["benchmarks"]:
        runs = bench_["extra_info"]["perfgate_runs"]
        assert runs["runs"] == 3 and runs["rounds"] == [40, 40, 40]
        assert bench_["stats"]["rounds"] == len(bench_["stats"]["data"]) == 120
        assert runs["spread"] == (max(runs["medians"]) - min(runs["medians"])) / min(
            runs["medians"]
        )
    assert written["machine_info"]["perfgate"]["fingerprint"]["git_commit"] == "0123abc"


def test_a_leaderboard_run_is_four_processes_pooled(fake_gpu):
    # [tool.perfgate] rounds.leaderboard = 400 over processes.leaderboard = 4: 100 rounds each
    args = ["--mode", "leaderboard", "--no-warmup-pass", *fake_gpu["dirs"]]
    assert main(["update-baselines", "--runs", "2", *args]) == 0
    assert len(fake_gpu["commands"]) == 8
    assert all("--perfgate-rounds=100" in c for c in fake_gpu["commands"])
    base = load(fake_gpu["tmp"] / "pb" / "nvidia-h200" / "leaderboard.json")
    for bench_ in base["benchmarks"]:
        assert bench_["stats"]["rounds"] == 800
        assert bench_["extra_info"]["perfgate_runs"]["rounds"] == [400, 400]
        procs = bench_["extra_info"]["perfgate_processes"]
        assert procs["processes"] == 8 and procs["rounds"] == [100] * 8
    assert main(["bench", *args]) == 0
    assert len(fake_gpu["commands"]) == 12
    run = load(fake_gpu["tmp"] / "results" / "leaderboard.json")
    for bench_ in run["benchmarks"]:
        assert bench_["stats"]["rounds"] == 400
        assert bench_["extra_info"]["perfgate_processes"]["processes"] == 4
    # each process's file is its own, next to the pooled one
    assert len(list((fake_gpu["tmp"] / "results").glob("leaderboard.p[0-9].json"))) == 4


def test_processes_and_rounds_options_split_a_run(fake_gpu):
    args = ["--mode", "leaderboard", "--no-warmup-pass", "--allow-missing-baseline"]
    argv = ["bench", *args, "--rounds-leaderboard", "31", "--processes-leaderboard", "3"]
    assert main([*argv, *fake_gpu["dirs"]]) == 0
    rounds = [a for c in fake_gpu["commands"] for a in c if a.startswith("--perfgate-rounds=")]
    assert rounds == ["--perfgate-rounds=11", "--perfgate-rounds=10", "--perfgate-rounds=10"]
    # device mode keeps one process and its table rounds (no --perfgate-rounds at all)
    fake_gpu["commands"].clear()
    assert main(["bench", "--no-warmup-pass", "--allow-missing-baseline", *fake_gpu["dirs"]]) == 0
    assert len(fake_gpu["commands"]) == 1
    assert not any(a.startswith("--perfgate-rounds") for a in fake_gpu["commands"][0])


def test_a_failing_process_fails_the_run_without_a_comparison(fake_gpu, capsys):
    args = ["--mode", "leaderboard", "--no-warmup-pass", *fake_gpu["dirs"]]
    assert main(["update-baselines", "--runs", "2", *args]) == 0
    fake_gpu["commands"].clear()
    fake_gpu["rc"] = 1  # the first process finds a wrong output
    assert main(["bench", *args]) == 1
    assert len(fake_gpu["commands"]) == 1  # the run stops at the failing process
    assert "a benchmark failed" in capsys.readouterr().err
    assert not (fake_gpu["tmp"] / "results" / "leaderboard.compare.json").exists()


@pytest.mark.parametrize(
    ("rounds", "processes", "message"),
    [(3, 4, "cannot split 3 rounds over 4 processes"), (10, 0, "processes must be an int >= 1")],
)
def test_process_rounds_refuses_what_cannot_be_split(rounds, processes, message):
    with pytest.raises(ValueError, match=message):
        session.process_rounds(rounds, processes)


def test_process_rounds_splits_evenly():
    assert session.process_rounds(400, 4) == [100] * 4
    assert session.process_rounds(10, 4) == [3, 3, 2, 2]
    assert session.process_rounds(7, 1) == [7]


@pytest.mark.parametrize("runs", ["0", "21", "x"])
def test_update_rejects_a_bad_runs_option(fake_gpu, capsys, runs):
    code = None
    try:
        code = main(["update-baselines", "--runs", runs, *fake_gpu["dirs"]])
    except SystemExit as exc:  # argparse: not an int
        code = exc.code
    assert code == 2 and fake_gpu["commands"] == []


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("gpu_name", "NVIDIA H100", "gpu_name 'NVIDIA H200' -> 'NVIDIA H100'"),
        ("arch", "sm100", "arch 'sm90' -> 'sm100'"),
        ("compute_units", 66, "compute_units 132 -> 66"),
    ],
)
def test_update_refuses_a_baseline_of_another_device_by_each_field(
    fake_gpu, capsys, field, value, named
):
    assert main(["update-baselines", "--runs", "1", "--no-warmup-pass", *fake_gpu["dirs"]]) == 0
    path = fake_gpu["tmp"] / "pb" / "nvidia-h200" / "device.json"
    before = path.read_bytes()
    fake_gpu["fingerprint"] = {field: value}
    assert main(["update-baselines", "--runs", "1", "--no-warmup-pass", *fake_gpu["dirs"]]) == 2
    assert f"another device ({named})" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_update_refuses_another_device_unless_asked(fake_gpu, capsys):
    assert main(["update-baselines", "--runs", "2", *fake_gpu["dirs"]]) == 0
    path = fake_gpu["tmp"] / "pb" / "nvidia-h200" / "device.json"
    before = path.read_bytes()
    # same device key, fewer CUs: a MIG slice is not the card the baseline describes
    fake_gpu["fingerprint"] = {"compute_units": 66}
    assert main(["update-baselines", "--runs", "2", *fake_gpu["dirs"]]) == 2
    err = capsys.readouterr().err
    assert "another device" in err and "compute_units 132 -> 66" in err
    assert "--replace-device" in err and path.read_bytes() == before
    args = ["update-baselines", "--runs", "2", "--replace-device", *fake_gpu["dirs"]]
    assert main(args) == 0 and path.read_bytes() != before


def test_update_refuses_a_run_without_a_commit(fake_gpu, capsys):
    fake_gpu["fingerprint"] = {"git_commit": None}
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 2
    assert "no git commit" in capsys.readouterr().err
    assert not (fake_gpu["tmp"] / "pb" / "nvidia-h200").exists()


def test_bench_gives_an_inconclusive_benchmark_more_rounds(fake_gpu):
    assert main(["update-baselines", *fake_gpu["dirs"]]) == 0
    n_base = len(fake_gpu["commands"])
    # NAMES[0] 2.5% slower: near the 2% floor, so more rounds decide it; NAMES[1] unchanged
    fake_gpu["factor"] = lambda name, run: 1.025 if name == NAMES[0] else 1.0
    code = main(["bench", "--rounds-device", "20", *fake_gpu["dirs"]])
    reruns = fake_gpu["commands"][n_base + 2 :]  # after the warm-up pass and the first run
    report = json.loads((fake_gpu["tmp"] / "results" / "device.compare.json").read_text())
    rows = {b["name"]: b for b in report["benchmarks"]}
    assert rows[NAMES[1]]["looks"] == 1 and rows[NAMES[1]]["n_current"] == 20
    # every rerun names only the undecided benchmark and doubles its rounds: 20 -> 40 -> 80
    assert reruns and all(NAMES[0] in c and NAMES[1] not in c for c in reruns)
    assert rows[NAMES[0]]["n_current"] == 20 * 2 ** (rows[NAMES[0]]["looks"] - 1)
    assert rows[NAMES[0]]["looks"] == len(reruns) + 1
    assert code == (1 if rows[NAMES[0]]["verdict"] in ("regression", "inconclusive") else 0)


def test_a_tagged_selection_has_its_own_baseline(fake_gpu, capsys):
    # the grid's baseline must not make the default selection report it missing
    assert main(["update-baselines", "--runs", "1", "--tag", "grid", *fake_gpu["dirs"]]) == 0
    assert (fake_gpu["tmp"] / "pb" / "nvidia-h200" / "device-grid.json").is_file()
    assert not (fake_gpu["tmp"] / "pb" / "nvidia-h200" / "device.json").exists()
    assert main(["bench", "--tag", "grid", *fake_gpu["dirs"]]) == 0
    assert (fake_gpu["tmp"] / "results" / "device-grid.compare.json").is_file()
    assert main(["bench", "--tag", "../x", *fake_gpu["dirs"]]) == 2
    assert "--tag must be" in capsys.readouterr().err


def test_no_warmup_pass_skips_it(fake_gpu):
    assert main(["update-baselines", "--runs", "2", "--no-warmup-pass", *fake_gpu["dirs"]]) == 0
    assert len(fake_gpu["commands"]) == 2
    assert not any("--perfgate-rounds=10" in c for c in fake_gpu["commands"])


def test_every_look_of_bench_is_judged_at_alpha_over_looks(fake_gpu, monkeypatch):
    from perfgate.gate import stats

    assert main(["update-baselines", *fake_gpu["dirs"]]) == 0
    seen = []
    real = stats.compare_samples

    def recording(*args, **kwargs):
        seen.append(kwargs.get("looks"))
        return real(*args, **kwargs)

    monkeypatch.setattr(stats, "compare_samples", recording)
    fake_gpu["factor"] = lambda name, run: 1.025 if name == NAMES[0] else 1.0
    main(["bench", "--rounds-device", "20", "--looks", "3", *fake_gpu["dirs"]])
    assert seen and set(seen) == {3}  # the adaptive looks and the report's verdicts alike
    report = json.loads((fake_gpu["tmp"] / "results" / "device.compare.json").read_text())
    assert report["summary"]["settings"]["looks"] == 3


# -- a baseline over several machines -----------------------------------------------------------
def _machine(fake_gpu, offset: float) -> None:
    """Another machine of the device class: the reducer ``offset`` slower than the first."""
    fake_gpu["factor"] = lambda name, run: offset if "reducer" in name else 1.0


def test_extend_adds_a_second_machines_runs_and_its_offset_to_the_threshold(fake_gpu, capsys):
    dirs = fake_gpu["dirs"]
    assert main(["update-baselines", "--runs", "2", *dirs]) == 0
    path = fake_gpu["tmp"] / "pb" / "nvidia-h200" / "device.json"
    first = load(path)
    _machine(fake_gpu, 1.03)
    assert main(["bench", "--no-warmup-pass", *dirs]) == 1  # one machine's baseline: 3% fails
    capsys.readouterr()
    assert main(["update-baselines", "--runs", "2", "--extend", *dirs]) == 0
    out = capsys.readouterr().out
    assert "device: this machine's runs against the stored baseline:" in out
    assert f"wrote {path} (2 benchmarks, 4 runs pooled: 2 stored + 2 of this machine, " in out
    extended = load(path)
    for old, new in zip(first["benchmarks"], extended["benchmarks"], strict=True):
        runs = new["extra_info"]["perfgate_runs"]
        assert runs["rounds"] == [40] * 4 and new["stats"]["rounds"] == 160
        assert runs["medians"][:2] == old["extra_info"]["perfgate_runs"]["medians"]
        assert new["stats"]["data"][:80] == old["stats"]["data"]
    assert main(["bench", "--no-warmup-pass", *dirs]) == 0  # both machines now pass
    _machine(fake_gpu, 1.0)
    assert main(["bench", "--no-warmup-pass", *dirs]) == 0
    fake_gpu["factor"] = 1.2
    assert main(["bench", "--no-warmup-pass", *dirs]) == 1  # and a real slowdown still fails


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--replace-device"], "--replace-device cannot go with it"),
        (["--allow-drop"], "--allow-drop cannot go with it"),
        (["--isa"], "--isa cannot go with it"),
        (["--runs", "1"], "--extend needs --runs >= 2 (each machine's run-to-run drift), got 1"),
    ],
)
def test_extend_refuses_what_cannot_go_with_it_before_measuring(fake_gpu, capsys, argv, message):
    assert main(["update-baselines", "--extend", *argv, *fake_gpu["dirs"]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert fake_gpu["commands"] == [] and not (fake_gpu["tmp"] / "pb").exists()


@pytest.mark.parametrize(
    ("stored", "fingerprint", "message"),
    [
        (False, {}, "--extend: no baseline at "),
        (True, {"git_commit": "fedcba9"}, "--extend: the stored baseline was recorded with "
         "another git_commit ('0123abc', this run 'fedcba9')"),
        (True, {"torch": "2.12.0"}, "--extend: the stored baseline was recorded with another torch"),
        (True, {"compute_units": 66}, "another compute_units (132, this run 66)"),
    ],
)  # fmt: skip
def test_extend_refuses_runs_it_cannot_pool_and_keeps_the_baseline(
    fake_gpu, capsys, stored, fingerprint, message
):
    path = fake_gpu["tmp"] / "pb" / "nvidia-h200" / "device.json"
    if stored:
        assert main(["update-baselines", "--runs", "2", *fake_gpu["dirs"]]) == 0
    before = path.read_bytes() if stored else None
    capsys.readouterr()
    fake_gpu["fingerprint"] = fingerprint
    assert main(["update-baselines", "--runs", "2", "--extend", *fake_gpu["dirs"]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.endswith("; baseline unchanged\n")
    assert (path.read_bytes() if stored else None) == before and path.exists() == stored


def test_extend_refuses_another_selection(fake_gpu, capsys):
    assert main(["update-baselines", "--runs", "2", *fake_gpu["dirs"]]) == 0
    fake_gpu["names"] = NAMES[:1]
    argv = ["update-baselines", "--runs", "2", "--extend", "-k", "leaderboard", *fake_gpu["dirs"]]
    assert main(argv) == 2
    assert "measured other benchmarks (e.g. tests/perf/test_reducer.py" in capsys.readouterr().err
