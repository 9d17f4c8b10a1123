"""tests/gpu_job.py: the GPU job's declared tests, the guard that no test touching the device
falls out of them, and the GPU smoke's choice of the tests a change reaches."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tests import gpu_job

REPO = Path(__file__).resolve().parents[1]


def test_every_entry_names_test_files_that_exist():
    for entry in [*gpu_job.GPU_JOB, *gpu_job.OTHER_STEP]:
        path = REPO / entry
        if entry.endswith("/"):
            assert path.is_dir() and list(path.glob("test_*.py")), entry
        else:
            assert path.is_file() and path.name.startswith("test_"), entry
    assert all(why.strip() for why in [*gpu_job.GPU_JOB.values(), *gpu_job.OTHER_STEP.values()])


def test_the_selection_is_by_file_and_folder():
    assert gpu_job.in_gpu_job("tests/test_gemm.py")
    assert not gpu_job.in_gpu_job("tests/test_gemm_other.py")
    assert not gpu_job.in_gpu_job("tests/perfgate/test_compare.py")
    # the contract tests run in the job's pytest (on the export), the benchmarks in its timing steps
    assert gpu_job.in_gpu_job("tests/submission/test_strict.py")
    path = "tests/perf/test_leaderboard.py"
    assert not gpu_job.in_gpu_job(path) and gpu_job.covered(path)


def test_the_benchmarks_pass_the_guard_where_bench_runs_them():
    # bench, ab and bench --submission run tests/perf (marked gpu) in a pytest of their own,
    # with this plugin loaded: the guard must see them covered, or every timing step fails
    env = {k: v for k, v in os.environ.items() if k != "PERFGATE_REQUIRE_GPU"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "bench",
         "-p", "no:cacheprovider", "tests/perf"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    benchmarks = [line for line in done.stdout.splitlines() if "::" in line]
    assert benchmarks and all(gpu_job.covered(line.split("::")[0]) for line in benchmarks)


# Planted tests outside the GPU job, one per way of touching the device, and one that touches
# nothing. The kernel is launched where the parent says (the GPU, or the interpreter on a CPU),
# so that its test has no GPU branch of its own.
PLANTED = """
import os

import pytest
import torch
import triton
import triton.language as tl

GPU = torch.cuda.is_available()


@triton.jit
def _one(x_ptr):
    tl.store(x_ptr, 1.0)


@pytest.fixture
def device():  # a fixture of this name outside tests/conftest.py is no device
    return "cpu"


def test_launches():
    x = torch.zeros(1, device=os.environ["PLANTED_DEVICE"])
    _one[(1,)](x)
    assert x.item() == 1.0


@pytest.mark.gpu
def test_marked():
    pass


def test_branches():
    if GPU:
        return
    assert True


def test_plain(device):
    assert sum([1, 2]) == 3
"""


def test_a_test_outside_the_job_that_touches_the_device_fails_naming_the_file(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text(textwrap.dedent(PLANTED))
    env = {k: v for k, v in os.environ.items() if k not in ("PERFGATE_REQUIRE_GPU",)}
    env.update(
        PYTHONPATH=str(REPO),
        PLANTED_DEVICE="cuda" if torch.cuda.is_available() else "cpu",
        TRITON_INTERPRET="0" if torch.cuda.is_available() else "1",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.gpu_job", "-p", "no:cacheprovider",
         "-o", "markers=gpu", "-rA", str(planted)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    where = f"the GPU job does not run {planted.as_posix()}: add it to GPU_JOB in tests/gpu_job.py"
    for name, why in [
        ("test_launches", "it launched a Triton kernel ("),
        ("test_marked", "it is marked gpu"),
        ("test_branches", "it branches on whether a GPU is here"),
    ]:
        assert f"test_planted.py::{name} touches the device ({why}" in out, out
        assert f"FAILED test_planted.py::{name}" in out or f"ERROR test_planted.py::{name}" in out
    assert where in out
    assert "PASSED test_planted.py::test_plain" in out


@pytest.mark.parametrize(
    ("changed", "reaches", "misses"),
    [
        (["kernels/splitk.py"], "tests/test_splitk.py", "tests/perfgate/test_flags.py"),
        (["kernels/reducer/splitk_reduce.cu"], "tests/test_reducer_native.py",
         "tests/perfgate/test_flags.py"),
        (["tests/test_layout.py"], "tests/test_layout.py", "tests/test_gemm.py"),
        (["tests/perfgate/conftest.py"], "tests/perfgate/test_compare.py", "tests/test_gemm.py"),
        (["docs/ci.md", "perf_baselines/nvidia-h200/device.json"], None, "tests/test_gemm.py"),
    ],
)  # fmt: skip
def test_a_change_reaches_the_tests_that_import_it(changed, reaches, misses):
    affected = gpu_job.affected_tests(changed)
    if reaches is not None:
        assert reaches in affected
    assert misses not in affected


def test_a_change_to_the_test_setup_reaches_every_test():
    for path in gpu_job.EVERYTHING:
        assert gpu_job.affected_tests([path, "docs/ci.md"]) is None


def test_changed_files_are_read_from_git(tmp_path):
    if not (REPO / ".git").exists():
        pytest.skip("needs the checkout's git repository (this tree has none)")
    untracked = REPO / "tests" / f"untracked-{os.getpid()}.tmp"
    untracked.write_text("")
    try:  # committed, staged or not, and untracked files all count
        assert untracked.relative_to(REPO).as_posix() in gpu_job.changed_files("HEAD")
    finally:
        untracked.unlink()
    with pytest.raises(pytest.UsageError, match=r"^--changed-since 'no-such-rev-h38': "):
        gpu_job.changed_files("no-such-rev-h38")


def test_the_gpu_job_collects_exactly_its_files():
    env = {k: v for k, v in os.environ.items() if k != "PERFGATE_REQUIRE_GPU"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--gpu-job", "--collect-only", "-q", "-m", "not bench",
         "-p", "no:cacheprovider", "tests"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    files = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    listed = {e for e in gpu_job.GPU_JOB if not e.endswith("/")}
    for folder in [e for e in gpu_job.GPU_JOB if e.endswith("/")]:
        listed |= {p.relative_to(REPO).as_posix() for p in (REPO / folder).glob("test_*.py")}
    assert files == listed
