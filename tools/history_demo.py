"""Synthetic run histories made from a real results file, for trying ``perfgate history``.

``python -m tools.history_demo OUT_DIR [--from perf_baselines/nvidia-h200/device.json]
[--runs 24] [--step-at 14] [--step 0.05] [-k TEXT] [--new-torch-at 6] [--seed 0]``

Writes OUT_DIR/run-NN.json: copies of the source file, one per fake commit (fake 40-hex ids,
one hour apart), each benchmark's samples scaled by the run's level (0.5% run-to-run noise) and
reshuffled; from ``--step-at`` on, the benchmarks matching ``-k`` are ``--step`` slower, and from
``--new-torch-at`` on, the fingerprint names another torch (a new segment, same level). Then:

    python -m perfgate history add OUT_DIR/*.json --db /tmp/demo.sqlite --branch main
    python -m perfgate history detect --db /tmp/demo.sqlite     # exit 1: the planted step
    python -m perfgate history report --db /tmp/demo.sqlite --out /tmp/demo-site
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.history.demo import DEFAULT_SOURCE, write_history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory for run-NN.json")
    parser.add_argument("--from", dest="source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--step-at", type=int, default=14, help="first slow run (-1: none)")
    parser.add_argument("--step", type=float, default=0.05, help="the slowdown, a fraction")
    parser.add_argument("-k", dest="keyword", default="m16-n2112-k7168")
    parser.add_argument("--new-torch-at", type=int, default=6, help="-1: never")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    paths = write_history(
        args.out,
        args.source,
        runs=args.runs,
        step_at=None if args.step_at < 0 else args.step_at,
        step=args.step,
        keyword=args.keyword,
        new_torch_at=None if args.new_torch_at < 0 else args.new_torch_at,
        seed=args.seed,
    )
    print(f"wrote {len(paths)} runs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
