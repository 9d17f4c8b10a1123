"""Native vs Triton split-K reducer on this GPU: ``python -m lab.scripts.reducer_bench``.

For every reducer case the shipped configs create (:data:`perfgate.catalog.REDUCER`: each target's
split count for each ranked shape) it first checks that both reducers give the same bits, then
times each with the gate's timer (:mod:`perfgate.measure.timing`) and cache policy (a flush of twice the
last-level cache before every round, inputs rotated over several copies):

- ``call``: events around one ``reduce_partials`` call (host launch path included), median of
  ``--reps`` flushed rounds;
- ``graph``: one CUDA/HIP graph calling the reducer once per input copy, replayed; time per call,
  so the host path is excluded (what the reduction costs inside a captured GEMM).

Needs a built native reducer (``nox -s build``); this is a validation tool, not a CI gate
(perfgate owns the baselines).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from perfgate import atomic
from perfgate.catalog import REDUCER, ReducerCase, reducer_set_bytes
from perfgate.measure.flush import gate_flush, rotation_count
from perfgate.measure.launch import median_per_call, probe_median

SEED = 20250


def rotating(calls: Sequence[Callable[[], Any]]) -> Callable[[], Any]:
    """One call per invocation, cycling through ``calls`` (one per input copy)."""
    order = itertools.cycle(calls)
    return lambda: next(order)()


def time_case(case: ReducerCase, flush: Any, cache_bytes: int, reps: int, replays: int) -> dict:
    import torch

    from kernels import splitk
    from kernels.reducer.cases import bf16_mismatch

    copies = rotation_count(reducer_set_bytes(case), cache_bytes)
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    partials = [
        torch.randn((case.splits, case.m, case.n), generator=gen, device="cuda")
        for _ in range(copies)
    ]
    row: dict[str, Any] = {"M": case.m, "N": case.n, "S": case.splits, "copies": copies}
    outs: dict[str, list] = {}
    for backend in splitk.BACKENDS:
        outs[backend] = [
            torch.empty((case.m, case.n), dtype=torch.bfloat16, device="cuda") for _ in partials
        ]
        calls = [
            lambda p=p, o=o, b=backend: splitk.reduce_partials(p, o, backend=b)
            for p, o in zip(partials, outs[backend], strict=True)
        ]
        for call in calls:  # JIT and module load outside the numbers
            call()
        torch.cuda.synchronize()
        row[f"{backend}_call_us"] = probe_median(rotating(calls), flush, calls=1, rounds=reps) * 1e6
        graph_s, launch = median_per_call(calls, flush, rounds=replays)
        if launch.kind == "graph":
            row[f"{backend}_graph_us"] = graph_s * 1e6
        else:  # a launcher that cannot be captured: say so, do not fail
            print(f"{backend} S={case.splits}: no graph ({launch.note})", file=sys.stderr)
            row[f"{backend}_graph_us"] = None
    torch.cuda.synchronize()
    mismatches = [bf16_mismatch(n, t) for n, t in zip(outs["native"], outs["triton"], strict=True)]
    row["bits_equal"] = all(m is None for m in mismatches)
    row["hbm_bytes"] = reducer_set_bytes(case)
    return row


def run(reps: int = 200, replays: int = 20, cases: Sequence[ReducerCase] = REDUCER) -> list[dict]:
    import torch

    from kernels import splitk
    from kernels.device import device_info

    splitk.reset_backend_choice()
    if splitk.reducer_backend() != "native":
        raise SystemExit(
            f"no native reducer: {splitk.reducer_backend_reason()}; run `nox -s build` first"
        )
    cache_bytes = device_info().last_level_cache_bytes
    flush = gate_flush(cache_bytes, torch.device("cuda"))
    return [time_case(case, flush, cache_bytes, reps, replays) for case in cases]


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:7.2f}"


def print_table(rows: list[dict]) -> None:
    import torch

    header = [
        "M",
        "N",
        "S",
        "bits equal",
        "native call us",
        "triton call us",
        "native graph us",
        "triton graph us",
    ]
    lines = [
        [
            str(r["M"]), str(r["N"]), str(r["S"]), "yes" if r["bits_equal"] else "NO",
            _fmt(r["native_call_us"]), _fmt(r["triton_call_us"]),
            _fmt(r["native_graph_us"]), _fmt(r["triton_graph_us"]),
        ]
        for r in rows
    ]  # fmt: skip
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print("\t".join(header))
        for line in lines:
            print("\t".join(line))
        return
    table = Table(title=f"split-K reducer on {torch.cuda.get_device_name()}")
    for h in header:
        table.add_column(h, justify="right")
    for line in lines:
        table.add_row(*line)
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(
        prog="python -m lab.scripts.reducer_bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--reps", type=int, default=200, help="timed calls per reducer and case")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    try:  # before the measurement
        atomic.check_outputs({"--json": args.json})
    except atomic.OutputError as exc:
        print(f"lab.scripts.reducer_bench: error: {exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("lab.scripts.reducer_bench: error: no GPU (torch.cuda.is_available() is False)",
              file=sys.stderr)  # fmt: skip
        return 2
    rows = run(reps=args.reps)
    print_table(rows)
    if args.json:
        atomic.write_json(args.json, {"device": torch.cuda.get_device_name(), "rows": rows})
    return 0 if all(r["bits_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
