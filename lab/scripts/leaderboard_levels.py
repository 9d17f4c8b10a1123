"""Per-process levels of leaderboard-mode timing (a GPU tool): where its run-to-run spread lives.

``python -m lab.scripts.leaderboard_levels [--processes 5] [--epochs 6] [--rounds 160]
[--keep-placement] [--json OUT]`` starts ``--processes`` worker processes one after another.
Each times the six ranked shapes as leaderboard mode does (the 2 GiB flush of
:func:`perfgate.measure.flush.leaderboard_flush`, events around one ``custom_kernel`` call, rotating
:func:`perfgate.measure.flush.rotation_count` input sets) for ``--epochs`` epochs of ``--rounds`` rounds
per shape. Before each epoch a worker frees its flush buffer and input copies, allocates a spacer
of random size and then a new flush buffer and new copies of every input set, so each epoch's
data lies elsewhere in memory (``--keep-placement`` keeps the first placement instead).

It prints, per shape, each process's level (the median of its epoch medians), the spread of those
levels across processes, that spread once each process's factor common to all shapes is taken
out, and the typical spread of epoch medians inside one process (spreads as
:func:`perfgate.gate.baseline.run_spread`: (max - min) / min); then each process's factor. When the
factors carry most of the spread across processes, the level is set per process and not per shape
or per placement: that is why a leaderboard run pools several processes
(``[tool.perfgate.processes]``, docs/views.md).
Not the code under test: a measuring tool. Outputs are checked once, before timing.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfgate import atomic, spawn
from perfgate.gate.baseline import run_spread
from perfgate.measure.flush import leaderboard_flush, rotation_count
from perfgate.measure.launch import probe_median

REPO = Path(__file__).resolve().parents[2]  # lab/scripts/ -> the checkout
SPACER_MAX_MIB = 1024


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The levels and what they share. ``rows``: one dict per (process, epoch, shape) with keys
    ``process``, ``shape`` and ``median``. Returns:

    - ``factors``: per process (in process order), the median over shapes of its level relative
      to that shape's median level, minus 1: the part of a process's offset common to all shapes;
    - ``shapes``: per shape, ``levels`` (each process's median of its epoch medians), ``across``
      (their spread), ``residual`` (their spread once each level is divided by 1 + its process's
      factor) and ``within`` (the median over processes of the spread of one process's epoch
      medians; None with one epoch)."""
    table: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        table.setdefault(row["shape"], {}).setdefault(row["process"], []).append(row["median"])
    processes = sorted({p for per in table.values() for p in per})
    if len(processes) < 2:
        raise ValueError(f"need >= 2 processes to compare, got {len(processes)}")
    for shape, per_process in table.items():
        if sorted(per_process) != processes:
            raise ValueError(f"shape {shape}: measured by processes {sorted(per_process)}, not all")
    levels = {shape: [statistics.median(per[p]) for p in processes] for shape, per in table.items()}
    factors = [
        statistics.median(lv[i] / statistics.median(lv) for lv in levels.values()) - 1
        for i in range(len(processes))
    ]
    shapes = {}
    for shape, lv in levels.items():
        epochs = [table[shape][p] for p in processes if len(table[shape][p]) >= 2]
        shapes[shape] = {
            "levels": lv,
            "across": run_spread(lv),
            "residual": run_spread([x / (1 + f) for x, f in zip(lv, factors, strict=True)]),
            "within": statistics.median(run_spread(m) for m in epochs) if epochs else None,
        }
    return {"factors": factors, "shapes": shapes}


def measure(process: int, epochs: int, rounds: int, replace: bool) -> list[dict[str, Any]]:
    """One worker's rows: every shape's median device microseconds per epoch."""
    import torch

    from kernels.device import device_info
    from kernels.gemm import custom_kernel
    from perfgate.catalog import LEADERBOARD, gemm_set_bytes
    from perfgate.plugin import check_gemm, gemm_inputs

    info, device = device_info(), torch.device("cuda")
    rng = random.Random(process)
    first = {}
    for shape in LEADERBOARD:
        copies = rotation_count(gemm_set_bytes(shape), info.last_level_cache_bytes)
        sets, refs = gemm_inputs(shape, copies, device)
        for i, (data, ref) in enumerate(zip(sets, refs, strict=True)):
            check_gemm(custom_kernel(data), ref, f"{shape.id} input set {i}")
        first[shape.id] = sets
    flush = leaderboard_flush(info.last_level_cache_bytes, device)
    rows = []
    for epoch in range(epochs):
        placed, spacer = first, None
        if replace:
            del flush
            torch.cuda.empty_cache()
            mib = rng.randrange(SPACER_MAX_MIB)
            spacer = torch.empty(mib << 20, dtype=torch.uint8, device=device)
            flush = leaderboard_flush(info.last_level_cache_bytes, device)
            placed = {k: [tuple(t.clone() for t in d) for d in v] for k, v in first.items()}
        for shape in LEADERBOARD:
            # the input sets in turn, as leaderboard mode rotates them, on perfgate's own timer
            call = functools.partial(_call_next, custom_kernel, itertools.cycle(placed[shape.id]))
            seconds = probe_median(call, flush, calls=1, rounds=rounds)
            rows.append(
                {"process": process, "epoch": epoch, "shape": shape.id, "median": seconds * 1e6}
            )
        del placed, spacer
    return rows


def _call_next(fn: Any, order: Any) -> Any:
    return fn(next(order))


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.scripts.leaderboard_levels", description=__doc__
    )
    parser.add_argument("--processes", type=_positive, default=5, help="worker processes (>= 2)")
    parser.add_argument("--epochs", type=_positive, default=6, help="epochs per process")
    parser.add_argument("--rounds", type=_positive, default=160, help="rounds per shape per epoch")
    parser.add_argument(
        "--keep-placement", action="store_true", help="keep each worker's first placement"
    )
    parser.add_argument("--json", dest="json_out", help="write the rows and the summary as JSON")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.processes < 2:
        parser.error("--processes must be >= 2: the point is to compare processes")
    try:  # before minutes of GPU time
        atomic.check_outputs({"--json": args.json_out})
    except atomic.OutputError as exc:
        print(f"lab.scripts.leaderboard_levels: error: {exc}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("lab.scripts.leaderboard_levels: needs a GPU", file=sys.stderr)
        return 2
    if args.worker is not None:
        rows = measure(args.worker, args.epochs, args.rounds, not args.keep_placement)
        print(json.dumps(rows))
        return 0
    rows = []
    for process in range(args.processes):
        cmd = [sys.executable, "-m", "lab.scripts.leaderboard_levels", "--worker", str(process),
               "--epochs", str(args.epochs), "--rounds", str(args.rounds),
               *(["--keep-placement"] if args.keep_placement else [])]  # fmt: skip
        done = spawn.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            print(
                f"lab.scripts.leaderboard_levels: worker {process} failed: {last}", file=sys.stderr
            )
            return 2
        rows += json.loads(done.stdout.strip().splitlines()[-1])
    summary = summarise(rows)
    print(f"levels per process, us ({torch.cuda.get_device_name()}, {args.processes} processes, "
          f"{args.epochs} epochs x {args.rounds} rounds, placement "
          f"{'kept' if args.keep_placement else 'renewed every epoch'}):")  # fmt: skip
    for shape, s in summary["shapes"].items():
        within = "n/a" if s["within"] is None else f"{100 * s['within']:.2f}%"
        print(f"  {shape:<18} {' '.join(f'{x:7.3f}' for x in s['levels'])}   across "
              f"{100 * s['across']:.2f}%, without the process factors {100 * s['residual']:.2f}%, "
              f"epochs within a process {within}")  # fmt: skip
    factors = " ".join(f"{100 * f:+.2f}%" for f in summary["factors"])
    print(f"  process factors (common to all shapes): {factors}")
    if args.json_out:
        atomic.write_json(args.json_out, {"rows": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
