"""Sweep GEMM configs on the local GPU and print the fastest per shape (``python -m tools.tune``).

Timing is the gate's device mode (:func:`perfgate.measure.median_per_call`): a CUDA/HIP graph calls
the kernel once on each of several rotated input copies, and every replay starts after the gate's
flush of twice the last-level cache, so every call reads its weights from HBM, as in the
leaderboard (which flushes the caches). Tuned tables are therefore made with the timer and cache
policy that gate them. Each shape is also timed with bf16 ``torch.matmul`` on pre-dequantized
weights, and set against its HBM floor: the bytes it must move divided by the measured copy
bandwidth. The output (JSON lines) is what the tuned tables of ``kernels/_configs_*.py`` are
written from.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator

from kernels import configs
from kernels.configs import select_config
from kernels.gemm_config import QUANT_WIDENINGS, GemmConfig, effective_splits
from kernels.shapes import LEADERBOARD, GemmShape
from perfgate.catalog import gemm_set_bytes
from perfgate.measure.flush import CacheFlush, gate_flush, rotation_count
from perfgate.measure.launch import median_per_call

ROUNDS = 20


def split_candidates(k: int) -> list[int]:
    """Split counts worth sweeping for a K: long K splits further."""
    if k >= 4096:
        return [1, 2, 4, 7, 8, 14]
    if k >= 1536:
        return [1, 2, 3, 4]
    return [1, 2]


def candidates(m: int, k: int, widenings: tuple[str, ...] = ("shift",)) -> Iterator[GemmConfig]:
    """The swept configs: tiles and split counts, warps by the model's rule, every split real;
    each in every fp32 widening of ``widenings`` (they schedule differently on NVIDIA)."""
    bm = min(64, max(16, 1 << (m - 1).bit_length()))
    for bn in (32, 64, 128):
        for bk in (128, 256):
            for s in split_candidates(k):
                warps = configs.default_num_warps(bm, bn)
                for widen in widenings:
                    cfg = GemmConfig(bm, bn, bk, split_k=s, num_warps=warps, quant_widen=widen)
                    if effective_splits(k, cfg) == s:
                        yield cfg


def copy_bandwidth(flush: CacheFlush) -> float:
    """Bytes per second of a 2 GiB device-to-device copy, read + write counted."""
    import torch

    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t, _ = median_per_call([lambda: dst.copy_(src)], flush, rounds=10)
    return 2 * src.numel() / t


def tune_shape(m: int, n: int, k: int, bandwidth: float, flush: CacheFlush) -> dict:
    import torch
    import triton

    from kernels.device import device_info
    from kernels.gemm import gemm_a16wfp4
    from kernels.reference import (
        check_leaderboard,
        dequantized_weight,
        generate_input,
        reference_gemm,
    )

    info = device_info()
    copies = rotation_count(gemm_set_bytes(GemmShape(m, n, k)), info.last_level_cache_bytes)
    data = [generate_input(m, n, k, seed, device="cuda") for seed in range(copies)]
    one = data[0]
    outs = [torch.empty((m, n), dtype=torch.bfloat16, device="cuda") for _ in data]
    ref = reference_gemm(one[0].cpu(), one[3].cpu(), one[4].cpu())
    results = []
    # gfx950's conversion instruction never widens: only the portable quantizer has a choice
    widenings = ("shift",) if info.vendor == "amd" else QUANT_WIDENINGS
    for cfg in [select_config(m, n, k, info), *candidates(m, k, widenings)]:
        try:
            got = gemm_a16wfp4(one[0], one[3], one[4], config=cfg)
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
        t, _ = median_per_call(fns, flush, rounds=ROUNDS)
        results.append((t, cfg))
    b16 = [dequantized_weight(d[3], d[4], k).to(torch.bfloat16) for d in data]
    mm, _ = median_per_call(
        [lambda d=d, b=b: torch.matmul(d[0], b.T) for d, b in zip(data, b16, strict=True)],
        flush,
        rounds=ROUNDS,
    )
    moved = gemm_set_bytes(GemmShape(m, n, k))
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
        "flush_bytes": flush.nbytes,
        "all": sorted(([round(t * 1e6, 2), c.as_dict()] for t, c in results), key=lambda r: r[0])[
            :5
        ],
    }


def parse_shape(text: str) -> GemmShape:
    """``"M,N,K"`` as a shape; argparse reports the ValueError."""
    parts = text.split(",")
    if len(parts) != 3:
        raise ValueError(f"a shape is M,N,K, got {text!r}")
    return GemmShape(*(int(p) for p in parts))


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(
        prog="python -m tools.tune", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--shape",
        action="append",
        type=parse_shape,
        help="M,N,K (default: the six leaderboard shapes)",
    )
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("tools.tune needs a GPU", file=sys.stderr)
        return 2
    from kernels.device import device_info

    info = device_info()
    flush = gate_flush(info.last_level_cache_bytes, torch.device("cuda"))
    bandwidth = copy_bandwidth(flush)
    print(json.dumps({"device": info.key, "copy_bandwidth_GBps": bandwidth / 1e9}), flush=True)
    for shape in args.shape or LEADERBOARD:
        print(json.dumps(tune_shape(*shape, bandwidth, flush)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
