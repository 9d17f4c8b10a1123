"""``python -m perfgate submission export|test`` end to end on a CPU: the contract tests pass on
the exported file, fail (exit 1) on a planted wrong submission, and a file that cannot be used
is exit 2 with one line; ``--submission`` is visible to a whole-tree pytest run (nox -s test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.submission import export

REPO = Path(__file__).resolve().parents[2]

# One bit flipped in one element: a 1-ulp error that the leaderboard's 1e-2 rule lets through,
# which the fp4-grid tests (bit for bit) must catch.
PLANTED = """
from kernels.gemm import custom_kernel as _package


def custom_kernel(data):
    out = _package(data)
    out.view(dtype=__import__("torch").int16)[0, 0] ^= 1
    return out
"""


def _perfgate(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cmd") / "submission.py"
    done = _perfgate("submission", "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"perfgate submission export: wrote {out} (gfx950, ")
    return out


def test_the_contract_passes_on_the_exported_file(exported):
    done = _perfgate("submission", "test", str(exported), "-q", "-W", "ignore::RuntimeWarning")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"--submission={exported}" in done.stdout and " passed" in done.stdout


def test_a_planted_wrong_submission_fails(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED)
    done = _perfgate("submission", "test", str(planted), "-q", "-k", "fp4_grid and 1-64-64")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert (
        "FAILED tests/submission/test_submission_contract.py::test_fp4_grid_inputs_match_exactly"
        in done.stdout
    )
    assert (
        done.stderr.strip().splitlines()[-1]
        == f"perfgate submission test: {planted} failed the contract"
    )


def test_an_unusable_file_is_exit_2_with_one_line(tmp_path):
    # (a file without custom_kernel: tests/perfgate/test_submission_load.py, through the probe)
    bad = tmp_path / "bad.py"
    bad.write_text("import no_such_module_h23\n")
    done = _perfgate("submission", "test", str(bad))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        f"perfgate submission test: error: {bad}: does not import (ModuleNotFoundError: No module"
    )


def test_bad_export_arguments_are_exit_2(tmp_path):
    done = _perfgate("submission", "export", "--out", str(tmp_path / "x.py"), "--target", "sm100")
    assert done.returncode == 2 and "--target must be one of gfx950, sm90" in done.stderr
    done = _perfgate("submission", "export", "--out", "kernels/gemm.py")
    assert done.returncode == 2 and "is an input of the export" in done.stderr
    assert done.stderr.count("\n") == 1
    done = _perfgate("submission", "test", str(tmp_path / "missing.py"))
    assert done.returncode == 2 and "missing.py: no such file" in done.stderr


def test_submission_is_an_option_of_the_whole_tree(request):
    # nox -s test -- --submission FILE: tests/conftest.py declares the plugin in pytest_plugins,
    # so this very run (any part of the tree) knows the option; `submission test` passes it
    from perfgate.submission import pytest_plugin

    assert request.config.pluginmanager.is_registered(pytest_plugin)
    assert request.config.getoption("--submission") is None


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


def test_export_renders_what_the_command_wrote(exported):
    assert exported.read_text() == export.render().text
