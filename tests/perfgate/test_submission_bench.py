"""``bench --submission FILE`` on a CPU: the option's refusals (exit 2, one line), the tag and the
source check that keep a submission's results away from the package's baseline, the channel to
the pytest processes (PYTEST_ADDOPTS), and the plugin timing the file's ``custom_kernel``: the
option loads it, the reducer group is deselected with a message, the results record it, and the
harness prepares the file's calls (run here in Triton's interpreter on a small shape)."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import shlex
from pathlib import Path

import pytest
import torch

from perfgate import plugin
from perfgate.__main__ import main
from perfgate.catalog import GemmShape, ReducerCase
from perfgate.gate.baseline import BaselineError
from perfgate.measure import harness as prepared
from perfgate.measure import session
from perfgate.submission import bench as sub_bench
from perfgate.submission.load import load

pytest_plugins = ["pytester"]

GOOD = "def custom_kernel(data):\n    return 'from the file'\n"
# The package's custom_kernel behind a counter: what the harness calls is seen, not assumed.
WRAPPED = """
from kernels.gemm import custom_kernel as _package

CALLS = []


def custom_kernel(data):
    CALLS.append(tuple(data[0].shape))
    return _package(data)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- the command's refusals -----------------------------------------------------------------------
@pytest.mark.parametrize("command", ["bench", "update-baselines"])
def test_a_missing_file_is_exit_2_in_one_line(command, tmp_path, capsys):
    rc, out, err = _cli(capsys, command, "--submission", str(tmp_path / "nope.py"))
    assert rc == 2 and out == ""
    assert err == (
        f"perfgate {command}: error: --submission: {tmp_path / 'nope.py'}: no such file "
        "(a submission is one .py file)\n"
    )


def test_a_file_without_custom_kernel_is_exit_2_in_one_line(tmp_path, capsys):
    bad = _write(tmp_path, "bad.py", "x = 1\n")
    rc, out, err = _cli(capsys, "bench", "--submission", str(bad))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("perfgate bench: error: --submission: ")
    assert "defines no custom_kernel" in err


def test_a_tag_outside_the_submission_namespace_is_refused(tmp_path, capsys):
    good = _write(tmp_path, "good.py", GOOD)
    rc, out, err = _cli(capsys, "bench", "--submission", str(good), "--tag", "grid")
    assert rc == 2 and out == ""
    assert err == (
        "perfgate bench: error: --tag must be 'submission' or start with 'submission-' with "
        "--submission (got 'grid'), so that a submission's results and baseline never share a "
        "name with the package's\n"
    )


@pytest.mark.parametrize(
    "tag, want",
    [(None, "submission"), ("submission", "submission"), ("submission-grid", "submission-grid")],
)
def test_submission_tags(tag, want):
    assert sub_bench.submission_tag(tag) == want


@pytest.mark.parametrize("tag", ["grid", "submissions", "sub", "submission_grid", ""])
def test_other_tags_are_refused(tag):
    with pytest.raises(ValueError, match="--tag must be 'submission' or start with"):
        sub_bench.submission_tag(tag)


def test_without_a_gpu_a_usable_file_is_checked_then_nothing_runs(tmp_path, capsys, monkeypatch):
    from perfgate.commands import base

    monkeypatch.setattr(base, "gpu_available", lambda: False)  # the no-GPU path, on any machine
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU", raising=False)
    monkeypatch.delenv(sub_bench.ADDOPTS, raising=False)
    good = _write(tmp_path, "good.py", GOOD)
    rc, out, err = _cli(capsys, "bench", "--submission", str(good), "--mode", "leaderboard")
    assert (rc, err) == (0, "")
    assert out.startswith("perfgate bench: no GPU on this machine (")
    assert sub_bench.ADDOPTS not in os.environ  # nothing leaks out of the command
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", "1")
    rc, out, err = _cli(capsys, "bench", "--submission", str(good))
    assert rc == 2 and err.startswith("perfgate bench: error: PERFGATE_REQUIRE_GPU is set")


# -- how the file reaches the pytest processes ----------------------------------------------------
def test_configure_files_the_run_under_the_submission_tag(tmp_path):
    good = _write(tmp_path, "good.py", GOOD)
    args = argparse.Namespace(submission=str(good), tag=None)
    context = sub_bench.configure(args)
    assert (args.tag, args.submission) == ("submission", str(good.resolve()))
    assert hasattr(context, "__enter__")
    untouched = argparse.Namespace(submission=None, tag="grid")
    sub_bench.configure(untouched)
    assert untouched == argparse.Namespace(submission=None, tag="grid")


@pytest.mark.parametrize("before", [None, "-x --tb=short"])
def test_pytest_addopts_carries_the_option_and_is_restored(tmp_path, monkeypatch, before, capsys):
    path = _write(tmp_path, "with space.py", GOOD)
    if before is None:
        monkeypatch.delenv(sub_bench.ADDOPTS, raising=False)
    else:
        monkeypatch.setenv(sub_bench.ADDOPTS, before)
    with sub_bench.pytest_option(path):
        words = shlex.split(os.environ[sub_bench.ADDOPTS])  # as pytest splits it
        assert words == [*shlex.split(before or ""), f"--perfgate-submission={path}"]
    assert os.environ.get(sub_bench.ADDOPTS) == before
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (
        capsys.readouterr().out == f"perfgate: timing custom_kernel of {path} (sha256:{sha[:16]})\n"
    )


def test_every_pytest_process_of_the_session_gets_the_option(tmp_path, monkeypatch):
    path = _write(tmp_path, "good.py", GOOD)
    monkeypatch.delenv(sub_bench.ADDOPTS, raising=False)
    seen = []

    class Done:
        returncode = 5  # pytest's "no tests": the session stops after this process

    def fake_run(cmd, **kwargs):
        seen.append(kwargs["env"].get(sub_bench.ADDOPTS))
        return Done()

    monkeypatch.setattr(session.spawn, "run", fake_run)
    args = argparse.Namespace(results_dir=tmp_path / "r", tag="submission", keyword=None,
                              markers=None, pytest_args=[])  # fmt: skip
    with sub_bench.pytest_option(path):
        rc, _ = session.run_process("leaderboard", args, tmp_path / "r.json", [], "mode")
    assert rc == 2
    assert seen == [shlex.quote(f"--perfgate-submission={path}")]


def test_the_missing_baseline_hint_names_the_file_and_tag():
    args = argparse.Namespace(submission="/x/sub.py", tag="submission")
    assert sub_bench.hint(args) == " --submission /x/sub.py"
    args.tag = "submission-grid"
    assert sub_bench.hint(args) == " --submission /x/sub.py --tag submission-grid"
    assert sub_bench.hint(argparse.Namespace(submission=None, tag=None)) == ""


# -- results and baselines say what they timed ----------------------------------------------------
def _data(submission: dict | None) -> dict:
    block = {"schema": 1, "device_key": "d", "mode": "leaderboard", "fingerprint": {}}
    if submission is not None:
        block["submission"] = submission
    return {"machine_info": {"perfgate": block}}


SUB_A = {"source": "submission", "path": "/a.py", "sha256": "a" * 64}
SUB_B = {"source": "submission", "path": "/b.py", "sha256": "b" * 64}


def test_a_package_run_against_a_package_baseline_says_nothing(capsys):
    sub_bench.check_source(Path("base.json"), _data(None), _data(None))
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    "base, current, other, what",
    [
        (None, SUB_A, "the package's", "a submission file's"),
        (SUB_A, None, "a submission file's", "the package's"),
    ],
)
def test_a_submission_never_meets_a_package_baseline(base, current, other, what):
    with pytest.raises(BaselineError) as info:
        sub_bench.check_source(Path("b.json"), _data(base), _data(current))
    assert str(info.value) == (
        f"b.json: a baseline of {other} custom_kernel, the run timed {what}; record a baseline "
        "of the same kind (update-baselines --submission FILE for a submission)"
    )


def test_two_submissions_are_compared_and_named(capsys):
    sub_bench.check_source(Path("b.json"), _data(SUB_A), _data(SUB_B))
    assert capsys.readouterr().out == (
        f"perfgate: submission /b.py sha256:{'b' * 16} against the baseline of /a.py "
        f"sha256:{'a' * 16}\n"
    )
    sub_bench.check_source(Path("b.json"), _data(SUB_A), _data(SUB_A))
    assert capsys.readouterr().out.endswith("(the same file content)\n")


def test_machine_info_records_the_submission_only_when_there_is_one():
    fp = {"device_key": "nvidia-h200"}
    plain = plugin.machine_info_block("leaderboard", fp)
    assert plain == {"schema": 1, "device_key": "nvidia-h200", "mode": "leaderboard",
                     "fingerprint": fp}  # fmt: skip
    assert plugin.machine_info_block("device", fp, SUB_A)["submission"] == SUB_A


# -- the plugin ---------------------------------------------------------------------------------
BENCHMARKS = """
import pytest
from perfgate.measure.clock import device_clock
from perfgate.plugin import submission_of


@pytest.mark.benchmark(group="leaderboard", timer=device_clock)
def test_gemm(benchmark, request):
    sub = submission_of(request.config)
    assert sub is not None and sub.custom_kernel(None) == "from the file"


@pytest.mark.benchmark(group="reducer", timer=device_clock)
def test_reducer(benchmark):
    pass
"""


@pytest.fixture
def this_checkout(monkeypatch):
    """pytester's subprocesses import this worktree's perfgate, not an installed one."""
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )


def test_the_plugin_loads_the_file_and_deselects_the_reducer(pytester, tmp_path, this_checkout):
    good = _write(tmp_path, "good.py", GOOD)
    pytester.makepyfile(test_bench=BENCHMARKS)
    result = pytester.runpytest_subprocess(
        "-p", "perfgate.plugin", "--benchmark-disable", f"--perfgate-submission={good}"
    )
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(
        ["perfgate: 1 reducer benchmark(s) deselected: a submission file has no reducer entry "
         "point (--perfgate-submission times custom_kernel only)"]
    )  # fmt: skip


def test_without_the_option_nothing_is_deselected(pytester, this_checkout):
    pytester.makepyfile(test_bench=BENCHMARKS.replace("sub is not None and ", "sub is None or "))
    result = pytester.runpytest_subprocess("-p", "perfgate.plugin", "--benchmark-disable")
    result.assert_outcomes(passed=2)
    assert "reducer benchmark(s) deselected" not in result.stdout.str()


def test_an_unusable_file_stops_the_session_in_one_line(pytester, tmp_path, this_checkout):
    bad = _write(tmp_path, "bad.py", "raise RuntimeError('no')\n")
    pytester.makepyfile(test_bench=BENCHMARKS)
    result = pytester.runpytest_subprocess("-p", "perfgate.plugin", f"--perfgate-submission={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --perfgate-submission: {bad}: does not import (RuntimeError: no)"]
    )


class _Timer:
    """A mode that keeps what the harness hands it instead of timing it."""

    name = "device"

    def __init__(self) -> None:
        self.work = None

    def time(self, harness, benchmark, work) -> None:
        self.work = work


class _Benchmark:
    def __init__(self) -> None:
        self.extra_info: dict = {}


def _harness(submission) -> tuple[plugin.Harness, _Timer]:
    from kernels.device import INTERPRETER

    timer = _Timer()
    h = object.__new__(plugin.Harness)  # Harness() wants a GPU; the parts it uses here are set
    h.settings = plugin.Settings(mode=timer, rounds=10, warmup=0, use_graph=False)
    h.submission = submission
    h.device = torch.device("cpu")
    h.info = dataclasses.replace(INTERPRETER, last_level_cache_bytes=1)  # the fewest copies
    return h, timer


def test_the_harness_times_the_files_custom_kernel(tmp_path, device):
    if device.type != "cpu":
        pytest.skip("the harness is driven by hand on the CPU; on a GPU bench --submission runs it")
    from kernels.gemm import custom_kernel as package

    sub = load(_write(tmp_path, "wrapped.py", WRAPPED))
    h, timer = _harness(sub)
    shape = GemmShape(4, 64, 64)
    bench = _Benchmark()
    h.gemm(bench, shape)
    work = timer.work
    assert work.fn is sub.custom_kernel
    assert bench.extra_info == {"m": 4, "n": 64, "k": 64, "copies_rotated": 4}
    assert len(work.calls) == len(work.arg_sets) == len(work.refs) == 4
    outs = [call() for call in work.calls]  # what device mode captures: custom_kernel per copy
    assert sub.module.CALLS == [(4, 64)] * 4
    for i, (out, ref, (data,)) in enumerate(zip(outs, work.refs, work.arg_sets, strict=True)):
        work.check(out, ref, f"copy {i}")
        assert torch.equal(out.view(torch.int16), package(data).view(torch.int16))
    assert len({out.data_ptr() for out in outs}) == 4  # each call its own output


def test_the_package_is_timed_without_a_submission(device):
    if device.type != "cpu":
        pytest.skip("the harness is driven by hand on the CPU; on a GPU bench runs it")
    from kernels.gemm import custom_kernel

    h, timer = _harness(None)
    h.gemm(_Benchmark(), GemmShape(4, 64, 64))
    assert timer.work.fn is custom_kernel


def test_a_reducer_case_with_a_submission_is_refused(tmp_path):
    sub = load(_write(tmp_path, "good.py", GOOD))
    with pytest.raises(ValueError, match="reducer case s2-m4-n64: a submission file has no"):
        prepared.prepare(ReducerCase(2, 4, 64), 4, torch.device("cpu"), sub)
