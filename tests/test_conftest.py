"""What tests/conftest.py costs a pytest process: torch and triton load only where a test runs.

The xdist controller, a pytest that stops at its options and one that only collects (the suite
starts such children in its own tests) run no test, so they never import torch (about 2 s of CPU
each on the project's machines) nor triton. A process that runs tests loads triton before the
first one, to make its interpreter skip discarded work (tests/perfgate/test_interpreter_skips.py)
and to count the launches of the GPU job's guard (tests/gpu_job.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# a test file whose own imports load neither torch nor triton
LIGHT = "tests/test_hypothesis_profile.py::test_ci_profile_has_no_shrink_phase"


@pytest.mark.parametrize(
    ("args", "code", "loaded"),
    [
        (["--co", LIGHT], 0, []),
        (["--co", "--hypothesis-profile", "bogus", LIGHT], 4, []),
        (["-n", "1", LIGHT], 0, []),  # this process is the controller; its worker runs the test
        (["-n", "0", LIGHT], 0, ["torch", "triton"]),  # this process runs the test
    ],
    ids=["collect-only", "usage-error", "xdist-controller", "runs-a-test"],
)
def test_a_pytest_that_runs_no_test_here_loads_neither_torch_nor_triton(args, code, loaded):
    child = (
        "import sys, pytest\n"
        f"rc = pytest.main(['-q', '-p', 'no:cacheprovider', *{args!r}])\n"
        "print(int(rc), sorted(m for m in ('torch', 'triton') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    last = done.stdout.splitlines()[-1] if done.stdout.strip() else ""
    assert last == f"{code} {loaded}", (done.stdout[-2000:], done.stderr[-2000:])
