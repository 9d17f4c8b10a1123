"""pin_xdist_worker: one GPU per pytest-xdist worker, decided without initialising CUDA/HIP;
share_cores: one share of the cores per worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.measure.pinning import (
    amd_gpu_count,
    nvidia_gpu_count,
    pin_xdist_worker,
    share_cores,
    visible_list,
    worker_index,
)


def _no_nvidia() -> int:
    return 0


def _fake_kfd(root: Path, nodes: list[tuple[int, int | None]], render_nodes: list[int]) -> Path:
    """A fake sysfs KFD topology: (gpu_id, drm_render_minor) per node, plus /dev/dri entries."""
    base = root / "sys/class/kfd/kfd/topology/nodes"
    for i, (gpu_id, minor) in enumerate(nodes):
        node = base / str(i)
        node.mkdir(parents=True)
        (node / "gpu_id").write_text(f"{gpu_id}\n")
        props = "cpu_cores_count 0\nsimd_count 1024\n"
        if minor is not None:
            props += f"drm_render_minor {minor}\n"
        (node / "properties").write_text(props)
    (root / "dev/dri").mkdir(parents=True, exist_ok=True)
    for minor in render_nodes:
        (root / "dev/dri" / f"renderD{minor}").touch()
    return root


# ---- worker_index -------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "index"), [("gw0", 0), ("gw7", 7), ("gw12", 12)])
def test_worker_index_parses_xdist_names(name: str, index: int) -> None:
    assert worker_index(name) == index


# "master" is what xdist's controller would be called; the others are malformed names that
# must not be guessed at.
@pytest.mark.parametrize("name", ["master", "gw", "gw-1", "GW1", "gw1 ", "1"])
def test_worker_index_rejects_other_names(name: str) -> None:
    with pytest.raises(ValueError, match="PYTEST_XDIST_WORKER"):
        worker_index(name)


# ---- visible_list -------------------------------------------------------------------------


def test_visible_list_none_when_unset() -> None:
    assert visible_list({}) is None


def test_visible_list_reads_either_variable() -> None:
    assert visible_list({"HIP_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_list({"CUDA_VISIBLE_DEVICES": " 1 , 0 "}) == ["1", "0"]


def test_visible_list_empty_variable_hides_all_gpus() -> None:
    # CUDA_VISIBLE_DEVICES="" is the documented way to hide every GPU.
    assert visible_list({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_visible_list_both_equal_is_fine_both_different_is_an_error() -> None:
    assert visible_list({"HIP_VISIBLE_DEVICES": "1,2", "CUDA_VISIBLE_DEVICES": "1,2"}) == ["1", "2"]
    with pytest.raises(ValueError, match="both set and differ"):
        visible_list({"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "2"})


# ---- GPU counting -------------------------------------------------------------------------


def test_amd_count_skips_cpu_nodes_and_missing_render_nodes(tmp_path: Path) -> None:
    root = _fake_kfd(
        tmp_path,
        # node 0: the CPU (gpu_id 0); nodes 1-3: GPUs; node 3's render node was not given to
        # this container, so HIP cannot use it and it must not be counted.
        [(0, None), (1111, 128), (2222, 129), (3333, 130)],
        render_nodes=[128, 129],
    )
    assert amd_gpu_count(root) == 2


def test_amd_count_zero_without_kfd(tmp_path: Path) -> None:
    assert amd_gpu_count(tmp_path) == 0


def _completed(stdout: str, returncode: int = 0) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["nvidia-smi", "-L"], returncode, stdout, "no driver")


def test_nvidia_count_parses_nvidia_smi_listing() -> None:
    listing = (
        "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\n"
        "  MIG 1g.18gb Device 0: (UUID: MIG-bbbb)\n"  # MIG lines are not whole GPUs
        "GPU 1: NVIDIA H200 (UUID: GPU-cccc)\n"
    )
    count = nvidia_gpu_count(
        which=lambda _: "/usr/bin/nvidia-smi", run=lambda *a, **k: _completed(listing)
    )
    assert count == 2


def test_nvidia_count_zero_without_nvidia_smi() -> None:
    def run(*args, **kwargs):
        raise AssertionError("must not run a missing executable")

    assert nvidia_gpu_count(which=lambda _: None, run=run) == 0


def test_nvidia_count_warns_when_nvidia_smi_fails() -> None:
    with pytest.warns(RuntimeWarning, match="exit code 9"):
        count = nvidia_gpu_count(
            which=lambda _: "/x/nvidia-smi", run=lambda *a, **k: _completed("", 9)
        )
    assert count == 0


# ---- pin_xdist_worker ---------------------------------------------------------------------


def test_not_under_xdist_changes_nothing() -> None:
    env = {"HIP_VISIBLE_DEVICES": "0,1"}
    assert pin_xdist_worker(env, nvidia_count=_no_nvidia) is None
    assert env == {"HIP_VISIBLE_DEVICES": "0,1"}


@pytest.mark.parametrize(
    ("worker", "expected"),
    [
        ("gw0", "0"),  # first worker, first GPU
        ("gw3", "3"),  # last GPU of 4
        ("gw4", "0"),  # more workers than GPUs: wraps around (N mod count)
        ("gw9", "1"),
    ],
)
def test_workers_spread_over_counted_gpus(tmp_path: Path, worker: str, expected: str) -> None:
    root = _fake_kfd(
        tmp_path, [(0, None)] + [(100 + i, 128 + i) for i in range(4)], [128, 129, 130, 131]
    )
    env = {"PYTEST_XDIST_WORKER": worker}
    assert pin_xdist_worker(env, root=root, nvidia_count=_no_nvidia) == expected
    assert env["HIP_VISIBLE_DEVICES"] == expected
    assert env["CUDA_VISIBLE_DEVICES"] == expected


def test_existing_list_is_respected_by_entry_not_by_index(tmp_path: Path) -> None:
    # The user restricted the run to physical GPUs 5 and 7 (or UUIDs): workers get those
    # entries, never 0/1, which would escape the restriction.
    env = {"PYTEST_XDIST_WORKER": "gw1", "CUDA_VISIBLE_DEVICES": "5,GPU-77"}
    assert pin_xdist_worker(env, root=tmp_path, nvidia_count=_no_nvidia) == "GPU-77"
    assert env["HIP_VISIBLE_DEVICES"] == env["CUDA_VISIBLE_DEVICES"] == "GPU-77"


def test_rocr_visible_devices_gives_the_count_and_hip_indexes_inside_it(tmp_path: Path) -> None:
    # ROCR_VISIBLE_DEVICES=4,6 leaves HIP two devices, numbered 0 and 1.
    env = {"PYTEST_XDIST_WORKER": "gw3", "ROCR_VISIBLE_DEVICES": "4,6"}
    assert pin_xdist_worker(env, root=tmp_path, nvidia_count=_no_nvidia) == "1"
    assert env["ROCR_VISIBLE_DEVICES"] == "4,6"


def test_nvidia_count_used_when_no_amd_gpu(tmp_path: Path) -> None:
    env = {"PYTEST_XDIST_WORKER": "gw5"}
    assert pin_xdist_worker(env, root=tmp_path, nvidia_count=lambda: 2) == "1"


def test_no_gpu_changes_nothing(tmp_path: Path) -> None:
    env = {"PYTEST_XDIST_WORKER": "gw1"}
    assert pin_xdist_worker(env, root=tmp_path, nvidia_count=_no_nvidia) is None
    assert env == {"PYTEST_XDIST_WORKER": "gw1"}


def test_hidden_gpus_stay_hidden(tmp_path: Path) -> None:
    env = {"PYTEST_XDIST_WORKER": "gw0", "CUDA_VISIBLE_DEVICES": ""}
    assert pin_xdist_worker(env, root=tmp_path, nvidia_count=lambda: 8) is None
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert "HIP_VISIBLE_DEVICES" not in env


def test_pinning_is_idempotent(tmp_path: Path) -> None:
    env = {"PYTEST_XDIST_WORKER": "gw2"}
    first = pin_xdist_worker(env, root=tmp_path, nvidia_count=lambda: 4)
    second = pin_xdist_worker(env, root=tmp_path, nvidia_count=lambda: 4)
    assert first == second == "2"


def test_conflicting_lists_are_an_error(tmp_path: Path) -> None:
    env = {"PYTEST_XDIST_WORKER": "gw0", "HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}
    with pytest.raises(ValueError, match="differ"):
        pin_xdist_worker(env, root=tmp_path, nvidia_count=_no_nvidia)


def test_malformed_worker_name_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gw<N>"):
        pin_xdist_worker(
            {"PYTEST_XDIST_WORKER": "worker-1"}, root=tmp_path, nvidia_count=_no_nvidia
        )


# ---- real xdist workers, GPUs faked by the environment -----------------------------------------
# Two xdist workers, each its own process running pin_xdist_worker() in its conftest, as
# tests/conftest.py does. The devices are given as the lists a runner sets (CUDA/HIP visible
# devices, ROCR_VISIBLE_DEVICES), so the test runs, and can fail, on any machine: no GPU is
# touched, only what each worker would hand its GPU runtime.

_WORKER_CONFTEST = """
from perfgate.measure.pinning import pin_xdist_worker

pin_xdist_worker()  # before anything touches the GPU, as tests/conftest.py does
"""

_WORKER_TEST = """
import json
import os
from pathlib import Path


def test_report_pinned_gpu():
    info = {name: os.environ.get(name) for name in
            ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}
    out = Path(os.environ["PINNING_OUT"]) / (os.environ["PYTEST_XDIST_WORKER"] + ".json")
    out.write_text(json.dumps(info))
"""


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, ["0", "1"]),
        ({"HIP_VISIBLE_DEVICES": "GPU-aa,GPU-bb"}, ["GPU-aa", "GPU-bb"]),  # entries, not indices
        ({"ROCR_VISIBLE_DEVICES": "4,6"}, ["0", "1"]),  # HIP numbers inside ROCR's set
    ],
    ids=["cuda-list", "hip-uuids", "rocr"],
)
def test_xdist_workers_get_distinct_gpus(tmp_path: Path, given, expected) -> None:
    """Two real xdist workers each see exactly one device, and not the same one."""
    (tmp_path / "conftest.py").write_text(_WORKER_CONFTEST)
    (tmp_path / "test_worker.py").write_text(_WORKER_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYTEST_XDIST")
        and k not in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
    }
    env.update(given)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env["PINNING_OUT"] = str(tmp_path)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only xdist (below): seconds, not tens
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "xdist",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--dist",
            "each",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = [json.loads((tmp_path / f"gw{i}.json").read_text()) for i in range(2)]
    chosen = [r["HIP_VISIBLE_DEVICES"] for r in reports]
    assert chosen == expected  # worker N gets device N, one each
    assert [r["CUDA_VISIBLE_DEVICES"] for r in reports] == chosen  # both runtimes agree
    if "ROCR_VISIBLE_DEVICES" in given:
        assert all(r["ROCR_VISIBLE_DEVICES"] == given["ROCR_VISIBLE_DEVICES"] for r in reports)


# ---- share_cores ---------------------------------------------------------------------------


@pytest.mark.parametrize(("cores", "workers", "threads"), [(2, 2, "1"), (16, 8, "2"), (3, 2, "1"),
                                                           (2, 4, "1"), (64, 1, "64")])  # fmt: skip
def test_each_worker_gets_its_share_of_the_cores(cores: int, workers: int, threads: str) -> None:
    env = {"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": str(workers)}
    assert share_cores(env, cores=lambda: cores) == int(threads)
    assert env["OMP_NUM_THREADS"] == threads


@pytest.mark.parametrize(
    "env",
    [
        {},  # not under xdist
        {"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2", "OMP_NUM_THREADS": "4"},
        {
            "PYTEST_XDIST_WORKER": "gw1",
            "PYTEST_XDIST_WORKER_COUNT": "2",
            "OPENBLAS_NUM_THREADS": "3",
        },
    ],
    ids=["no-xdist", "user-omp", "user-openblas"],
)
def test_outside_xdist_or_with_the_users_count_nothing_changes(env: dict[str, str]) -> None:
    before = dict(env)
    assert share_cores(env, cores=lambda: 16) is None
    assert env == before


def test_this_worker_runs_torch_on_its_share(request: pytest.FixtureRequest) -> None:
    # the variable is only honoured if it was set before torch was imported (tests/conftest.py)
    if not hasattr(request.config, "workerinput"):
        pytest.skip("not a pytest-xdist worker (nox -s test spreads over the cores: -n auto)")
    import torch

    assert torch.get_num_threads() == int(os.environ["OMP_NUM_THREADS"])
