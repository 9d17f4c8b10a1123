"""kernels.interpreter: the interpreter's facts, read without torch or triton.

(What the suite makes the interpreter skip is perfgate's: tests/perfgate/test_interpreter_skips.py.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_interpreters_facts_need_no_torch():
    code = (
        "import sys\nfrom kernels.interpreter import interpret_mode, interpreter_problem\n"
        "interpret_mode(); interpreter_problem()\n"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "[]\n", done.stderr
