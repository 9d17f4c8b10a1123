"""Host time per call of the launcher, beside torch.matmul, on the six ranked shapes (a GPU tool).

``python -m lab.scripts.host_report [--json OUT]`` prints, per shape, the host microseconds per call
measured as the ``host`` timing mode measures them (batches of back-to-back calls on an idle GPU,
median over batches; :class:`perfgate.measure.host_timer.HostTimed`):

- ``bound``: ``custom_kernel`` as shipped (a call key seen before: launch only);
- ``unbound``: the same call with the launch cache cleared before each call, i.e. validation,
  config and plan lookup and Triton's JIT dispatch on every call: the per-call work of the
  launcher before the launch cache (issue 12's "before");
- ``torch.matmul``: bf16 ``A @ W^T`` with W the dequantized weight, the eager baseline every
  caller knows.

Every output is checked against the reference first. Not the code under test: a measuring tool.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
from collections.abc import Callable
from typing import Any

from perfgate import atomic
from perfgate.measure.clock import DeviceClock
from perfgate.measure.host_timer import HostTimed

BATCHES = 60


def host_us_per_call(
    work: Callable[..., Any], arg_sets: list[tuple], batches: int = BATCHES
) -> float:
    """Median over ``batches`` of the host µs per call of a back-to-back batch."""
    import torch

    clock = DeviceClock()
    timed = HostTimed(work, arg_sets, clock=clock)
    samples = []
    for i in range(batches + 3):  # three warm-up batches: allocator, caches
        torch.cuda.synchronize()
        before = clock.read()
        timed()
        if i >= 3:
            samples.append((clock.read() - before) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def _unbound(data: tuple) -> Any:
    from kernels import gemm

    gemm.clear_launch_cache()
    return gemm.custom_kernel(data)


def _before() -> Callable[..., Any] | None:
    """``custom_kernel`` of the launcher before the launch cache, when a checkout placed it at
    ``kernels/_gemm_before.py`` (``git show e32dfe4:kernels/gemm.py``): measured in the same run."""
    if importlib.util.find_spec("kernels._gemm_before") is None:
        return None
    return importlib.import_module("kernels._gemm_before").custom_kernel


def measure_shape(shape: Any) -> dict[str, float]:
    from kernels.gemm import custom_kernel
    from kernels.reference import (
        check_leaderboard,
        dequantized_weight,
        generate_input,
        reference_gemm,
    )

    sets = [generate_input(*shape, seed=100 + i, device="cuda") for i in range(4)]
    import torch

    a_dev = sets[0][0].device
    before = _before()
    fns = (custom_kernel, _unbound) + ((before,) if before else ())
    for d in sets:
        ref = reference_gemm(d[0], d[3], d[4])
        for fn in fns:
            report = check_leaderboard(fn(d), ref)
            if not report:
                raise AssertionError(f"{shape.id}: wrong output from {fn.__name__}: {report}")
    weights = [dequantized_weight(d[3], d[4], shape.k).to(a_dev, torch.bfloat16) for d in sets]
    mm_sets = [(d[0], w.T) for d, w in zip(sets, weights, strict=True)]

    row = {
        "bound": host_us_per_call(custom_kernel, [(d,) for d in sets]),
        "unbound": host_us_per_call(_unbound, [(d,) for d in sets], batches=20),
        "torch.matmul": host_us_per_call(torch.matmul, mm_sets),
    }
    if before:
        row["before"] = host_us_per_call(before, [(d,) for d in sets])
    return row


def breakdown(shape: Any) -> dict[str, float]:
    """Host µs per call of each step of a bound call on ``shape``: where the time goes."""
    import torch

    from kernels import gemm
    from kernels.reference import generate_input

    sets = [generate_input(*shape, seed=100 + i, device="cuda") for i in range(4)]
    a, _, _, b, s = sets[0]
    gemm.custom_kernel(sets[0])
    bound = gemm.bound_call(a, b, s)
    stream = torch._C._cuda_getCurrentRawStream(bound.index)
    out = bound(a, b, s, None)
    ws = bound.workspace(out, stream) if bound.split else None
    c = out if ws is None else ws.partials
    ptrs = (a.data_ptr(), b.data_ptr(), s.data_ptr(), c.data_ptr())
    steps: dict[str, tuple[Callable[..., Any], tuple]] = {
        "custom_kernel": (gemm.custom_kernel, (sets[0],)),
        "call key + lookup": (gemm.bound_call, (a, b, s)),
        "torch.empty (output)": (
            lambda: torch.empty(bound.m, bound.n, dtype=torch.bfloat16, device=bound.device),
            (),
        ),
        "current device + stream": (
            lambda: torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice()),
            (),
        ),
        "GEMM launch (compiled launcher)": (lambda: bound.launch(stream, *ptrs), ()),
        "GEMM launch (Triton JIT path)": (lambda: bound._launch_jit(a, b, s, c), ()),
    }
    if ws is not None and ws.reduction.launch is not None:
        steps["reducer launch (planned)"] = (lambda: ws.reduction.launch(out.data_ptr()), ())
    if bound.launch is None:
        del steps["GEMM launch (compiled launcher)"]
    return {name: host_us_per_call(fn, [args]) for name, (fn, args) in steps.items()}


COLUMNS = ("before", "bound", "unbound", "torch.matmul")


def render(table: dict[str, dict[str, float]], device: str) -> str:
    """The table as printed: one column per figure some shape has (``before`` only when a
    checkout placed the launcher of before the cache; a column of nothing is no column)."""
    cols = [c for c in COLUMNS if any(c in row for row in table.values())]
    missing = [(shape, c) for shape, row in table.items() for c in cols if c not in row]
    if missing:
        raise ValueError(
            f"shape {missing[0][0]} lacks {missing[0][1]}: every row needs each column"
        )
    lines = [f"host us per call, back to back ({device}):"]
    lines.append(f"  {'shape':<20}" + "".join(f"{c:>14}" for c in cols))
    for shape, row in table.items():
        lines.append(f"  {shape:<20}" + "".join(f"{row[c]:>14.1f}" for c in cols))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.scripts.host_report", description=__doc__)
    parser.add_argument("--json", dest="json_out", help="write the table as JSON")
    parser.add_argument(
        "--breakdown", action="store_true", help="also time each step of a bound call, per shape"
    )
    args = parser.parse_args(argv)

    try:  # before minutes of GPU time
        atomic.check_outputs({"--json": args.json_out})
    except atomic.OutputError as exc:
        print(f"lab.scripts.host_report: error: {exc}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("lab.scripts.host_report: needs a GPU", file=sys.stderr)
        return 2
    from kernels.shapes import LEADERBOARD

    table = {shape.id: measure_shape(shape) for shape in LEADERBOARD}
    print(render(table, torch.cuda.get_device_name()))
    if args.breakdown:
        for shape in LEADERBOARD:
            steps = table[shape.id]["steps"] = breakdown(shape)
            print(f"  {shape.id}: " + ", ".join(f"{k} {v:.1f}" for k, v in steps.items()))
    if args.json_out:
        atomic.write_json(args.json_out, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
