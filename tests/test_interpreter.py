"""kernels.interpreter: the interpreter's facts read without torch, and its dead overflow checks.

The sanitizer is dropped only because it asserts nothing there: the first test pins that on the
installed triton (a false condition passes ``device_assert`` unless ``debug`` is on), so a triton
whose interpreter starts asserting fails here before anything is dropped that checks.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernels.interpreter import drop_unasserted_overflow_checks, interpret_mode

INTERPRETED = pytest.mark.skipif(
    not interpret_mode(), reason="the kernels run compiled here, not in Triton's interpreter"
)


@pytest.fixture
def builder(monkeypatch):
    """Triton's interpreter builder, its options restored after the test."""
    from triton.runtime import interpreter

    monkeypatch.setattr(interpreter.interpreter_builder, "options",
                        interpreter.interpreter_builder.options)  # fmt: skip
    return interpreter.interpreter_builder


def _false_assertion():
    import triton.language as tl
    from triton.runtime import interpreter

    handle = interpreter.TensorHandle(np.array([False]), tl.int1)
    return lambda: interpreter.interpreter_semantic.device_assert(
        tl.tensor(handle, tl.int1), "int32 overflow (planted)", None
    )


def test_the_interpreters_assertions_are_off_unless_debug(builder):
    assert builder.options.debug is False
    assert _false_assertion()() is None  # what the sanitizer's verdict goes to
    builder.options = dataclasses.replace(builder.options, debug=True)
    with pytest.raises(AssertionError, match="planted"):
        _false_assertion()()


@INTERPRETED
def test_the_suite_interprets_without_the_dead_checks(builder):
    # tests/conftest.py dropped them; every kernel test compares its bits exactly as before
    assert builder.options.sanitize_overflow is False and builder.options.debug is False
    builder.options = dataclasses.replace(builder.options, sanitize_overflow=True)
    assert drop_unasserted_overflow_checks() is True
    assert builder.options.sanitize_overflow is False


@INTERPRETED
def test_checks_that_assert_are_kept(builder):
    builder.options = dataclasses.replace(builder.options, debug=True, sanitize_overflow=True)
    assert drop_unasserted_overflow_checks() is False
    assert builder.options.sanitize_overflow is True


def test_compiled_kernels_are_left_alone(builder, monkeypatch):
    before = builder.options
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert drop_unasserted_overflow_checks() is False
    assert builder.options is before


def test_the_interpreters_facts_need_no_torch():
    code = (
        "import sys\nfrom kernels.interpreter import interpret_mode, interpreter_problem\n"
        "interpret_mode(); interpreter_problem()\n"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "[]\n", done.stderr
