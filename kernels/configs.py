"""Tile configs for the GEMM: an explicit config, a tuned table, or an occupancy model.

Selection order, for a (M, N, K) problem on a device:

1. a :class:`GemmConfig` passed by the caller;
2. the tuned table of the device's architecture (``_configs_amd`` / ``_configs_nvidia``, the
   vendor-specific parts, kept apart);
3. :func:`model_config`, an analytical model parameterised by the compute-unit count from
   :mod:`kernels.device`: small-M problems are bound by reading B, so it picks the tile and
   split-K count that spread B's bytes over all CUs in the fewest waves, and charges split-K for
   its partial-sum traffic and the reducer's extra launch.

:func:`select_config` caches per (M, N, K, device), so a repeated call costs a dict lookup.
"""

from __future__ import annotations

import functools
import math

from kernels import _configs_amd, _configs_nvidia
from kernels.device import DeviceInfo, device_info
from kernels.gemm_config import GemmConfig, effective_splits, k_per_split
from kernels.targets import TARGETS

# --- the occupancy model ---------------------------------------------------------------------

# Register budget: the fp32 accumulator and the B tile must fit without spilling.
_MAX_ACC_ELEMS = 128 * 128
_MAX_B_TILE_BYTES = 32 * 1024
# Shared memory / LDS budget: the smallest of the targets' (MI355X's 160 KiB of LDS per CU), with
# a fifth left for the compiler's own scratch.
_MAX_SHARED_BYTES = min(t.shared_bytes_per_cu for t in TARGETS.values()) * 4 // 5


def shared_bytes_estimate(cfg: GemmConfig) -> int:
    """Upper estimate of the shared memory a config needs: pipelined A (bf16) and B (fp4) tiles,
    plus B upcast to bf16 where the target emulates FP4 (Hopper)."""
    pipelined = cfg.num_stages * (cfg.block_m * cfg.block_k * 2 + cfg.block_n * cfg.block_k // 2)
    return pipelined + cfg.block_n * cfg.block_k * 2


# Cost of split-K's extra launch (the reducer), as bytes the device could have read meanwhile:
# about 3 us at a few TB/s. Small enough that a long K still splits, large enough that a short
# K stays in one kernel.
_SPLIT_LAUNCH_BYTES = 12 * 2**20
# Fixed latency of one main-loop iteration (issue, wait for the loads, MFMA drain), as bytes one CU
# could have read meanwhile: about 200 ns at a CU's share of HBM bandwidth. It favours long
# BLOCK_K steps once the bytes are even.
_ITER_BYTES = 4096


def _candidates(m: int):
    top_m = min(128, max(16, 1 << (m - 1).bit_length()))
    for bm in (16, 32, 64, 128):
        if bm > top_m:
            continue
        for bn in (32, 64, 128, 256):
            for bk in (128, 256, 512):
                if bm * bn <= _MAX_ACC_ELEMS and bn * bk // 2 <= _MAX_B_TILE_BYTES:
                    yield bm, bn, bk


def default_num_warps(block_m: int, block_n: int) -> int:
    """Warps for a tile: eight once the accumulator reaches 128x128 fp32, else four. The model
    and the tuner both use it, so a tuned table and the model differ only in what they time."""
    return 8 if block_m * block_n >= 128 * 128 else 4


def model_cost(m: int, n: int, k: int, cfg: GemmConfig, cus: int) -> float:
    """Modelled time in byte-equivalents at full bandwidth (lower is better)."""
    kps = k_per_split(k, cfg)
    splits = effective_splits(k, cfg)
    programs = math.ceil(m / cfg.block_m) * math.ceil(n / cfg.block_n) * splits
    waves = math.ceil(programs / cus)
    per_program = cfg.block_n * kps // 2 + cfg.block_m * kps * 2 + cfg.block_n * kps // 32
    iterations = math.ceil(kps / cfg.block_k)
    cost = waves * (per_program + iterations * _ITER_BYTES) * cus
    if splits > 1:
        cost += splits * m * n * 4 * 2 + m * n * 2 + _SPLIT_LAUNCH_BYTES
    return float(cost)


def model_config(m: int, n: int, k: int, cus: int) -> GemmConfig:
    """The model's best config for (M, N, K) on a device with ``cus`` compute units."""
    best: tuple[float, int, GemmConfig] | None = None
    for bm, bn, bk in _candidates(m):
        max_split = max(1, min(16, math.ceil(k / bk)))
        for split in range(1, max_split + 1):
            cfg = GemmConfig(bm, bn, bk, split_k=split, num_warps=default_num_warps(bm, bn))
            if effective_splits(k, cfg) != split or shared_bytes_estimate(cfg) > _MAX_SHARED_BYTES:
                continue
            cost = model_cost(m, n, k, cfg, cus)
            # ties: prefer fewer splits, then fewer programs (less launch and reduction work)
            key = (cost, split)
            if best is None or key < best[:2]:
                best = (cost, split, cfg)
    assert best is not None
    return best[2]


# --- selection -------------------------------------------------------------------------------


# The vendor-specific tables, each keyed by architecture (a new target adds its arch there).
_TUNED = {"amd": _configs_amd.TUNED, "nvidia": _configs_nvidia.TUNED}


def tuned_table(info: DeviceInfo) -> dict[tuple[int, int, int], GemmConfig]:
    """The tuned table of ``info``'s architecture (empty where there is none)."""
    return _TUNED.get(info.vendor, {}).get(info.arch, {})


@functools.cache
def _select(m: int, n: int, k: int, info: DeviceInfo) -> GemmConfig:
    tuned = tuned_table(info).get((m, n, k))
    return tuned if tuned is not None else model_config(m, n, k, info.compute_units)


def select_config(m: int, n: int, k: int, info: DeviceInfo | None = None) -> GemmConfig:
    """The config for (M, N, K): tuned where the table has it, else the model's (cached)."""
    return _select(m, n, k, info or device_info())


def config_source(m: int, n: int, k: int, info: DeviceInfo | None = None) -> str:
    """``"tuned"`` or ``"model"``: where :func:`select_config` takes this shape's config from."""
    return "tuned" if (m, n, k) in tuned_table(info or device_info()) else "model"
