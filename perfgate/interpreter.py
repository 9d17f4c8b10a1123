"""Triton's interpreter as the suite runs the kernels on a machine without a GPU.

Every process that may run them there (the test session, a loaded submission, ``perfgate host``,
explain's host census) decides the same way: :func:`interpret_without_gpu` before triton loads,
then :func:`drop_discarded_work` once it may. The second makes the interpreter skip work whose
result it throws away or already has; every value and every assertion stay as they were (every kernel test
compares bit for bit, and tests/perfgate/test_interpreter_skips.py pins each premise on the installed
triton).

Nothing here imports ``kernels``: a revision's worker chooses its revision's kernels after this
runs. Whether triton interprets is asked of triton itself (``triton.knobs.runtime.interpret``).
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import os
import sys


def interpret_without_gpu(gpu_available: bool) -> None:
    """Where there is no GPU, run the kernels in Triton's interpreter (``TRITON_INTERPRET=1``).

    The environment's own ``TRITON_INTERPRET`` wins, and nothing changes once triton is loaded:
    a process whose kernels were decorated in one mode never meets them in the other."""
    if not gpu_available and "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")


def interpret_at_first_triton_import() -> None:
    """:func:`interpret_without_gpu` decided when triton is first imported, not now: torch (the
    GPU check) loads only in a process that imports triton. Where triton is loaded already, now
    (it changes nothing then)."""
    if "triton" in sys.modules:
        return
    if not any(isinstance(f, _ChooseAtTritonImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _ChooseAtTritonImport())


class _ChooseAtTritonImport(importlib.abc.MetaPathFinder):
    """Finds nothing: at the first ``import triton`` it chooses the mode, leaves, and lets the
    import go on."""

    def find_spec(self, name, path=None, target=None):
        if name == "triton":
            sys.meta_path.remove(self)
            import torch

            interpret_without_gpu(torch.cuda.is_available())
        return None


def interprets() -> bool:
    """Whether triton runs ``@triton.jit`` functions in its interpreter (imports triton)."""
    import triton

    return bool(getattr(getattr(getattr(triton, "knobs", None), "runtime", None), "interpret", 0))


def drop_discarded_work() -> bool:
    """:func:`drop_unasserted_overflow_checks`, :func:`skip_repeated_language_patches` and
    :func:`keep_numpy_dtypes`; True when all hold. Imports triton. A no-op unless triton
    interprets."""
    checks = drop_unasserted_overflow_checks()
    patches = skip_repeated_language_patches()
    dtypes = keep_numpy_dtypes()
    return checks and patches and dtypes


def drop_unasserted_overflow_checks() -> bool:
    """Stop Triton's interpreter computing overflow checks whose verdict it throws away; True
    when it no longer does.

    Without ``debug`` (never set in the interpreter's options) the interpreter, like the compiled
    code, drops every ``device_assert``; yet before that it widens each int32 add, sub and mul of
    a kernel to int64 and compares the result with the int32 range, only to discard the
    comparison: about a quarter of an interpreted kernel call, for no check at all. Turning the
    sanitizer off leaves every value and every assertion as they were. Where the options read
    otherwise (``debug`` on: the checks do assert; another layout: another triton), nothing
    changes."""
    if not interprets():
        return False
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if not dataclasses.is_dataclass(options) or getattr(options, "debug", True):
        return False
    if getattr(options, "sanitize_overflow", None) is True:
        builder.options = dataclasses.replace(options, sanitize_overflow=False)
    return getattr(builder.options, "sanitize_overflow", None) is False


def skip_repeated_language_patches() -> bool:
    """Stop Triton's interpreter re-patching ``triton.language`` at every call of one
    ``@triton.jit`` function from another; True when it no longer does.

    A launch patches the language modules its kernel's module sees (each builtin swapped for an
    interpreted one) and restores them when it ends. Inside it, every call of a device function
    (the kernels' own helpers, ``tl.max``, ``tl.cdiv``) patches the modules its own module sees:
    ``inspect.getmembers`` over ``triton.language``, its tensor and math, at every call (a fifth
    to a third of an interpreted GEMM call), never restored. Once a module is patched in a
    launch, by the launch or by a device function, a later patch of it changes nothing: the
    builtins it looks for are already swapped and the rest is set to the same code. So a device
    function call inside a launch whose modules are all patched there already skips it; any
    other call (outside a launch, or seeing a module not yet patched) patches as before. Where
    the interpreter is laid out otherwise (another triton), nothing changes."""
    if not interprets():
        return False
    from triton.runtime import interpreter

    patch = getattr(interpreter, "_patch_lang", None)
    if isinstance(patch, _SkipRepeats):
        return True
    # the launch's patch (restored at its end) and a device function call's (never restored)
    owners = (getattr(interpreter, n, None) for n in ("GridExecutor", "InterpretedFunction"))
    calls = [getattr(vars(o).get("__call__") if o else None, "__code__", None) for o in owners]
    if patch is None or not all(c is not None and "_patch_lang" in c.co_names for c in calls):
        return False
    interpreter._patch_lang = _SkipRepeats(patch, calls[0])
    return True


def keep_numpy_dtypes() -> bool:
    """Stop Triton's interpreter rebuilding its table of numpy dtypes for every value it makes;
    True when it no longer does.

    ``_get_np_dtype`` answers which numpy dtype holds a Triton type's values by building a dict
    of about twenty types, hashing each, at every call: a tenth of an interpreted GEMM call. Its
    answer depends on the type alone, and a type's class and name identify it (a block's name
    holds its shape and element type, a pointer's its element type), so the answer is kept per
    class and name. A type without a name, or one the table lacks (an error, as before), is
    asked anew each time. Where the interpreter has no such function (another triton), nothing
    changes."""
    if not interprets():
        return False
    from triton.runtime import interpreter

    get = getattr(interpreter, "_get_np_dtype", None)
    if get is None or isinstance(get, _KeptAnswers):
        return get is not None
    interpreter._get_np_dtype = _KeptAnswers(get)
    return True


class _KeptAnswers:
    """A function of a Triton type, its answers kept per (class, name) of the type."""

    def __init__(self, get) -> None:
        self.get = get
        self.answers: dict[tuple[type, str], object] = {}

    def __call__(self, tt_dtype):
        name = getattr(tt_dtype, "name", None)
        if not isinstance(name, str):
            return self.get(tt_dtype)
        key = (type(tt_dtype), name)
        answer = self.answers.get(key)
        if answer is None:
            answer = self.answers[key] = self.get(tt_dtype)
        return answer


class _SkipRepeats:
    """Triton's ``_patch_lang``, skipping a device function's repeated patch inside a launch."""

    def __init__(self, patch, launch_code) -> None:
        import triton.language as tl

        self.patch = patch
        self.launch_code = launch_code  # GridExecutor.__call__: a launch, restored at its end
        self.tl, self.core = tl, tl.core  # the modules triton's _patch_lang patches
        self.launches: list[set[int]] = []  # per running launch, the modules patched in it

    def languages(self, fn) -> frozenset[int]:
        """The language modules ``fn``'s module sees (by id): what patching for it patches."""
        return frozenset(id(v) for v in fn.__globals__.values() if v is self.tl or v is self.core)

    def __call__(self, fn):
        languages = self.languages(fn)
        if sys._getframe(1).f_code is self.launch_code:
            scope = self.patch(fn)
            patched = set(languages)
            self.launches.append(patched)
            return _LaunchScope(scope, self.launches, patched)
        if not (self.launches and languages):  # (no language: triton's own check answers)
            return self.patch(fn)
        patched = self.launches[-1]
        if languages <= patched:
            return _NOTHING_PATCHED
        scope = self.patch(fn)
        patched |= languages  # never restored: patched for the rest of the launch
        return scope


class _LaunchScope:
    """A launch's patch scope: restoring it also ends the launch."""

    def __init__(self, scope, launches: list[set[int]], patched: set[int]) -> None:
        self.scope, self.launches, self.patched = scope, launches, patched

    def restore(self) -> None:
        try:
            self.scope.restore()
        finally:
            self.launches[:] = [p for p in self.launches if p is not self.patched]


class _NothingPatched:
    def restore(self) -> None:
        pass


_NOTHING_PATCHED = _NothingPatched()
