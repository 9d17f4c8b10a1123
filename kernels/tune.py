"""Sweep GEMM configs on the local GPU and print the fastest per shape (``python -m kernels.tune``).

Timing is device time of a CUDA/HIP graph that calls the kernel once on each of several input
copies, so that together the copies exceed the last-level cache and every call reads its weights
from HBM, as in the leaderboard (which flushes the caches). Each shape is also timed with bf16
``torch.matmul`` on pre-dequantized weights, and set against its HBM floor: the bytes it must move
divided by the measured copy bandwidth. The output (JSON lines) is what the tuned tables of
``kernels/_configs_*.py`` are written from.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch
import triton

from kernels.configs import GemmConfig, effective_splits, select_config
from kernels.device import device_info
from kernels.gemm import gemm_a16wfp4
from kernels.reference import check_leaderboard, generate_input, reference_gemm
from kernels.shapes import LEADERBOARD


def candidates(m: int, k: int):
    bm = min(64, max(16, 1 << (m - 1).bit_length()))
    splits = sorted({1, 2, 4, 7, 8, 14} if k >= 4096 else {1, 2, 3, 4} if k >= 1536 else {1, 2})
    for bn in (32, 64, 128):
        for bk in (128, 256):
            for s in splits:
                cfg = GemmConfig(bm, bn, bk, split_k=s, num_warps=8 if bm * bn >= 64 * 128 else 4)
                if effective_splits(k, cfg) == s:
                    yield cfg


def graph_time(fns, reps: int = 20) -> float:
    """Median device seconds per call of a graph replaying ``fns`` once each."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for f in fns:  # warm-up and JIT outside the graph
            f()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for f in fns:
            f()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / len(fns))
    return sorted(times)[len(times) // 2]


def copy_bandwidth() -> float:
    """Bytes per second of a 2 GiB device-to-device copy, read + write counted."""
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = graph_time([lambda: dst.copy_(src)], reps=10)
    return 2 * src.numel() / t


def tune_shape(m: int, n: int, k: int, bandwidth: float) -> dict:
    info = device_info()
    one = generate_input(m, n, k, 0, device="cuda")
    per_copy = sum(t.numel() * t.element_size() for t in one)
    copies = max(2, min(64, math.ceil(2 * info.last_level_cache_bytes / per_copy)))
    data = [generate_input(m, n, k, seed, device="cuda") for seed in range(copies)]
    outs = [torch.empty((m, n), dtype=torch.bfloat16, device="cuda") for _ in data]
    ref = reference_gemm(one[0].cpu(), one[3].cpu(), one[4].cpu())
    results = []
    for cfg in [select_config(m, n, k, info), *candidates(m, k)]:
        try:
            got = gemm_a16wfp4(*one[:1], one[3], one[4], config=cfg)
        except triton.runtime.errors.OutOfResources as exc:
            print(
                json.dumps({"shape": [m, n, k], "skipped": cfg.as_dict(), "reason": str(exc)}),
                flush=True,
            )
            continue
        if not check_leaderboard(got, ref):
            raise AssertionError(f"config {cfg} fails the leaderboard check on {(m, n, k)}")
        fns = [
            lambda d=d, o=o, c=cfg: gemm_a16wfp4(d[0], d[3], d[4], config=c, out=o)
            for d, o in zip(data, outs, strict=True)
        ]
        results.append((graph_time(fns), cfg))
    from kernels.reference import dequantized_weight

    b16 = [dequantized_weight(d[3], d[4], k).to(torch.bfloat16) for d in data]
    mm = graph_time(
        [lambda d=d, b=b: torch.matmul(d[0], b.T) for d, b in zip(data, b16, strict=True)]
    )
    moved = m * k * 2 + n * k // 2 + n * k // 32 + m * n * 2
    best_t, best = min(results, key=lambda r: r[0])
    return {
        "shape": [m, n, k],
        "selected_us": results[0][0] * 1e6,
        "selected": results[0][1].as_dict(),
        "best_us": best_t * 1e6,
        "best": best.as_dict(),
        "torch_matmul_bf16_us": mm * 1e6,
        "hbm_floor_us": moved / bandwidth * 1e6,
        "copies": copies,
        "all": sorted(([round(t * 1e6, 2), c.as_dict()] for t, c in results), key=lambda r: r[0])[
            :5
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shape", action="append", help="M,N,K (default: the six leaderboard shapes)"
    )
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("kernels.tune needs a GPU", file=sys.stderr)
        return 2
    shapes = (
        [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else LEADERBOARD
    )
    bandwidth = copy_bandwidth()
    print(
        json.dumps({"device": device_info().key, "copy_bandwidth_GBps": bandwidth / 1e9}),
        flush=True,
    )
    for shape in shapes:
        print(json.dumps(tune_shape(*shape, bandwidth)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
