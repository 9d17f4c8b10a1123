"""``python -m perfgate submission export|test`` end to end on a CPU.

- the exported file passes both tiers (exit 0); an independent third-party file
  (tests/perfgate/data/third_party_submission.py: numpy and torch, written from the task's facts)
  passes the leaderboard tier and departs in the strict tier exactly where its float64 product
  of a block scaled to 2**126 stays finite (exit 0, the departures listed; exit 1 with
  ``--strict``); its twin with a wrong scale rule fails the leaderboard tier (exit 1 naming the
  check); a one-bit plant is a strict departure only;
- a file that cannot be used (one that ends the process while it is imported too), a selection
  without a leaderboard check: exit 2 with one line; a file that ends the test process inside a
  test (``os._exit(0)``, a segfault): a failed submission, exit 1 with one line naming the test;
- ``--submission`` is visible to a whole-tree pytest run (nox -s test).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.device import INTERPRETER_PROBLEM
from perfgate.__main__ import main
from perfgate.commands import base
from perfgate.commands import submission as command
from perfgate.submission import export

REPO = Path(__file__).resolve().parents[2]
THIRD_PARTY = REPO / "tests/perfgate/data/third_party_submission.py"

# One bit flipped in one element: a 1-ulp error that the leaderboard's 1e-2 rule lets through,
# which the fp4-grid tests (bit for bit) must catch.
PLANTED = """
from kernels.gemm import custom_kernel as _package


def custom_kernel(data):
    out = _package(data)
    out.view(dtype=__import__("torch").int16)[0, 0] ^= 1
    return out
"""
LEADERBOARD_M4 = "benchmark-m4-n2880-k512"  # the cheapest leaderboard check in the interpreter


# The command's logic on the CPU, wherever this runs: the expected tables, departures and counts
# below are the interpreter's (on a GPU the leaderboard tier checks 101 seeds a benchmark, the
# GPU-only strict tests run, and the reference's NaN/inf bits are the GPU's). What a GPU makes of
# a file is the GPU job's own step, `perfgate submission test` of the export on its device.
CPU_ONLY = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
GPU_JOB_FLAGS = ("PERFGATE_REQUIRE_GPU", "MXFP4_REQUIRE_NATIVE_REDUCER")
# A test whose command reaches the contract tests runs the kernels in this machine's
# interpreter; where that interpreter cannot (triton < 3.8: the H200's 3.6, the ROCm image's),
# the command refuses in one line (test_an_interpreter_that_cannot_run_the_kernels_is_refused)
# and these need a machine whose interpreter can: the CPU job's.
INTERPRETER = pytest.mark.skipif(
    INTERPRETER_PROBLEM is not None,
    reason=f"pinned to the CPU, where {INTERPRETER_PROBLEM} (the CPU job runs it)",
)


def _perfgate(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in GPU_JOB_FLAGS} | CPU_ONLY
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *args], cwd=cwd, capture_output=True, text=True, env=env
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cmd") / "submission.py"
    done = _perfgate("submission", "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"perfgate submission export: wrote {out} (gfx950, ")
    return out


def _tail(done: subprocess.CompletedProcess) -> str:
    return done.stdout[-3000:] + done.stderr[-2000:]


@INTERPRETER
def test_the_exported_file_passes_through_the_command(exported):
    # Every contract test runs on the export in the test session itself (`nox -s test` and the
    # GPU job pass --submission EXPORT); here, the command's own path: the file loaded in a
    # fresh process, one leaderboard check (the cheapest in the interpreter) and one strict
    # test, judged.
    pick = f"{LEADERBOARD_M4} or test_nan_poisons_exactly_its_rows"
    done = _perfgate("submission", "test", str(exported), "--strict", "-q", "-k", pick)
    assert done.returncode == 0, _tail(done)
    assert f"--submission={exported}" in done.stdout
    last = "leaderboard: PASS (1 check); strict: 0 departures (--strict: PASS)"
    assert done.stdout.splitlines()[-1] == last, _tail(done)
    assert "  no departure\n  1 held, 0 skipped\n" in done.stdout


# What the third-party file does where the reference's semantics are the suite's own: a block
# holding +-inf (or whose amax rounds to 2**128) has scale 2**126 and code 6, and its float64
# product 6 * 2**126 * b stays finite (or is a finite bf16 after rounding), where the reference
# (an fp32 operand, as tl.dot_scaled) makes it +-inf, or NaN against a zero weight.
DEPARTURES = {
    "test_inf_classes_match_the_reference[+inf]":
        ("inf class +inf", "(0, 2)", "0xC321", "0xFFFF", "62/256"),
    "test_inf_classes_match_the_reference[-inf]":
        ("inf class -inf", "(1, 2)", "0x4284", "0xFFFF", "19/256"),
    "test_inf_classes_match_the_reference[opposite-infs]":
        ("inf class opposite-infs", "(0, 0)", "0x7F80", "0xFFFF", "64/256"),
    "test_inf_classes_match_the_reference[scale-2^126]":
        ("inf class scale-2^126", "(0, 2)", "0xC321", "0xFFFF", "73/256"),
    "test_nan_and_inf_rows_with_long_k":
        ("NaN and inf rows, long K", "(1, 2)", "0xC586", "0xFFFF", "126/256"),
}  # fmt: skip


def _departure_rows(stdout: str) -> dict[str, tuple[str, ...]]:
    table = stdout.partition("strict tier: the suite's exact semantics\n")[2].splitlines()
    header, rows = table[0], []
    for line in table[1:]:
        if not line.startswith("  test_"):
            break
        rows.append(line)
    starts = [header.index(h) for h in ("class", "first element", "got", "want", "differ")]
    out = {}
    for line in rows:
        name = line[: starts[0]].strip()
        cuts = [*starts, len(line)]
        out[name] = tuple(line[a:b].strip() for a, b in itertools.pairwise(cuts))[:5]
    return out


@INTERPRETER
def test_an_independent_file_passes_the_leaderboard_and_lists_its_departures():
    done = _perfgate("submission", "test", str(THIRD_PARTY), "-q")
    assert done.returncode == 0, _tail(done)
    assert _departure_rows(done.stdout) == DEPARTURES
    assert "  15 held, 10 skipped\n" in done.stdout  # test_task_shapes: a GPU's
    assert done.stdout.splitlines()[-1] == "leaderboard: PASS (10 checks); strict: 5 departures"
    assert done.stderr == ""


@INTERPRETER
def test_strict_makes_a_departure_fail(tmp_path):
    # the third-party file's first departure only, and the cheapest leaderboard check
    args = ["-q", "-k", f"{LEADERBOARD_M4} or inf_classes and +inf"]
    done = _perfgate("submission", "test", str(THIRD_PARTY), "--strict", *args)
    assert done.returncode == 1, _tail(done)
    assert done.stdout.splitlines()[-1] == (
        "leaderboard: PASS (1 check); strict: 1 departure (--strict: FAIL)"
    )
    assert done.stderr.splitlines() == [
        f"perfgate submission test: {THIRD_PARTY} departs from the strict tier (--strict): "
        "1 departure, first test_inf_classes_match_the_reference[+inf]"
    ]


@INTERPRETER
def test_a_file_with_a_wrong_scale_rule_fails_the_leaderboard_tier_naming_the_check(
    wrong_scale_rule,
):
    wrong = wrong_scale_rule
    # the leaderboard tier alone: the strict tier of this twin is the third-party file's
    # (test_an_independent_file_passes_the_leaderboard_and_lists_its_departures)
    done = _perfgate("submission", "test", str(wrong), "-q", "-k", "test_the_harness")
    assert done.returncode == 1, _tail(done)
    assert done.stdout.splitlines()[-1].startswith("leaderboard: FAIL (10 of 10 checks); strict: ")
    assert (
        "  test-m8-n2112-k7168-seed124          1                FAIL: test-m8-n2112-k7168: "
        "seed 124: " in done.stdout
    )
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        f"perfgate submission test: {wrong} fails the leaderboard tier: "
        "test_the_harness_accepts_the_output[benchmark-m16-n2112-k7168-seed15]: "
        "benchmark-m16-n2112-k7168: seed 15: "
    ), line
    assert " elements mismatched; first (0, " in line


@INTERPRETER
def test_a_one_bit_plant_is_a_strict_departure_only(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED)
    args = ["-q", "-k", f"fp4_grid and 1-64-64 or {LEADERBOARD_M4}"]
    done = _perfgate("submission", "test", str(planted), *args)
    assert done.returncode == 0, _tail(done)
    rows = _departure_rows(done.stdout)
    assert list(rows) == ["test_fp4_grid_inputs_match_exactly[1-64-64]"]
    cls, element, got, want, differ = rows["test_fp4_grid_inputs_match_exactly[1-64-64]"]
    assert (cls, element, differ) == ("fp4-grid inputs (exact sums)", "(0, 0)", "1/64")
    assert int(got, 16) ^ int(want, 16) == 1  # the planted bit
    assert done.stdout.splitlines()[-1] == "leaderboard: PASS (1 check); strict: 1 departure"


def test_a_file_without_custom_kernel_is_exit_2_with_one_line(tmp_path):
    bad = tmp_path / "no_kernel.py"
    bad.write_text("def kernel(data):\n    return data[0]\n")
    done = _perfgate("submission", "test", str(bad))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"perfgate submission test: error: {bad}: defines no custom_kernel "
        "(the leaderboard calls custom_kernel(data))\n"
    )


def test_an_unusable_file_is_exit_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import no_such_module_h23\n")
    done = _perfgate("submission", "test", str(bad))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        f"perfgate submission test: error: {bad}: does not import (ModuleNotFoundError: No module"
    )


@INTERPRETER
def test_a_selection_without_a_leaderboard_check_is_no_verdict():
    done = _perfgate("submission", "test", str(THIRD_PARTY), "-q", "-k", "inputs_are_never")
    assert done.returncode == 2, _tail(done)
    assert done.stderr.splitlines() == [
        "perfgate submission test: error: no leaderboard check ran (the selection left none): "
        "the leaderboard's verdict is unknown; select at least one test of "
        "tests/submission/test_leaderboard_tier.py"
    ]
    done = _perfgate("submission", "test", str(THIRD_PARTY), "-q", "-k", "no_such_test_h29")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "perfgate submission test: error: the pytest selection matched no contract test"
    )


@INTERPRETER
@pytest.mark.parametrize(
    ("body", "how"),
    [("import os\n    os._exit(0)", "exited 0"), ("import ctypes\n    ctypes.string_at(0)", "killed by SIGSEGV")],
    ids=["os-exit-0", "segfault"],
)  # fmt: skip
def test_a_file_that_ends_the_test_process_fails_in_one_line(tmp_path, body, how):
    # pytest's exit status is 0 (os._exit) or -11 (SIGSEGV), and the session never ended: the
    # submission failed, named with the test it ended, and no crash dump
    quits = tmp_path / "quits.py"
    quits.write_text(f"def custom_kernel(data):\n    {body}\n")
    done = _perfgate("submission", "test", str(quits), "-q")
    assert done.returncode == 1, _tail(done)
    (line,) = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert line.startswith(
        f"perfgate submission test: {quits} fails: the test process {how} inside "
    )
    assert line.endswith("(the submission ended it)") and "Fatal Python error" not in done.stdout


def test_a_file_that_ends_the_process_when_imported_is_exit_2_in_one_line(tmp_path):
    quits = tmp_path / "quits.py"
    quits.write_text("import os\n\nos._exit(0)\n\n\ndef custom_kernel(data):\n    return data\n")
    done = _perfgate("submission", "test", str(quits))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"perfgate submission test: error: {quits}: importing it ended the process "
        "(exit 0, os._exit?)\n"
    )


def test_a_file_that_hangs_while_imported_is_stopped_and_exit_2(tmp_path, monkeypatch, capfd):
    from perfgate.submission import load

    monkeypatch.setattr(load, "IMPORT_TIMEOUT_S", 1.0)
    mark = tmp_path / "pid"
    hangs = tmp_path / "hangs.py"
    hangs.write_text(f"import os, time\nopen({str(mark)!r}, 'w').write(str(os.getpid()))\n"
                     "time.sleep(60)\n\n\ndef custom_kernel(data):\n    return data\n")  # fmt: skip
    assert main(["submission", "test", str(hangs)]) == 2
    assert capfd.readouterr() == (
        "",
        f"perfgate submission test: error: {hangs}: importing it took over 1 s\n",
    )
    child = int(mark.read_text())
    assert (
        not Path(f"/proc/{child}").exists()
        or "\nState:\tZ" in Path(f"/proc/{child}/status").read_text()
    )  # stopped, not left sleeping


@pytest.mark.parametrize(
    ("args", "strict", "rest"),
    [
        ([], False, []),
        (["-x", "--strict", "-k", "inf"], True, ["-x", "-k", "inf"]),
        (["-x", "--", "--strict"], False, ["-x", "--strict"]),  # after --: pytest's
        (["--", "-q"], False, ["-q"]),
    ],
)
def test_strict_before_a_double_dash_is_the_commands(args, strict, rest):
    assert command.split_args(args) == (strict, rest)


def test_bad_export_arguments_are_exit_2(tmp_path):
    done = _perfgate("submission", "export", "--out", str(tmp_path / "x.py"), "--target", "sm100")
    assert done.returncode == 2 and "--target must be one of gfx950, sm90" in done.stderr
    done = _perfgate("submission", "export", "--out", "kernels/gemm.py")
    assert done.returncode == 2 and "is a tracked file or folder of the repository" in done.stderr
    assert done.stderr.count("\n") == 1
    done = _perfgate("submission", "test", str(tmp_path / "missing.py"))
    assert done.returncode == 2 and "missing.py: no such file" in done.stderr


def test_submission_is_an_option_of_the_whole_tree(request):
    # nox -s test -- --submission FILE: tests/conftest.py declares the plugin in pytest_plugins,
    # so this very run (any part of the tree) knows the option; `submission test` passes it
    from perfgate.submission import pytest_plugin

    assert request.config.pluginmanager.is_registered(pytest_plugin)
    # known to this very run: unset in a plain pytest run, the export where nox passes it
    given = request.config.getoption("--submission")
    assert given is None or Path(given).is_file()


def test_a_bad_submission_option_stops_the_session_in_one_line(tmp_path):
    from types import SimpleNamespace

    from perfgate.submission import pytest_plugin

    bad = tmp_path / "bad.py"
    bad.write_text("X = 1\n")
    config = SimpleNamespace(getoption=lambda name: str(bad), stash={})
    with pytest.raises(pytest.UsageError, match="defines no custom_kernel") as info:
        pytest_plugin.pytest_sessionstart(SimpleNamespace(config=config))
    assert str(info.value) == (
        f"--submission: {bad}: defines no custom_kernel (the leaderboard calls custom_kernel(data))"
    )


def test_a_bad_submission_option_stops_an_xdist_session_in_one_line(tmp_path):
    # as `nox -s test` runs it: the controller checks the file after starting its workers (so
    # that its check overlaps their start), and the session still stops in one line. Without
    # pytest-benchmark: some of its releases warn at start-up that xdist disables benchmarks.
    bad = tmp_path / "bad.py"
    bad.write_text("X = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
         "-n", "1", f"--submission={bad}", "tests/submission"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 4, (done.stdout[-2000:], done.stderr[-2000:])
    assert [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()] == [
        f"ERROR: --submission: {bad}: defines no custom_kernel (the leaderboard calls "
        "custom_kernel(data))"
    ]


def test_export_renders_what_the_command_wrote(exported):
    assert exported.read_text() == export.render().text


@INTERPRETER
def test_a_killed_submission_test_takes_its_pytest_child_with_it(tmp_path):
    # the file's custom_kernel runs in the pytest child: it writes that process's pid and waits
    import os
    import signal
    import time

    mark = tmp_path / "pid"
    slow = tmp_path / "slow.py"
    slow.write_text(
        "import os, time\n\n\ndef custom_kernel(data):\n"
        f"    open({str(mark)!r}, 'w').write(str(os.getpid()))\n    time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-m", "perfgate", "submission", "test", str(slow), "-x"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        end = time.monotonic() + 120
        while not (mark.is_file() and mark.read_text()) and time.monotonic() < end:
            time.sleep(0.1)
        child = int(mark.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                os.kill(child, 0)
                state = Path(f"/proc/{child}/status").read_text()
            except (ProcessLookupError, FileNotFoundError):
                break
            if "\nState:\tZ" in state:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the pytest child outlived its killed parent")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_an_interpreter_that_cannot_run_the_kernels_is_refused(monkeypatch, capfd, tmp_path):
    # what `submission test` says on a machine without a GPU whose triton's interpreter cannot
    # run the kernels (any machine: the GPU and the interpreter's verdict are planted); an
    # unusable file is still named first
    import kernels.interpreter

    monkeypatch.setattr(base, "gpu_available", lambda: False)
    monkeypatch.setattr(kernels.interpreter, "triton_version", lambda: "3.6.0")
    bad = tmp_path / "no_kernel.py"
    bad.write_text("def kernel(data):\n    return data\n")
    assert main(["submission", "test", str(bad)]) == 2
    assert capfd.readouterr() == ("", f"perfgate submission test: error: {bad}: defines no "
                                  "custom_kernel (the leaderboard calls custom_kernel(data))\n")  # fmt: skip
    assert main(["submission", "test", str(THIRD_PARTY)]) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err == (
        "perfgate submission test: error: no GPU on this machine, and triton 3.6.0's interpreter "
        "cannot run the kernels (tl.dot_scaled on the CPU needs triton >= 3.8); run on a GPU, or "
        "install triton>=3.8\n"
    )
    monkeypatch.setattr(kernels.interpreter, "triton_version", lambda: "3.8.0+git1234")
    assert kernels.interpreter.interpreter_problem() is None


@pytest.mark.parametrize("argv", [[], ["status.json"], ["status.json", "f.py", "-q"]])
def test_the_contract_process_wants_status_file_and_a_double_dash(argv, capsys):
    from perfgate.submission import contract

    assert contract.main(argv) == 2
    assert capsys.readouterr().err == (
        "usage: python -m perfgate.submission.contract STATUS FILE [-- PYTEST_ARGS...]\n"
    )
