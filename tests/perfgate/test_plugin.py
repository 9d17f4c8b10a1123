"""perfgate.plugin on the CPU: option validation and mode defaults, loading (``-p`` and the
tests/perf conftest, never twice), the collection refusal of benchmarks without the device clock,
the machine_info block, the NaN-safe reducer oracle, set-bytes arithmetic and the leaderboard
mode's round-robin setup/teardown."""

from __future__ import annotations

import pytest
import torch

from perfgate import modes, plugin
from perfgate.catalog import GemmShape, ReducerCase, gemm_set_bytes, reducer_set_bytes
from perfgate.commands import bench
from perfgate.gate import baseline
from perfgate.measure import harness as prepared
from perfgate.plugin import RoundRobin, Settings

pytest_plugins = ["pytester"]

# what tests/conftest.py declares (pytest reads pytest_plugins only from the root conftest)
ROOT_CONFTEST_LINE = 'pytest_plugins = ("perfgate.plugin",)\n'


def _bf16(bits: list[int]) -> torch.Tensor:
    return torch.tensor([b - 0x10000 if b >= 0x8000 else b for b in bits], dtype=torch.int16).view(
        torch.bfloat16
    )


# -- modes and settings -------------------------------------------------------------------------
def _shipped_modes() -> tuple[str, ...]:
    """The modes pyproject.toml gives rounds to, read from the file itself (not from the code)."""
    from perfgate.checkout import tomllib  # tomli on Python 3.10
    from perfgate.gate.paths import PYPROJECT

    return tuple(tomllib.loads(PYPROJECT.read_text())["tool"]["perfgate"]["rounds"])


def test_modes_are_defined_once_and_shared():
    assert _shipped_modes() == modes.MODE_NAMES
    assert modes.MODE_NAMES[:3] == ("device", "leaderboard", "host")  # the modes of record
    assert bench.MODE_NAMES is modes.MODE_NAMES
    assert baseline.MODES is modes.MODE_NAMES
    with pytest.raises(
        ValueError, match=f"mode must be one of {', '.join(_shipped_modes())}, got 'wall'"
    ):
        modes.get("wall")


@pytest.mark.parametrize("name", ["a b", "", "1st"])
def test_mode_rejects_bad_names(name):
    with pytest.raises(ValueError, match="mode name must be a plain identifier"):
        modes.Mode(name, "host time per call")


def test_every_mode_has_its_rounds_in_the_settings_table():
    # the rounds keys are derived from the modes, and pyproject.toml must give each a value
    from perfgate.gate import settings

    assert set(settings.defaults().rounds) == set(modes.MODE_NAMES)
    assert set(settings.defaults().processes) == set(modes.MODE_NAMES)


@pytest.mark.parametrize("mode, rounds", [("device", 200), ("leaderboard", 400), ("host", 200)])
def test_settings_default_rounds_per_mode(mode, rounds):
    s = Settings.from_options(mode, None, 5)
    assert (s.mode.name, s.rounds, s.warmup, s.use_graph) == (mode, rounds, 5, True)


def test_settings_keep_explicit_values():
    s = Settings.from_options("leaderboard", 10, 0, no_graph=True)
    assert (s.mode.name, s.rounds, s.warmup, s.use_graph) == ("leaderboard", 10, 0, False)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("device", 1, 5),
            "--perfgate-rounds must be >= 10 (min_samples), got 1: rerun with at least 10 rounds",
        ),
        (
            ("device", 9, 5),
            "--perfgate-rounds must be >= 10 (min_samples), got 9: rerun with at least 10 rounds",
        ),
        (("device", None, -1), "--perfgate-warmup must be in [0, 1000], got -1"),
        (("device", None, 1001), "--perfgate-warmup must be in [0, 1000], got 1001"),
        (
            ("device", 100_001, 5),
            "--perfgate-rounds must be <= 100000 (the most any look measures), got 100001",
        ),
        (("wall", None, 5), f"mode must be one of {', '.join(_shipped_modes())}, got 'wall'"),
    ],
)
def test_settings_refuse_bad_options(args, message):
    with pytest.raises(ValueError) as info:
        Settings.from_options(*args)
    assert str(info.value) == message


# -- the plugin in a pytest run -----------------------------------------------------------------
BENCH_OK = """
import pytest
from perfgate.measure.clock import device_clock

@pytest.mark.benchmark(group="g", timer=device_clock)
def test_timed(benchmark):
    pass

def test_plain():
    pass
"""

BENCH_WITHOUT_CLOCK = """
import pytest

@pytest.mark.benchmark(group="g")
def test_host_timed(benchmark):
    pass

def test_uses_harness(harness):
    pass
"""


def test_options_appear_once_with_p_and_conftest(pytester):
    pytester.makeconftest(ROOT_CONFTEST_LINE)
    for args in ((), ("-p", "perfgate.plugin")):
        result = pytester.runpytest(*args, "--help")
        assert result.ret == 0
        assert sum("--perfgate-mode" in line for line in result.outlines) == 1


def test_a_whole_tree_run_sees_the_options(pytester):
    # the suite is collected from its root: the plugin's options must exist before parsing
    # (a conftest below the root that imported the plugin broke exactly this)
    pytester.makeconftest(ROOT_CONFTEST_LINE)
    pytester.mkdir("perf").joinpath("test_b.py").write_text(BENCH_OK, encoding="utf-8")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("--co", "-q")
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(["*test_plain*"])


def test_plugin_alone_registers_options_and_validates(pytester):
    pytester.makepyfile(test_x=BENCH_OK)
    result = pytester.runpytest("-p", "perfgate.plugin", "--perfgate-rounds=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perfgate-rounds must be >= 10 (min_samples), got 1*"])
    result = pytester.runpytest("-p", "perfgate.plugin", "--perfgate-rounds=3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # a 3-round run could never be judged
    result = pytester.runpytest("-p", "perfgate.plugin", "--perfgate-mode=wall")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = pytester.runpytest("-p", "perfgate.plugin", "--perfgate-warmup=-1", "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_without_the_plugin_its_options_are_unknown(pytester):
    result = pytester.runpytest("--perfgate-mode=device")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_device_clock_benchmarks_are_collected(pytester):
    pytester.makepyfile(test_x=BENCH_OK)
    result = pytester.runpytest("-p", "perfgate.plugin", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["test_x.py::test_timed", "test_x.py::test_plain"])


def test_benchmark_without_the_device_clock_is_refused(pytester):
    pytester.makepyfile(test_y=BENCH_WITHOUT_CLOCK)
    result = pytester.runpytest("-p", "perfgate.plugin", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_y.py::test_host_timed: every perfgate benchmark must be marked "
            "@pytest.mark.benchmark(timer=perfgate.measure.clock.device_clock, group=...) (1 more)"
        ]
    )


def test_clockless_benchmarks_names_only_the_offenders(pytester):
    pytester.makepyfile(test_x=BENCH_OK, test_y=BENCH_WITHOUT_CLOCK)
    items, _ = pytester.inline_genitems("-p", "no:perfgate.plugin")
    assert plugin.clockless_benchmarks(items) == [
        "test_y.py::test_host_timed",
        "test_y.py::test_uses_harness",
    ]


# -- machine_info -------------------------------------------------------------------------------
def test_machine_info_block():
    fp = {"device_key": "nvidia-h200", "gpu_name": "NVIDIA H200"}
    assert plugin.machine_info_block("leaderboard", fp) == {
        "schema": 1,
        "device_key": "nvidia-h200",
        "mode": "leaderboard",
        "fingerprint": fp,
    }
    with pytest.raises(ValueError, match="got 'suite'"):
        plugin.machine_info_block("suite", fp)


# -- checks and the oracle ----------------------------------------------------------------------
def test_reducer_oracle_sums_in_split_order():
    partials = torch.tensor([1e8, 1.0, -1e8, 0.5]).reshape(4, 1, 1)
    # in order: (1e8 + 1) rounds back to 1e8 in fp32, so the 1 is lost: 0.5, not 1.5
    assert prepared.reducer_oracle(partials).view(torch.int16).tolist() == [[0x3F00]]


def test_check_exact_matches_nan_by_position_not_by_bits():
    ref = _bf16([0x3F80, 0xFFFF, 0x0000])  # torch's CPU cast writes NaN as 0xFFFF
    out = _bf16([0x3F80, 0x7FC0, 0x0000])  # the reducers write 0x7FC0
    assert not torch.equal(out, ref)  # what the old oracle check refused
    prepared.check_exact(out, ref, "nan")


@pytest.mark.parametrize(
    "bits, why",
    [
        ([0x3F81, 0xFFFF, 0x0000], "one ulp off"),
        ([0x3F80, 0x3F80, 0x0000], "a number where the reference is NaN"),
        ([0x3F80, 0xFFFF, 0x8000], "-0 for +0"),
    ],
)
def test_check_exact_refuses_any_other_difference(bits, why):
    ref = _bf16([0x3F80, 0xFFFF, 0x0000])
    with pytest.raises(AssertionError, match=r"wrong reducer output \(copy 3\).*1 of 3 elements"):
        prepared.check_exact(_bf16(bits), ref, "copy 3")


def test_check_gemm_uses_the_leaderboard_rule():
    ref = torch.tensor([[1.0, float("nan")]], dtype=torch.bfloat16)
    prepared.check_gemm(torch.tensor([[1.01, float("nan")]], dtype=torch.bfloat16), ref, "ok")
    with pytest.raises(AssertionError, match=r"wrong GEMM output \(bad\)"):
        prepared.check_gemm(torch.tensor([[1.1, float("nan")]], dtype=torch.bfloat16), ref, "bad")


# -- sizes --------------------------------------------------------------------------------------
def test_gemm_set_bytes():
    # A bf16 16x7168, B fp4 2112x7168/2, scales 2112x7168/32, C bf16 16x2112
    assert gemm_set_bytes(GemmShape(16, 2112, 7168)) == 229376 + 7569408 + 473088 + 67584


def test_reducer_set_bytes():
    assert reducer_set_bytes(ReducerCase(14, 16, 2112)) == 14 * 16 * 2112 * 4 + 16 * 2112 * 2


# -- leaderboard mode's rounds ------------------------------------------------------------------
class _Target:
    last = None


def test_round_robin_flushes_rotates_and_checks_each_round():
    events: list = []
    target = _Target()
    checked: list = []
    rr = RoundRobin(
        arg_sets=[("a",), ("b",), ("c",)],
        refs=["A", "B", "C"],
        check=lambda out, ref, what: checked.append((out, ref, what)),
        flush=lambda: events.append("flush"),
        target=target,
        synchronize=lambda: events.append("sync"),
    )
    for i, expect in enumerate(["a", "b", "c", "a"]):
        assert rr.setup() == ((expect,), {})
        target.last = expect.upper() if i != 3 else "wrong"
        rr.teardown()
    assert events == ["flush", "sync"] * 4
    assert checked == [
        ("A", "A", "round on input set 0"),
        ("B", "B", "round on input set 1"),
        ("C", "C", "round on input set 2"),
        ("wrong", "A", "round on input set 0"),
    ]


def test_round_robin_needs_one_reference_per_set():
    with pytest.raises(ValueError, match="got 2 and 1"):
        RoundRobin([(), ()], [None], print, print, _Target(), print)


def test_with_extra_runs_the_extra_pass_after_the_call():
    order: list = []
    work = plugin.with_extra(lambda x: order.append(x) or x * 2, lambda: order.append("extra"))
    assert work(3) == 6
    assert order == [3, "extra"]


# -- the inputs and calls the harness and the A/B workers time, on the device under test ---------
def test_gemm_device_calls_reproduce_their_references(device):
    # the harness and perfgate.measure.worker build the timed work from these: each call must write
    # its own output and give the reference of its own input set, bit for bit here (compiled on
    # a GPU, interpreted on a CPU)
    sets, refs = prepared.gemm_inputs(GemmShape(2, 32, 128), 2, device.type)
    assert [d[0].shape for d in sets] == [(2, 128)] * 2
    assert {d[0].device.type for d in sets} == {device.type}
    assert not torch.equal(sets[0][0], sets[1][0])  # distinct seeds: distinct inputs
    outs = [call() for call in prepared.gemm_device_calls(sets, refs)]
    assert outs[0].data_ptr() != outs[1].data_ptr()
    prepared.check_all(outs, refs, prepared.check_gemm, f"call on {device.type}")


def test_reducer_arg_sets_reproduce_their_references(device):
    from kernels.splitk import reduce_partials

    partials, refs = prepared.reducer_inputs(ReducerCase(3, 2, 64), 2, device.type)
    assert [tuple(p.shape) for p in partials] == [(3, 2, 64)] * 2
    assert {p.device.type for p in partials} == {device.type}
    arg_sets = prepared.reducer_arg_sets(partials, refs)
    outs = [reduce_partials(*args) for args in arg_sets]
    prepared.check_all(outs, refs, prepared.check_exact, f"call on {device.type}")
