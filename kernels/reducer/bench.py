"""Native vs Triton split-K reducer on this GPU: ``python -m kernels.reducer.bench``.

For every split-K leaderboard shape (M, N) and S in {2, 4, 8} it first checks that both reducers
give the same bits, then times each with CUDA/HIP events:

- ``call``: events around one ``reduce_partials``-level call (host launch path included), median
  of ``--reps`` calls;
- ``graph``: one CUDA graph of ``--graph-calls`` back-to-back calls, replayed; time per call, so
  the host path is excluded (what the reduction costs inside a captured GEMM).

The partials are not flushed from L2 between calls: in the GEMM they are read right after the
split kernels wrote them, so they are in L2 there too. Needs a built native reducer
(``nox -s build``); this is a validation tool, not a CI gate (perfgate owns the baselines).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

SHAPES = [(4, 2880), (16, 2112), (32, 4096), (32, 2880), (64, 7168), (256, 3072)]
SPLITS = [2, 4, 8]


def _per_call_us(fn, reps: int) -> float:
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        start[i].record()
        fn()
        end[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(start, end, strict=True)) * 1e3


def _graph_us(fn, calls: int, replays: int) -> float | None:
    from kernels.tune import graph_time

    try:
        return graph_time([fn] * calls, reps=replays) * 1e6
    except RuntimeError as exc:  # a launcher that cannot be captured: say so, do not fail
        print(f"graph capture failed: {exc}", file=sys.stderr)
        return None


def run(reps: int = 200, graph_calls: int = 20, replays: int = 20) -> list[dict]:
    from kernels import splitk

    splitk.reset_backend_choice()
    if splitk.reducer_backend() != "native":
        raise SystemExit(
            f"no native reducer: {splitk.reducer_backend_reason()}; run `nox -s build` first"
        )
    native = splitk._choice(None).native
    idx = torch.cuda.current_device()
    rows = []
    for m, n in SHAPES:
        for s in SPLITS:
            partials = torch.randn(s, m, n, device="cuda")
            out_native = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            out_triton = torch.empty_like(out_native)

            def call_native(p=partials, o=out_native, s=s, m=m, n=n):
                splitk.reduce_partials(p, o)

            def call_triton(p=partials, o=out_triton, s=s, m=m, n=n):
                splitk._check_args(p, o)  # the same validation reduce_partials does
                splitk._reduce_triton(p, o, s, m, n)

            def raw_native(p=partials, o=out_native, s=s, m=m, n=n, idx=idx):
                # Inside a graph capture: the capture stream is the current stream.
                native(p.data_ptr(), o.data_ptr(), s, m, n, n, splitk._current_stream(idx))

            for _ in range(20):  # warm-up: JIT, module load, clocks
                call_native()
                call_triton()
            torch.cuda.synchronize()
            same = torch.equal(out_native.view(torch.int16), out_triton.view(torch.int16))
            row = {
                "M": m,
                "N": n,
                "S": s,
                "bits_equal": same,
                "native_call_us": _per_call_us(call_native, reps),
                "triton_call_us": _per_call_us(call_triton, reps),
                "native_graph_us": _graph_us(raw_native, graph_calls, replays),
                "triton_graph_us": _graph_us(call_triton, graph_calls, replays),
                "hbm_bytes": s * m * n * 4 + m * n * 2,
            }
            rows.append(row)
    return rows


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:7.2f}"


def print_table(rows: list[dict]) -> None:
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
    parser = argparse.ArgumentParser(
        prog="python -m kernels.reducer.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--reps", type=int, default=200, help="timed calls per reducer and shape")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: no GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 1
    rows = run(reps=args.reps)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=2)
    return 0 if all(r["bits_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
