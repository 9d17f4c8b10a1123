"""The host-count census of ``custom_kernel`` (``perfgate host``): the instrument.

Per call after warm-up, per ranked shape, five counts by call path
(:data:`perfgate.gate.host_counts.CATEGORIES`), made deterministic by ``sys.setprofile`` and a
``TorchDispatchMode``. Its gate (any count above the baseline a regression, any below an
improvement) is :mod:`perfgate.gate.host_counts`; the command's help
(:mod:`perfgate.commands.host`) says what each count means.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from perfgate.gate.host_counts import CATEGORIES
from perfgate.gate.paths import SCHEMA

WARMUP_CALLS = 2
COUNTED_CALLS = 3
_SYNC_NAMES = frozenset(
    {
        "torch.cuda.synchronize",
        "torch.cuda.streams.Stream.synchronize",
        "torch.cuda.streams.Event.synchronize",
        "torch.cuda.streams.Stream.wait_event",
        "torch.cuda.streams.Stream.wait_stream",
    }
)
_ALLOC_ONLY_OPS = frozenset(
    {
        "aten.empty",
        "aten.empty_strided",
        "aten.empty_like",
        "aten.new_empty",
        "aten.new_empty_strided",
    }
)
# the counting machinery itself (the dispatch mode's entry, torch's Python-mode plumbing)
_INSTRUMENTATION = (
    f"{__name__}.",
    "torch._compile.",
    "torch._library.",
    "torch.utils._python_dispatch.",
)
_HOST_READS = frozenset({"aten._local_scalar_dense", "aten.nonzero", "aten.equal"})


# -- what is counted -------------------------------------------------------------------------------
def _launch_codes() -> set:
    """Code objects of every launch entry: a call to one is one launch."""
    codes = set()
    with contextlib.suppress(ImportError):
        from triton.runtime.jit import JITFunction

        codes.add(JITFunction.run.__code__)
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction

        codes.add(InterpretedFunction.run.__code__)
    with contextlib.suppress(ImportError):
        from triton.compiler.compiler import CompiledKernel

        consts = CompiledKernel.__getitem__.__code__.co_consts
        codes.update(c for c in consts if getattr(c, "co_name", None) == "runner")
    from kernels.gemm import launch_entry_codes
    from kernels.reducer.native import NativeReducer

    codes.update(launch_entry_codes())  # the bound GEMM launch
    codes.add(NativeReducer.__call__.__code__)
    codes.add(_CountedPlan.__call__.__code__)  # the bound reduction, seen through its wrapper
    codes.add(_dry_launch.__code__)
    return codes


class _CountedPlan:
    """A native reduction plan made while counting. The launcher's planned reduction is a
    C-level ``functools.partial`` over a ctypes function: no Python frame, so ``sys.setprofile``
    never sees it. While counting, :meth:`NativeReducer.plan` returns its plan in this wrapper,
    whose call is a launch entry; :func:`count_call` binds every call key afresh under it and
    drops those bindings afterwards, so no wrapped plan outlives the count. The wrapper's frame
    is perfgate's, outside the launcher's scope; the call to it from the launcher is one of its
    ``python_calls`` (a split-K call counts one more than the bare partial costs)."""

    __slots__ = ("launch",)

    def __init__(self, launch: Callable[[int], int]) -> None:
        self.launch = launch

    def __call__(self, out_ptr: int) -> int:
        return self.launch(out_ptr)


def _counting_plan(original: Callable[..., Any]) -> Callable[..., Any]:
    def plan(self: Any, *args: Any) -> _CountedPlan:
        return _CountedPlan(original(self, *args))

    return plan


def _dry_launch(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
    """The interpreter's launch, counted but not run (the counts do not depend on the math)."""


def _scope_files() -> frozenset[str]:
    """Files of the launcher: kernels/*.py, minus the modules that hold @triton.jit code. The
    ``kernels`` package is the one imported (a revision's, where ``perfgate explain`` or an A/B
    worker put another tree's first on the path), named by the paths its modules run from."""
    from triton.runtime.jit import KernelInterface

    import kernels

    root = Path(kernels.__file__).parent
    files = set()
    for path in [*root.glob("*.py"), *root.glob("*/*.py")]:
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        try:
            module = importlib.import_module(name)
        except Exception:  # a module that needs what this machine lacks is not on the path
            continue
        if not any(isinstance(v, KernelInterface) for v in vars(module).values()):
            files.add(str(path))
    return frozenset(files)


def _py_name(code: Any, module: str | None) -> str:
    return f"{module}.{getattr(code, 'co_qualname', code.co_name)}"


def _c_name(fn: Any) -> str:
    owner = getattr(fn, "__self__", None)
    qual = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    module = getattr(fn, "__module__", None)
    if module is None and owner is not None and not isinstance(owner, type):
        module = type(owner).__module__
    return f"{module}.{qual}" if module else qual


# The census's own stubs (the counted launch) appear in call paths under the gate's name, a label
# that the baselines hold and that does not move with the module holding the code.
_STUB_LABEL = "perfgate.host."


def _short(name: str) -> str:
    if name.startswith(f"{__name__}."):
        return _STUB_LABEL + name[len(__name__) + 1 :]
    return name.removeprefix("kernels.")


class Census:
    """Counts everything one block of calls does on the host path (see the module docstring)."""

    def __init__(self, *, dry: bool = False) -> None:
        self.counts = {c: Counter() for c in CATEGORIES}
        self._scope = _scope_files()
        self._launch = _launch_codes()
        self._chain: list[str] = []
        self._frames: list[Any] = []
        self._inside_launch = 0
        self._dry = dry

    def _path(self, leaf: str) -> str:
        return " > ".join([*self._chain, _short(leaf)])

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self._on_call(frame)
        elif event == "return":
            if self._frames and self._frames[-1] is frame:
                self._frames.pop()
                self._chain.pop()
            if frame.f_code in self._launch:
                self._inside_launch -= 1
        elif event == "c_call" and not self._inside_launch:
            name = _c_name(arg)
            if frame.f_code.co_filename in self._scope and not name.startswith(_INSTRUMENTATION):
                self.counts["python_calls"][self._path(name)] += 1
                if name in _SYNC_NAMES:
                    self.counts["syncs"][self._path(name)] += 1

    def _on_call(self, frame: Any) -> None:
        code = frame.f_code
        if code in self._launch:
            if not self._inside_launch:
                name = _py_name(code, frame.f_globals.get("__name__"))
                self.counts["launches"][self._path(name)] += 1
            self._inside_launch += 1
            return
        if self._inside_launch:
            return
        name = _py_name(code, frame.f_globals.get("__name__"))
        if name.startswith(_INSTRUMENTATION):
            return
        caller = frame.f_back
        from_launcher = caller is not None and caller.f_code.co_filename in self._scope
        entering = not self._frames and code.co_filename in self._scope
        if from_launcher or entering:
            self.counts["python_calls"][self._path(name)] += 1
        if name in _SYNC_NAMES:
            self.counts["syncs"][self._path(name)] += 1
        if code.co_filename in self._scope:
            self._frames.append(frame)
            self._chain.append(_short(name))

    def on_op(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """One torch op (from the dispatch mode): classify it."""
        if self._inside_launch:
            return
        import torch
        from torch.utils._pytree import tree_flatten

        name = str(func.overloadpacket)
        path = self._path(name)
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        owned = {t.untyped_storage().data_ptr() for t in ins}
        fresh = [t for t in outs if t.untyped_storage().nbytes() and
                 t.untyped_storage().data_ptr() not in owned]  # fmt: skip
        self.counts["allocations"][path] += len(fresh)
        devices = {t.device.type for t in ins + outs}
        crosses = len(devices) > 1
        if name in _HOST_READS:
            # reading a device value on the host waits for the device (the CPU runs the same op)
            self.counts["syncs"][path] += 1
            self.counts["copies"][path] += 1
        elif crosses:
            self.counts["copies"][path] += 1
        elif name not in _ALLOC_ONLY_OPS and not func.is_view:
            self.counts["launches"][path] += 1

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        from torch.utils._python_dispatch import TorchDispatchMode

        census = self

        class Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                census.on_op(func, args, kwargs, out)
                return out

        with contextlib.ExitStack() as stack:
            if self._dry:
                from triton.runtime.interpreter import InterpretedFunction

                import kernels.device

                stack.enter_context(_patched(InterpretedFunction, "run", _dry_launch))
                if getattr(kernels.device, "INTERPRETER_PROBLEM", None) is not None:
                    # every launch is stubbed: whether this triton's interpreter could run the
                    # kernels (triton < 3.8, as on the H200) does not matter to a dry count, so
                    # the launcher's guard against such an interpreter is lifted while counting
                    # (a revision without that guard is untouched)
                    stack.enter_context(_patched(kernels.device, "INTERPRETER_PROBLEM", None))
            from kernels.reducer.native import NativeReducer

            stack.enter_context(_patched(NativeReducer, "plan", _counting_plan(NativeReducer.plan)))
            stack.enter_context(Ops())
            previous = sys.getprofile()
            sys.setprofile(self._profile)
            try:
                yield
            finally:
                sys.setprofile(previous)


def load_dispatch_machinery() -> None:
    """Run one op under an empty dispatch mode, unprofiled. torch imports the machinery of its
    Python dispatch modes (sympy, torch.distributed.tensor, dynamo's utilities) at their first
    use: inside the first profiled call that was about 590,000 profiled Python calls, 7 s of a
    CPU census, counted nowhere but paid on every fresh process."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Passthrough():
        torch.empty(1).add_(1)


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


def count_call(call: Callable[[], Any], *, dry: bool, calls: int = COUNTED_CALLS) -> dict:
    """Per-call counts of ``call`` after warm-up; RuntimeError if the calls differ (the gate
    needs a deterministic path)."""
    import torch

    from kernels.gemm import clear_launch_cache

    per_call = []
    load_dispatch_machinery()
    clear_launch_cache()  # every binding made while counting (its plans wrapped: _CountedPlan)
    try:
        for i in range(WARMUP_CALLS + calls):
            census = Census(dry=dry)
            with census.active():
                call()
            if i >= WARMUP_CALLS:
                per_call.append({c: dict(sorted(census.counts[c].items())) for c in CATEGORIES})
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    finally:
        clear_launch_cache()  # and none kept: later calls launch unwrapped
    if any(p != per_call[0] for p in per_call):
        raise RuntimeError("the host path differs between identical calls: counts are not stable")
    return per_call[0]


def collect(shapes: Any = None, *, dry: bool | None = None) -> dict:
    """The count file for this device: per ranked shape, per category, per path."""
    import torch

    from kernels.device import device_info
    from kernels.gemm import custom_kernel
    from kernels.reference import generate_input
    from kernels.shapes import LEADERBOARD

    gpu = torch.cuda.is_available()
    dry = not gpu if dry is None else dry
    device = "cuda" if gpu else "cpu"
    result = {}
    for shape in LEADERBOARD if shapes is None else shapes:
        data = generate_input(*shape, seed=0, device=device)
        result[shape.id] = count_call(lambda data=data: custom_kernel(data), dry=dry)
    return {
        "schema": SCHEMA,
        "device_key": device_info().key,
        "python": python_version(),
        "dry_launches": dry,
        "calls_counted": COUNTED_CALLS,
        "shapes": result,
    }


def python_version() -> str:
    """Call counts name CPython's functions, so they hold for one minor version."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"
