"""perfgate.interpreter: the interpreter chosen where there is no GPU, and the work it skips.

Each skipped pass is skipped only because its result is thrown away or already known, and a
test pins that premise on the installed triton, so a triton that breaks it fails here first:

- the overflow sanitizer's verdict goes to a ``device_assert`` that does nothing unless ``debug``
  is on;
- a device function call's re-patch of ``triton.language`` inside a launch sets nothing but the
  code the launch already set;
- the numpy dtype that holds a type's values depends on the type's class and name alone.

Every kernel test of the suite runs with all three skipped and compares its bits exactly.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from perfgate import interpreter as suite
from perfgate.interpreter import (
    drop_unasserted_overflow_checks,
    interpret_without_gpu,
    skip_repeated_language_patches,
)

REPO = Path(__file__).resolve().parents[2]
INTERPRETED = pytest.mark.skipif(
    not suite.interprets(), reason="the kernels run compiled here, not in Triton's interpreter"
)


@pytest.fixture
def builder(monkeypatch):
    """Triton's interpreter builder, its options restored after the test."""
    from triton.runtime import interpreter

    monkeypatch.setattr(interpreter.interpreter_builder, "options",
                        interpreter.interpreter_builder.options)  # fmt: skip
    return interpreter.interpreter_builder


# -- choosing the interpreter ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("gpu", "given", "want"),
    [(False, None, "1"), (False, "0", "0"), (True, None, None), (True, "1", "1")],
    ids=["no-gpu", "no-gpu-env-says-0", "gpu", "gpu-env-says-1"],
)
def test_without_a_gpu_the_interpreter_is_chosen_unless_the_environment_says(gpu, given, want):
    # in a fresh process: here triton is loaded, and the choice is never made after that
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if given is not None:
        env["TRITON_INTERPRET"] = given
    code = (
        "import os, sys\nfrom perfgate.interpreter import interpret_without_gpu\n"
        f"interpret_without_gpu({gpu})\nprint(os.environ.get('TRITON_INTERPRET'), "
        "'triton' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{want} False\n"


def test_once_triton_is_loaded_the_mode_stays(monkeypatch):
    assert "triton" in sys.modules
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    interpret_without_gpu(False)
    assert "TRITON_INTERPRET" not in os.environ


# -- the overflow sanitizer ------------------------------------------------------------------------
def _false_assertion():
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


@pytest.mark.skipif(suite.interprets(), reason="the kernels run in Triton's interpreter here")
def test_where_the_kernels_compile_the_suite_changes_nothing(builder):
    from triton.runtime import interpreter

    assert not isinstance(interpreter._patch_lang, suite._SkipRepeats)
    assert getattr(builder.options, "sanitize_overflow", True) is True


def test_compiled_kernels_are_left_alone(builder, monkeypatch):
    from triton.runtime import interpreter

    before, patch, dtypes = builder.options, interpreter._patch_lang, interpreter._get_np_dtype
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert suite.drop_discarded_work() is False
    assert builder.options is before and interpreter._patch_lang is patch
    assert interpreter._get_np_dtype is dtypes


# -- the repeated language patches -----------------------------------------------------------------
@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def _plus_max(x):
    return _twice(x) + tl.max(x, axis=0)


@triton.jit
def _nested_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    for _ in tl.static_range(2):
        x = _plus_max(x)
    tl.store(out_ptr + offs, x)


def _launch_nested() -> np.ndarray:
    x = torch.arange(-8, 8, dtype=torch.int32)
    out = torch.empty_like(x)
    _nested_kernel[(1,)](x, out, N=16)
    return out.numpy()


def _want_nested() -> np.ndarray:
    x = np.arange(-8, 8, dtype=np.int32)
    for _ in range(2):
        x = x * 2 + x.max()
    return x


def _code(value):
    """The code behind a patched attribute: a function's, a partial's or a property's getter's."""
    value = getattr(value, "func", getattr(value, "fget", value))
    return getattr(value, "__code__", value)


@INTERPRETED
def test_a_repeated_patch_inside_a_launch_sets_nothing_new(monkeypatch):
    # the premise, on triton's own _patch_lang: once a language module is patched in a launch,
    # every attribute a later device function call's patch of it sets already holds the same
    # code, and no builtin is left to swap
    from triton.runtime import interpreter

    skip = interpreter._patch_lang
    original = skip.patch
    launch_code = interpreter.GridExecutor.__call__.__code__
    patched: set[int] = set()
    repeated: list = []

    def spy(fn):
        languages = skip.languages(fn)
        scope = original(fn)
        if sys._getframe(1).f_code is launch_code:
            patched.clear()
        elif languages <= patched:
            repeated.append([(obj, name, before, getattr(obj, name))
                             for obj, name, before in scope._changes])  # fmt: skip
        patched.update(languages)
        return scope

    monkeypatch.setattr(interpreter, "_patch_lang", spy)
    assert (_launch_nested() == _want_nested()).all()
    assert len(repeated) >= 4  # _plus_max twice, _twice inside each, tl.max after the first
    for changes in repeated:
        assert changes, "a repeated patch set nothing: triton's layout changed"
        for obj, name, before, after in changes:
            assert not tl.core.is_builtin(before), (obj, name)
            assert _code(before) is _code(after), (obj, name)


@INTERPRETED
def test_the_suite_patches_the_language_once_a_launch(monkeypatch):
    from triton.runtime import interpreter

    skip = interpreter._patch_lang
    assert isinstance(skip, suite._SkipRepeats)  # tests/conftest.py installed it
    assert skip_repeated_language_patches() is True  # and a second call changes nothing
    assert interpreter._patch_lang is skip
    patched = []
    original = skip.patch
    monkeypatch.setattr(skip, "patch", lambda fn: patched.append(fn.__name__) or original(fn))
    before = {name: value for name, value in vars(tl).items()}
    tensor_before = dict(vars(tl.tensor))
    assert (_launch_nested() == _want_nested()).all()
    # the launch, and tl.max's module (triton.language.core) once: not at every call
    assert patched in (["_nested_kernel", "max"], ["_nested_kernel"])
    assert skip.launches == []
    assert dict(vars(tl)) == before and dict(vars(tl.tensor)) == tensor_before  # restored


class _Scope:
    def __init__(self, log: list, fn) -> None:
        self.log, self.fn = log, fn

    def restore(self) -> None:
        self.log.append(f"restore {self.fn.__name__}")


def _function_seeing(**names):
    namespace = dict(names)
    exec("def f():\n    pass\n", namespace)
    return namespace["f"]


def test_only_a_call_inside_a_launch_that_patched_its_modules_is_skipped():
    # the wrapper's own logic, on a planted _patch_lang: runs anywhere triton imports
    log: list = []

    def patch(fn):
        log.append(fn.__name__)
        return _Scope(log, fn)

    def launch(fn, body):  # stands for GridExecutor.__call__: patch, run, restore
        scope = skip(fn)
        try:
            body()
        finally:
            scope.restore()

    skip = suite._SkipRepeats(patch, launch.__code__)
    kernel, helper = _nested_kernel.fn, _twice.fn  # both see triton.language
    sees_core = _function_seeing(core=tl.core)
    sees_none = _function_seeing()

    def body():
        assert skip(helper).restore() is None  # already patched: skipped
        skip(sees_core)  # a module the launch did not patch
        skip(sees_core)  # patched by then: skipped
        skip(sees_none)  # triton's own check answers it

    launch(kernel, body)
    assert log == ["_nested_kernel", "f", "f", "restore _nested_kernel"]
    assert skip.launches == []
    skip(helper)  # outside a launch: patched, as triton does
    assert log[-1] == "_twice"

    def fails():
        raise RuntimeError("the kernel failed")

    with pytest.raises(RuntimeError):
        launch(kernel, fails)
    assert skip.launches == [] and log[-1] == "restore _nested_kernel"


# -- the numpy dtype table ------------------------------------------------------------------------
def _triton_types() -> list:
    """Every scalar type of triton.language, a pointer to each (const too, and in another
    address space), blocks of each in two shapes, and blocks of pointers: with repeats of one
    class and name made anew, so that a kept answer is reused where the premise must hold."""
    scalars = [v for v in vars(tl).values() if type(v) is tl.dtype]
    types = []
    for t in scalars:
        pointers = [tl.pointer_type(t), tl.pointer_type(t, const=True),
                    tl.pointer_type(t, address_space="shared")]  # fmt: skip
        types += [t, *pointers, tl.block_type(t, [16]), tl.block_type(t, [4, 32])]
        types += [tl.block_type(p, [8]) for p in pointers]
    return types + [tl.block_type(t, [16]) for t in scalars]  # the same class and name again


def _answers(get, types) -> list:
    out = []
    for t in types:
        try:
            out.append(get(t))
        except Exception as exc:  # a type the table lacks: the error, every time
            out.append(type(exc))
    return out


def test_a_types_class_and_name_decide_its_numpy_dtype():
    # the premise, on the installed triton's _get_np_dtype: keeping its answers per (class,
    # name) of the type answers every type as the function itself does
    from triton.runtime import interpreter

    original = getattr(interpreter._get_np_dtype, "get", interpreter._get_np_dtype)
    types = _triton_types()
    want = _answers(original, types)
    kept = suite._KeptAnswers(original)
    assert _answers(kept, types) == want
    assert _answers(kept, types) == want  # from the kept answers now
    assert len(kept.answers) < len(types)  # the repeats were answered from it
    assert np.dtype(np.float32) in want and np.dtype(np.uint64) in want


def test_a_nameless_type_is_asked_each_time():
    calls = []
    kept = suite._KeptAnswers(lambda t: calls.append(t) or np.dtype(np.int8))
    nameless = object()
    assert kept(nameless) == np.dtype(np.int8) and kept(nameless) == np.dtype(np.int8)
    assert calls == [nameless, nameless] and kept.answers == {}


@INTERPRETED
def test_the_suite_keeps_the_numpy_dtypes():
    # tests/conftest.py kept them; every kernel test compares its bits exactly as before
    from triton.runtime import interpreter

    assert isinstance(interpreter._get_np_dtype, suite._KeptAnswers)
    assert suite.keep_numpy_dtypes() is True  # once: not wrapped again
    assert not isinstance(interpreter._get_np_dtype.get, suite._KeptAnswers)
