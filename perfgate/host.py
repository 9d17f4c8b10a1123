"""``python -m perfgate host``: the host path of ``custom_kernel``, counted and gated exactly.

Per call after warm-up, per ranked shape, five counts, each broken down by the call path that
made it (``custom_kernel > gemm_a16wfp4 > _Bound.__call__ > torch.empty``):

- ``launches``: Triton launches (the JIT path, the compiled kernel's launcher, the interpreter),
  native reducer launches, and torch ops that run a kernel (anything but views, bare allocations
  and cross-device copies);
- ``allocations``: torch ops whose output owns storage that none of their inputs owned;
- ``copies``: torch ops whose tensors span two device types (host <-> device);
- ``syncs``: ``torch.cuda.synchronize``, stream and event waits, and ops that read a device
  value on the host (``.item()``);
- ``python_calls``: every call (Python or C) made from a frame of the launcher (``kernels/``,
  the modules of ``@triton.jit`` code excluded).

How: ``sys.setprofile`` for the calls and launches, a ``TorchDispatchMode`` for the ops. Both are
deterministic, so the gate is exact: any count above the baseline fails naming the count and the
path; a count below it is an improvement. Times are gated separately (timing mode ``host``).

On the CPU (Triton interpreter) the launch entry is replaced by a stub that only counts, so the
ranked shapes count in seconds; everything a launch does inside Triton is excluded on every device
(the interpreter copies tensors to numpy, a GPU does not). Launches, allocations, copies and syncs
then mean the same on the CPU as on a GPU; ``python_calls`` does not (the interpreter takes
Triton's JIT path and the Triton reducer, a GPU the compiled launcher and the native reducer), so
each device key has its own baseline: ``perf_baselines/<device-key>/host_counts.json``
(``interpreter`` for the CPU). The ``host.json`` beside it is the ``host`` timing mode's.

Exit codes as ``compare``: 0 no count grew; 1 a count grew (or a shape is missing); 2 unusable
input (missing or corrupt baseline, another device key or schema), with a one-line reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SCHEMA = 1
CATEGORIES = ("launches", "allocations", "copies", "syncs", "python_calls")
BASELINE_NAME = "host_counts.json"
REPO = Path(__file__).resolve().parent.parent
DEFAULT_BASELINES = REPO / "perf_baselines"
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
    "perfgate.host.",
    "torch._compile.",
    "torch._library.",
    "torch.utils._python_dispatch.",
)
_HOST_READS = frozenset({"aten._local_scalar_dense", "aten.nonzero", "aten.equal"})


class CountError(Exception):
    """A baseline or count file that cannot be used; the message is one line."""


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
    from kernels.gemm import _CompiledLaunch
    from kernels.reducer.native import NativeReducer

    codes.add(_CompiledLaunch.__call__.__code__)  # the bound GEMM launch
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
    """Files of the launcher: kernels/*.py, minus the modules that hold @triton.jit code."""
    import importlib

    from triton.runtime.jit import KernelInterface

    root = REPO / "kernels"
    files = set()
    for path in [*root.glob("*.py"), *root.glob("*/*.py")]:
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
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


def _short(name: str) -> str:
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

                stack.enter_context(_patched(InterpretedFunction, "run", _dry_launch))
            from kernels.reducer.native import NativeReducer

            stack.enter_context(_patched(NativeReducer, "plan", _counting_plan(NativeReducer.plan)))
            stack.enter_context(Ops())
            previous = sys.getprofile()
            sys.setprofile(self._profile)
            try:
                yield
            finally:
                sys.setprofile(previous)


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


# -- the gate --------------------------------------------------------------------------------------
def load(path: str | Path) -> dict:
    """A validated count file; CountError with a one-line reason otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CountError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CountError(f"{path}: is a directory, expected a host count file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        detail = " ".join(str(exc).split())
        raise CountError(f"{path}: unreadable ({type(exc).__name__}: {detail})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise CountError(f"{path}: not a host count file of schema {SCHEMA}")
    if not isinstance(data.get("python"), str):
        raise CountError(f"{path}: needs the Python version the calls were counted under")
    shapes = data.get("shapes")
    if not isinstance(data.get("device_key"), str) or not isinstance(shapes, dict) or not shapes:
        raise CountError(f"{path}: needs a device_key and at least one shape")
    for shape, cats in shapes.items():
        if not isinstance(cats, dict) or set(cats) != set(CATEGORIES):
            raise CountError(f"{path}: shape {shape} must hold exactly {', '.join(CATEGORIES)}")
        for cat, paths in cats.items():
            ok = isinstance(paths, dict) and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in paths.values()
            )
            if not ok:
                raise CountError(f"{path}: {shape} {cat} must map call paths to counts >= 0")
    return data


def compare(
    baseline: dict, current: dict, categories: tuple[str, ...] | None = None
) -> tuple[list[str], list[str]]:
    """(failures, improvements), one line each, over ``categories`` (default: all, which needs
    the same Python). Raises CountError for another device key or Python."""
    if baseline["device_key"] != current["device_key"]:
        raise CountError(
            f"baseline is for device {baseline['device_key']!r}, this run is "
            f"{current['device_key']!r}: counts of different devices are not comparable"
        )
    if categories is None:
        categories = CATEGORIES
        if baseline.get("python") != current.get("python"):
            raise CountError(
                f"baseline counted under Python {baseline.get('python')}, this run under "
                f"{current.get('python')}: python_calls differ between versions; record a "
                "baseline with this Python"
            )
    failures, improvements = [], []
    for shape, base_cats in baseline["shapes"].items():
        cats = current["shapes"].get(shape)
        if cats is None:
            failures.append(f"{shape}: missing from this run")
            continue
        for cat in categories:
            base, cur = base_cats[cat], cats[cat]
            for path in sorted(set(base) | set(cur)):
                b, c = base.get(path, 0), cur.get(path, 0)
                line = f"{shape}: {cat} {b} -> {c} per call at {path}"
                if c > b:
                    failures.append(line)
                elif c < b:
                    improvements.append(line)
    return failures, improvements


def totals(data: dict) -> dict[str, dict[str, int]]:
    return {s: {c: sum(p.values()) for c, p in cats.items()} for s, cats in data["shapes"].items()}


def _print_totals(data: dict) -> None:
    print(f"host counts per custom_kernel call ({data['device_key']}):")
    print("  " + "shape".ljust(20) + "".join(c.rjust(14) for c in CATEGORIES))
    for shape, t in totals(data).items():
        print("  " + shape.ljust(20) + "".join(str(t[c]).rjust(14) for c in CATEGORIES))


def _run(args: argparse.Namespace) -> int:
    import os

    from perfgate import atomic
    from perfgate.compare import check_outputs

    try:  # before the counting: a path that cannot be written is known at once
        check_outputs({"--json": args.json_out}, {"--check": args.check})
    except atomic.OutputError as exc:
        print(f"perfgate host: error: {exc}", file=sys.stderr)
        return 2
    if "triton" not in sys.modules and not _has_gpu():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton loads: the CPU counts
    if args.update and (args.gate or args.check is not None):
        print("perfgate host: error: --update records a baseline; it cannot also compare with one "
              "(drop --gate/--check)", file=sys.stderr)  # fmt: skip
        return 2
    try:
        baseline = None
        if args.check is not None:
            baseline = load(args.check)
        current = collect()
        if args.gate:
            path = Path(args.baselines_dir) / current["device_key"] / BASELINE_NAME
            if not path.is_file():
                raise CountError(
                    f"no host count baseline for device {current['device_key']!r} ({path}); "
                    "record one with `python -m perfgate host --update` and commit it"
                )
            baseline = load(path)
        _print_totals(current)
        own = Path(args.baselines_dir) / current["device_key"] / BASELINE_NAME
        check_outputs(
            {"--update": own if args.update else None, "--json": args.json_out},
            {"--gate": own if args.gate else None, "--check": args.check},
        )
        if args.json_out:
            atomic.write_json(args.json_out, current)
        if args.update:
            atomic.write_json(own, current)
            print(f"perfgate host: wrote {own}; commit it")
        if baseline is None:
            return 0
        failures, improvements = compare(baseline, current)
    except (CountError, atomic.OutputError) as exc:
        print(f"perfgate host: error: {exc}", file=sys.stderr)
        return 2
    for line in improvements:
        print(f"improvement: {line}")
    for line in failures:
        print(f"REGRESSION: {line}", file=sys.stderr)
    print(f"perfgate host: {len(failures)} count(s) grew, {len(improvements)} shrank")
    return 1 if failures else 0


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "host",
        help="count custom_kernel's launches, allocations, copies, syncs and calls; gate exactly",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check",
        metavar="BASELINE",
        help=f"compare with a count file (perf_baselines/<device-key>/{BASELINE_NAME})",
    )
    parser.add_argument(
        "--gate",
        action="store_true",
        help=f"compare with this device's <baselines-dir>/<device-key>/{BASELINE_NAME}",
    )
    parser.add_argument(
        "--baselines-dir",
        default=str(DEFAULT_BASELINES),
        help="root of the per-device baselines (default: perf_baselines in the repository)",
    )
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="write the counts as JSON")
    parser.add_argument(
        "--update",
        action="store_true",
        help=f"record this device's <baselines-dir>/<device-key>/{BASELINE_NAME} (commit it)",
    )
    parser.set_defaults(func=_run)


# -- the host timing mode --------------------------------------------------------------------------
INJECT_HOST_ENV = "MXFP4_BENCH_INJECT_HOST_US"
# Calls per sample: enough that perf_counter's resolution and the loop vanish (a sample spans
# about a millisecond), few enough that the launch queue never fills (two launches per call, far
# below the ~1000 a CUDA/HIP queue holds before a launch blocks), so a batch measures the host.
# Measured on the H200 (2026-12-01, 9 processes): batches of 64 and 256 gave the same per-call
# medians within 1%, and so did a batch queued behind a 4.5 ms GPU sleep: the GPU is not the bound.
HOST_BATCH = 64
# What a reference-normalised sample is expressed in: host time per call in units of the
# reference path, times 10 us (so a report reads like microseconds at a nominal CPU speed).
REFERENCE_SCALE_S = 10e-6


class HostTimed:
    """``calls`` back-to-back calls of ``work`` per invocation, cycling through ``arg_sets``;
    adds one sample to ``clock`` (perfgate.timing's, which pytest-benchmark reads as the
    benchmark's timer). The GPU is idle when a batch starts (the harness synchronises in the
    untimed setup), so a batch never waits on it.

    Without ``reference`` a sample is host seconds per call. With ``reference`` (a call of fixed
    code outside the launcher, :func:`reference_path`), each call of ``work`` is preceded by one
    call of ``reference``, both timed, and the sample is ``t_work / t_reference`` x
    :data:`REFERENCE_SCALE_S`: the host time in units of the reference measured in the same
    microseconds. Why: on the lent H200 (a KVM guest) the CPU's speed moved by up to 1.8x over
    seconds (a fixed pure-Python loop took 60 or 100-115 us, in and between processes; pinning,
    gc and batch size changed nothing), so absolute host times of unchanged code differed by
    56-79% between processes, and only a reference that sees the same CPU speed cancels that.
    ``history`` keeps each invocation's (work, reference) seconds per call (reference None
    without one), for the report's plain microseconds.
    """

    def __init__(
        self,
        work: Callable[..., Any],
        arg_sets: list[tuple],
        *,
        calls: int = HOST_BATCH,
        clock: Any = None,
        now: Callable[[], float] | None = None,
        reference: Callable[[], Any] | None = None,
    ):
        import time

        from perfgate import timing

        if not arg_sets or calls < 1:
            raise ValueError(f"need input sets and calls >= 1, got {len(arg_sets)} and {calls}")
        if reference is not None and not callable(reference):
            raise TypeError(f"reference must be callable, got {type(reference).__name__}")
        self.work, self.calls, self.reference = work, calls, reference
        self.clock = timing.CLOCK if clock is None else clock
        self.now = time.perf_counter if now is None else now
        self.sequence = [arg_sets[i % len(arg_sets)] for i in range(calls)]
        self.last: Any = None
        self.last_args: tuple = self.sequence[-1]
        self.history: list[tuple[float, float | None]] = []

    def __call__(self) -> Any:
        work, now, ref = self.work, self.now, self.reference
        if ref is None:
            start = now()
            for args in self.sequence:
                out = work(*args)
            elapsed = now() - start
            self.history.append((elapsed / self.calls, None))
            self.clock.add(elapsed / self.calls)
            self.last = out
            return out
        t_ref = t_work = 0.0
        for args in self.sequence:
            # interleaved call by call: both see the CPU speed of the same microseconds
            t0 = now()
            ref()
            t1 = now()
            out = work(*args)
            t2 = now()
            t_ref += t1 - t0
            t_work += t2 - t1
        if not t_ref > 0:
            raise RuntimeError(f"the reference path took {t_ref!r} s: the clock does not advance")
        self.history.append((t_work / self.calls, t_ref / self.calls))
        self.clock.add(t_work / t_ref * REFERENCE_SCALE_S)
        self.last = out
        return out


def reference_path(data: tuple, device: Any) -> Callable[[], Any]:
    """The host mode's reference: what any eager launcher of this call does, in fixed code
    outside ``kernels/``: read the operands' metadata in Python (a call key), allocate the
    output from the caching allocator, and launch one kernel through torch. It is made of the
    same kinds of work as a ``custom_kernel`` call (Python, the allocator, a driver launch), so
    a change of CPU speed moves both alike; it never changes with the code under test."""
    import torch

    tensors = tuple(t for t in data if isinstance(t, torch.Tensor))
    if len(tensors) < 2:
        raise ValueError("data must hold at least A and B as tensors (the leaderboard tuple)")
    shape = (tensors[0].shape[0], tensors[1].shape[0])
    bump = torch.zeros(16, dtype=torch.float32, device=device)

    def reference() -> Any:
        key = tuple((t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16) for t in tensors)
        out = torch.empty(shape, dtype=torch.bfloat16, device=device)
        bump.add_(1.0)
        return key, out

    return reference


def host_delay_seconds(environ: Any = None) -> float:
    """The host slowdown asked for with ``MXFP4_BENCH_INJECT_HOST_US`` (µs per call; 0 unset)."""
    import os

    from perfgate.timing import env_number

    environ = os.environ if environ is None else environ
    return env_number(environ, INJECT_HOST_ENV, "microseconds such as 5", 1e6) / 1e6


def with_host_delay(fn: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """``fn`` followed by ``seconds`` of pure host work (a spin: no GPU work, no sleep jitter)."""
    import time

    def slowed(*args: Any) -> Any:
        out = fn(*args)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        return out

    return slowed
