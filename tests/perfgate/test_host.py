"""The host-path count gate (the census perfgate.measure.host_census, the gate
perfgate.gate.host_counts): counts are exact, an injected extra allocation, launch, sync or copy
fails it naming the count and the call path, and a bad baseline is an error.

Counted on the CPU: the interpreter's launch entry is stubbed (a launch is counted, not run), so
these run the real launcher on a real shape in well under a second each."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pytest
import torch

from kernels import gemm
from kernels.gemm_config import GemmConfig
from kernels.shapes import GemmShape
from perfgate.__main__ import main
from perfgate.gate import host_counts as host
from perfgate.gate import paths
from perfgate.measure import host_census as census
from perfgate.measure import host_timer

GPU = torch.cuda.is_available()
SMALL = GemmShape(4, 64, 128)  # one program, no split
SPLIT = GemmShape(16, 64, 512)  # split in two below, so the reducer is on the path
BASELINES = Path(__file__).resolve().parents[2] / "perf_baselines"


@pytest.fixture(scope="module", autouse=True)
def split_config():
    """SPLIT splits K whatever the config model picks for the interpreter."""
    original = gemm.select_config

    def select(m, n, k, info):
        if (m, n, k) == SPLIT:
            return GemmConfig(16, 64, 128, split_k=2)
        return original(m, n, k, info)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gemm, "select_config", select)
        gemm.clear_launch_cache()
        yield
    gemm.clear_launch_cache()


@pytest.fixture(scope="module")
def clean(split_config) -> dict:
    return census.collect([SMALL, SPLIT])


def _inject(monkeypatch, extra) -> None:
    """Run ``extra(out)`` inside every bound launch, after the real work."""
    original = gemm._Bound.__call__

    def call(self, a, b, bs, out):
        result = original(self, a, b, bs, out)
        extra(result)
        return result

    monkeypatch.setattr(gemm._Bound, "__call__", call)


def _sync(out) -> None:
    # On the CPU torch.cuda.synchronize raises (no CUDA), but the call is what is counted
    with contextlib.suppress(Exception):
        torch.cuda.synchronize()


@pytest.mark.parametrize(
    ("category", "extra", "leaf"),
    [
        ("allocations", lambda out: torch.empty(16, device=out.device), "aten.empty"),
        ("launches", lambda out: out.zero_(), "aten.zero_"),  # a torch op that runs a kernel
        ("syncs", _sync, "torch.cuda.synchronize"),
        ("syncs", lambda out: out[0, 0].item(), "aten._local_scalar_dense"),  # a host read
        (
            "copies",
            lambda out: out.to("meta" if out.device.type == "cpu" else "cpu"),
            "aten._to_copy",
        ),
    ],
    ids=["allocation", "launch", "synchronize", "item", "copy"],
)
def test_an_injected_extra_fails_naming_count_and_path(monkeypatch, clean, category, extra, leaf):
    _inject(monkeypatch, extra)
    failures, _ = host.compare(clean, census.collect([SMALL, SPLIT]))
    grown = [f for f in failures if f" {category} " in f and leaf in f]
    assert grown, failures
    # the line names the shape, the count (before -> after) and the path from custom_kernel
    assert grown[0].startswith(f"{SMALL.id}: {category} 0 -> 1 per call at gemm.custom_kernel > ")


def test_an_extra_triton_launch_fails(monkeypatch, clean):
    """A second launch of the GEMM kernel itself (a Triton launch, not a torch op)."""
    original = gemm._Bound.__call__

    def twice(self, a, b, bs, out):
        self._launch_jit(a, b, bs, original(self, a, b, bs, out))
        return out

    monkeypatch.setattr(gemm._Bound, "__call__", twice)
    current = census.collect([SMALL])
    failures, _ = host.compare(clean, current, host.CATEGORIES[:4])
    assert host.totals(current)[SMALL.id]["launches"] == 2
    assert any(f.startswith(f"{SMALL.id}: launches ") and "_launch_jit" in f for f in failures), (
        failures
    )


def test_counts_are_exact_and_repeatable(clean):
    again = census.collect([SMALL, SPLIT])
    assert again == clean
    totals = host.totals(clean)
    # the launcher's whole budget: one GEMM launch (plus the reducer for split-K), the output,
    # nothing copied, nothing waited for
    assert totals[SMALL.id] | {"python_calls": 0} == {
        "launches": 1, "allocations": 1, "copies": 0, "syncs": 0, "python_calls": 0
    }  # fmt: skip
    assert totals[SPLIT.id]["launches"] == 2
    assert totals[SPLIT.id]["allocations"] == 1  # the partials are a reused workspace


def test_a_smaller_count_is_an_improvement(clean):
    fewer = json.loads(json.dumps(clean))
    path, n = next(iter(clean["shapes"][SMALL.id]["python_calls"].items()))
    fewer["shapes"][SMALL.id]["python_calls"][path] = n - 1
    failures, improvements = host.compare(clean, fewer)
    assert not failures
    assert improvements == [f"{SMALL.id}: python_calls {n} -> {n - 1} per call at {path}"]


def test_a_missing_shape_fails(clean):
    fewer = json.loads(json.dumps(clean))
    del fewer["shapes"][SPLIT.id]
    assert host.compare(clean, fewer)[0] == [f"{SPLIT.id}: missing from this run"]
    # and the other way: a shape counted now that the baseline lacks is named, never skipped
    assert host.compare(fewer, clean)[0] == [
        f"{SPLIT.id}: counted in this run, but the baseline has no counts for it "
        "(record them: python -m perfgate host --update)"
    ]


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: "{not json", "unreadable"),
        (lambda d: {**d, "schema": 99}, "schema 1"),
        (lambda d: {**d, "shapes": {}}, "at least one shape"),
        (lambda d: {k: v for k, v in d.items() if k != "python"}, "Python version"),
        (
            lambda d: {**d, "shapes": {SMALL.id: {**d["shapes"][SMALL.id], "copies": {"x": -1}}}},
            "counts >= 0",
        ),
        (lambda d: {**d, "shapes": {SMALL.id: {"launches": {}}}}, "exactly launches"),
    ],
    ids=["corrupt", "schema", "no-shapes", "no-python", "negative", "categories"],
)
def test_a_bad_baseline_is_an_error(tmp_path, clean, mutate, match):
    bad = mutate(clean)
    path = tmp_path / "host_counts.json"
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    with pytest.raises(host.CountError, match=match):
        host.load(path)


def test_another_device_or_python_is_not_compared(clean):
    with pytest.raises(host.CountError, match="not comparable"):
        host.compare({**clean, "device_key": "other-" + clean["device_key"]}, clean)
    with pytest.raises(host.CountError, match="record a baseline with this Python"):
        host.compare({**clean, "python": "2.7"}, clean)


def test_cli_exit_codes(tmp_path, capsys, monkeypatch, clean):
    monkeypatch.setattr(census, "collect", lambda: clean)
    good = tmp_path / "good.json"
    assert main(["host", "--json", str(good)]) == 0
    assert host.load(good) == clean
    assert main(["host", "--check", str(good)]) == 0
    grown = json.loads(json.dumps(clean))
    grown["shapes"][SMALL.id]["launches"] = {}  # the baseline had none: this run grew
    (tmp_path / "grown.json").write_text(json.dumps(grown))
    assert main(["host", "--check", str(tmp_path / "grown.json")]) == 1
    assert "REGRESSION: m4-n64-k128: launches 0 -> 1" in capsys.readouterr().err
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe")
    assert main(["host", "--check", str(tmp_path / "bad.json")]) == 2
    assert "perfgate host: error:" in capsys.readouterr().err


def test_an_interpreter_that_cannot_run_the_kernels_is_refused_before_counting(capsys, monkeypatch):
    # no GPU here (planted) and a triton whose interpreter cannot run the kernels (planted):
    # one line, exit 2, nothing counted
    import kernels.interpreter
    from perfgate.commands import base

    def never():
        raise AssertionError("counted in an interpreter that cannot run the kernels")

    monkeypatch.setattr(census, "collect", never)
    monkeypatch.setattr(base, "gpu_available", lambda: False)
    monkeypatch.setattr(kernels.interpreter, "triton_version", lambda: "3.5.1")
    assert main(["host", "--gate"]) == 2
    assert capsys.readouterr().err == (
        "perfgate host: error: no GPU on this machine, and triton 3.5.1's interpreter cannot run "
        "the kernels (tl.dot_scaled on the CPU needs triton >= 3.8); run on a GPU, or install "
        "triton>=3.8\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--json", "/proc/x.json"], "--json /proc/x.json: cannot write in /proc"),
        (
            ["--json", "{d}/b.json", "--check", "{d}/b.json"],
            "--json {d}/b.json is the input --check",
        ),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_counting(
    tmp_path, capsys, monkeypatch, argv, message
):
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc on this system")

    def never():
        raise AssertionError("counted before the output was checked")

    monkeypatch.setattr(census, "collect", never)
    (tmp_path / "b.json").write_text("{}")
    argv = [a.format(d=tmp_path) for a in argv]
    assert main(["host", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("perfgate host: error: ")
    assert message.format(d=tmp_path) in err
    assert (tmp_path / "b.json").read_text() == "{}"


def test_the_committed_baseline_of_this_device_holds():
    """The CPU gate: this machine's counts against perf_baselines/<device-key>/host_counts.json.
    Launches, allocations, copies and syncs always; python_calls under the Python it was
    recorded with (call names are CPython's)."""
    current = census.collect()
    path = BASELINES / current["device_key"] / paths.HOST_COUNTS_NAME
    if not path.is_file():
        pytest.skip(f"no committed host count baseline for {current['device_key']}")
    baseline = host.load(path)
    same_python = baseline["python"] == census.python_version()
    categories = host.CATEGORIES if same_python else host.CATEGORIES[:4]
    failures, _ = host.compare(baseline, current, categories)
    assert not failures, "\n".join(failures)
    if not same_python:
        pytest.skip(f"python_calls recorded under Python {baseline['python']}, not {sys.version}")


# -- the host timing mode ----------------------------------------------------------------------------
def test_host_timed_adds_host_seconds_per_call_cycling_inputs():
    from perfgate.measure.clock import DeviceClock

    seen, ticks, clock = [], iter([10.0, 12.5]), DeviceClock()
    timed = host_timer.HostTimed(
        lambda x: seen.append(x) or x,
        [(1,), (2,), (3,)],
        calls=5,
        clock=clock,
        now=lambda: next(ticks),
    )
    assert timed() == 2 and timed.last == 2
    assert seen == [1, 2, 3, 1, 2]  # distinct inputs back to back, as the harness regenerates them
    assert clock.read() == 0.5  # 2.5 s over 5 calls (exact on the clock's quantum)
    assert timed.history == [(0.5, None)]
    with pytest.raises(ValueError, match="calls >= 1"):
        host_timer.HostTimed(print, [], calls=3)


def test_host_timed_with_a_reference_adds_the_ratio_of_interleaved_times():
    from perfgate.measure.clock import DeviceClock

    order, clock = [], DeviceClock()
    # ticks: ref 1 s then work 3 s, ref 1 s then work 5 s: 8 s of work over 2 s of reference
    ticks = iter([0.0, 1.0, 4.0, 4.0, 5.0, 10.0])
    timed = host_timer.HostTimed(
        lambda x: order.append(("work", x)) or x,
        [(1,), (2,)],
        calls=2,
        clock=clock,
        now=lambda: next(ticks),
        reference=lambda: order.append(("ref", None)),
    )
    assert timed() == 2
    assert order == [("ref", None), ("work", 1), ("ref", None), ("work", 2)]  # call by call
    assert clock.read() == pytest.approx(4.0 * host_timer.REFERENCE_SCALE_S, rel=1e-9)
    assert timed.history == [(4.0, 1.0)]  # seconds per call of each, for the report
    with pytest.raises(TypeError, match="reference must be callable"):
        host_timer.HostTimed(print, [(1,)], reference=3)


def test_host_timed_refuses_a_reference_that_takes_no_time():
    timed = host_timer.HostTimed(
        lambda: None, [()], calls=1, now=lambda: 1.0, reference=lambda: None
    )
    with pytest.raises(RuntimeError, match=r"reference path took 0\.0 s"):
        timed()


def test_the_reference_path_reads_the_operands_and_allocates_the_output():
    import torch

    a, b = torch.zeros(4, 8, dtype=torch.bfloat16), torch.zeros(6, 8, dtype=torch.bfloat16)
    key, out = host_timer.reference_path((a, b, None), "cpu")()
    assert out.shape == (4, 6) and out.dtype == torch.bfloat16
    assert key[0][:3] == ((4, 8), (8, 1), torch.bfloat16)
    with pytest.raises(ValueError, match="at least A and B"):
        host_timer.reference_path((a,), "cpu")


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("", 0.0),
        ("5", 5 / 1e6),
        (" 0.5 ", 0.5 / 1e6),
        ("0", 0.0),
    ],  # unset, whole, fraction, explicit 0
)
def test_host_delay_parses_microseconds(raw, seconds):
    assert host_timer.host_delay_seconds({host_timer.INJECT_HOST_ENV: raw}) == seconds


@pytest.mark.parametrize("raw", ["five", "-1", "1e6", "nan"])
def test_host_delay_refuses_nonsense(raw):
    with pytest.raises(ValueError, match=host_timer.INJECT_HOST_ENV):
        host_timer.host_delay_seconds({host_timer.INJECT_HOST_ENV: raw})


def test_with_host_delay_returns_the_calls_result():
    assert host_timer.with_host_delay(lambda a, b: a + b, 1e-6)(2, 3) == 5


@pytest.mark.parametrize(
    ("mode", "group", "timed"),
    [
        ("host", "host", True),  # the host group is the host mode's
        ("host", "leaderboard", False),  # device-time groups are never host samples
        ("host", None, False),
        ("device", "host", False),  # and host samples are never device time
        ("leaderboard", "host", False),
        ("device", "leaderboard", True),
        ("leaderboard", "reducer", True),
        ("device", None, True),  # an unnamed group belongs to the device-time modes
    ],
)
def test_each_mode_times_its_own_groups(mode, group, timed):
    from perfgate import modes

    assert modes.times_group(mode, group) is timed


def test_the_leaderboard_flush_outlasts_the_host_path():
    from perfgate.measure import flush

    # 2 GiB, at least 2x the cache: about 0.5 ms of GPU writes against a 10-90 us host path
    assert flush.LEADERBOARD_FLUSH_BYTES == 2 << 30
    assert flush.flush_bytes(256 << 20) < flush.LEADERBOARD_FLUSH_BYTES


def test_gate_without_a_baseline_says_how_to_record_one(tmp_path, capsys, monkeypatch, clean):
    monkeypatch.setattr(census, "collect", lambda: clean)
    assert main(["host", "--gate", "--baselines-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no host count baseline for device {clean['device_key']!r}" in err
    assert "python -m perfgate host --update" in err
    assert main(["host", "--update", "--baselines-dir", str(tmp_path)]) == 0
    path = tmp_path / clean["device_key"] / paths.HOST_COUNTS_NAME
    assert host.load(path) == clean  # exactly what was counted
    assert main(["host", "--gate", "--baselines-dir", str(tmp_path)]) == 0


def test_update_refuses_to_compare_too(tmp_path, capsys, monkeypatch, clean):
    monkeypatch.setattr(census, "collect", lambda: clean)
    assert main(["host", "--update", "--gate", "--baselines-dir", str(tmp_path)]) == 2
    assert "--update records a baseline" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written


def test_a_lost_launch_cache_fails(monkeypatch, clean):
    """The launcher's most common regression: every call validated and bound again."""

    class Forgetful(dict):
        def __setitem__(self, key, value):  # the binding is made, never kept
            pass

    monkeypatch.setattr(gemm, "_BOUND", Forgetful())
    failures, _ = host.compare(clean, census.collect([SMALL, SPLIT]))
    grown = {line.split(" per call at ")[1] for line in failures if " python_calls " in line}
    assert "gemm.custom_kernel > gemm.gemm_a16wfp4 > gemm._validate" in grown
    # the split-K workspace is allocated again on every call: an allocation the baseline lacks
    assert any(f.startswith(f"{SPLIT.id}: allocations 0 -> 1") for f in failures), failures


def _native_reducer_of_this_device(tmp_path):
    """The native reducer the bound call plans with on the device under test: the GPU build on a
    GPU (its launches take device pointers; skip without a build, fail under
    MXFP4_REQUIRE_NATIVE_REDUCER), its host build on the CPU (host pointers)."""
    from kernels import splitk
    from kernels.reducer import host as host_build

    if not GPU:
        return host_build.load_host(tmp_path)
    splitk.reset_backend_choice()
    choice = splitk._choice(None)  # raises under MXFP4_REQUIRE_NATIVE_REDUCER without a build
    if choice.backend != "native":
        pytest.skip(f"native reducer not built: {choice.reason}; run `nox -s build`")
    return choice.native


def test_a_planned_native_reduction_is_counted(monkeypatch, tmp_path):
    """The bound split-K call reduces through a planned native launch: a C-level partial that
    sys.setprofile cannot see. The gate must still count it, as one launch on its own path."""
    from kernels import splitk

    lib = _native_reducer_of_this_device(tmp_path)
    monkeypatch.setattr(splitk, "_choice", lambda device: splitk._Choice("native", "test", lib))
    counts = census.collect([SPLIT])
    launches = counts["shapes"][SPLIT.id]["launches"]
    assert host.totals(counts)[SPLIT.id]["launches"] == 2, launches
    assert [p for p in launches if p.endswith("perfgate.host._CountedPlan.__call__")], launches
    assert not gemm._BOUND, "a binding with a counting plan outlived the count"
