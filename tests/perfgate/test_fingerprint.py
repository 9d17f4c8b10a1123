"""perfgate.measure.fingerprint on the CPU: every contract key present, nulls where there is no GPU or
tool, and the vendor tools' output parsed from canned text (the tools are absent here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from perfgate import atomic
from perfgate.gate import baseline
from perfgate.measure import fingerprint

REPO = Path(__file__).resolve().parents[2]


def test_collect_on_cpu_has_every_key_and_nulls_for_the_gpu(monkeypatch):
    # pretend no vendor tool exists even if this machine has one on PATH (git reads this checkout)
    fp = fingerprint.collect(run=lambda cmd: None)
    assert set(baseline.FINGERPRINT_KEYS) <= set(fp)  # what compare/baseline.load require
    assert {"git_dirty", "device_key"} <= set(fp)
    if torch.cuda.is_available():
        pytest.skip("the null checks below are for a machine without a GPU")
    assert fp["gpu_name"] is fp["arch"] is fp["compute_units"] is None
    assert fp["driver"] is None and fp["runtime"] is None
    assert fp["clocks"] == dict.fromkeys(fingerprint.CLOCK_SETTING_KEYS)
    assert fp["torch"] == torch.__version__
    assert fp["device_key"] == "interpreter"
    json.dumps(fp, allow_nan=False)  # storable as is


def test_git_state_outside_a_repository_is_null():
    assert fingerprint.git_state(read=lambda *args, **kwargs: None) == (None, None)


def test_git_state_reports_dirty_tree():
    answers = {"rev-parse": "abc123\n", "status": " M kernels/gemm.py\n"}
    assert fingerprint.git_state(read=lambda *args, **kwargs: answers[args[0]]) == ("abc123", True)
    answers["status"] = ""
    assert fingerprint.git_state(read=lambda *args, **kwargs: answers[args[0]]) == ("abc123", False)


def _nvidia_runner(replies: dict[str, str | None]):
    def run(cmd):
        assert cmd[0] == "nvidia-smi" and cmd[1] == "--id=3"
        query = cmd[2].removeprefix("--query-gpu=")
        return replies.get(query.split(",")[0])

    return run


def test_nvidia_smi_parses_each_field_group():
    run = _nvidia_runner(
        {
            "driver_version": "570.124.06, 700.00, 1980, 3201, 412.35, 41\n",
            "clocks.max.sm": "1980, 3201\n",
            "clocks.applications.graphics": "1755, 3201\n",
        }
    )
    got = fingerprint.nvidia_smi(3, run)
    assert got == {
        "driver": "570.124.06",
        "power_limit_w": 700.0,
        "sm_mhz": 1980.0,
        "mem_mhz": 3201.0,
        "power_w": 412.35,
        "temperature_c": 41.0,
        "sm_max_mhz": 1980.0,
        "mem_max_mhz": 3201.0,
        "sm_app_mhz": 1755.0,
        "mem_app_mhz": 3201.0,
    }


def test_nvidia_smi_keeps_what_it_can_read():
    # a driver that rejects the application-clock fields and reports power as [N/A]
    run = _nvidia_runner(
        {
            "driver_version": "560.35.03, [N/A], 1410, 2619, [N/A], 35\n",
            "clocks.max.sm": "1980, 3201\n",
            "clocks.applications.graphics": None,
        }
    )
    got = fingerprint.nvidia_smi(3, run)
    assert got["driver"] == "560.35.03" and got["sm_mhz"] == 1410.0
    assert got["power_w"] is None and got["power_limit_w"] is None
    assert got["sm_app_mhz"] is None and got["mem_app_mhz"] is None
    assert got["sm_max_mhz"] == 1980.0


def test_rocm_smi_matches_keys_by_text():
    reply = {
        "card0": {
            "Driver version": "6.10.5",
            "sclk clock speed:": "(2400Mhz)",
            "mclk clock speed:": "(2000Mhz)",
            "Current Socket Graphics Package Power (W)": "512.0",
            "Max Graphics Package Power (W)": "1400.0",
            "Temperature (Sensor junction) (C)": "55.0",
        }
    }
    got = fingerprint.rocm_smi(0, run=lambda cmd: json.dumps(reply))
    assert got["driver"] == "6.10.5"
    assert (got["sm_mhz"], got["mem_mhz"]) == (2400.0, 2000.0)
    assert (got["power_w"], got["power_limit_w"], got["temperature_c"]) == (512.0, 1400.0, 55.0)


@pytest.mark.parametrize("reply", [None, "", "not json", "[1, 2]"])
def test_rocm_smi_never_fails(reply):
    got = fingerprint.rocm_smi(0, run=lambda cmd: reply)
    assert got["sm_mhz"] is None and got["power_w"] is None


@pytest.mark.parametrize(
    "env, index, expected",
    [
        ({}, 1, 1),  # nothing hidden: torch's index is the tool's
        ({"CUDA_VISIBLE_DEVICES": "4,6"}, 1, 6),  # torch's 1 is physical 6
        ({"HIP_VISIBLE_DEVICES": "2"}, 0, 2),
        ({"CUDA_VISIBLE_DEVICES": "GPU-0a1b"}, 0, 0),  # UUIDs: cannot map, keep torch's
    ],
)
def test_physical_index(env, index, expected):
    assert fingerprint.physical_index(index, env) == expected


def test_machine_info_hook_writes_a_block_that_baseline_load_accepts(tmp_path, make_result):
    from perfgate import plugin

    class Config:
        def getoption(self, name):
            assert name == "--perfgate-mode"
            return "leaderboard"

    machine_info: dict = {"node": "x"}
    plugin.pytest_benchmark_update_machine_info(Config(), machine_info)
    block = machine_info["perfgate"]
    assert block["schema"] == 1 and block["mode"] == "leaderboard"
    assert block["device_key"] == block["fingerprint"]["device_key"]
    data = make_result({"tests/perf/x.py::test_a": [1e-5, 2e-5]})
    data["machine_info"] = machine_info
    path = tmp_path / "leaderboard.json"
    atomic.write_json(path, data)
    assert baseline.mode(baseline.load(path)) == "leaderboard"
