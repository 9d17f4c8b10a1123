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
from kernels.gemm_config import (
    GemmConfig,
    effective_splits,
    k_per_split,
    output_tiles,
    workgroups,
)
from kernels.reducer.native import SPECIALISED_SPLITS as _SPLITS
from kernels.targets import TARGETS, target_for_arch

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
# Work per element of A a program quantizes, as bytes of B a CU could have read meanwhile: reading
# it from L2 (2 bytes at about 4x HBM's rate) plus quantizing it (a few vector instructions per
# pair of elements, at a CU's issue rate against its 1/CUs share of HBM) come to about 1 byte.
# Every N tile re-quantizes its rows of A, so this is what stops tall, narrow tiles.
_A_ELEM_BYTES = 1


def _candidates(m: int, min_block_m: int):
    top_m = min(128, max(min_block_m, 1 << (m - 1).bit_length()))
    for bm in (4, 8, 16, 32, 64, 128):
        if bm < min_block_m or bm > top_m:
            continue
        for bn in (32, 64, 128, 256):
            for bk in (128, 256, 512):
                if bm * bn <= _MAX_ACC_ELEMS and bn * bk // 2 <= _MAX_B_TILE_BYTES:
                    yield bm, bn, bk


def default_num_warps(block_m: int, block_n: int) -> int:
    """Warps for a tile: eight once the accumulator reaches 128x128 fp32 or the B tile is 256
    rows wide, else four. The model and the tuner both use it, so a tuned table and the model
    differ only in what they time."""
    return 8 if block_m * block_n >= 128 * 128 or block_n >= 256 else 4


def model_cost(m: int, n: int, k: int, cfg: GemmConfig, cus: int) -> float:
    """Modelled time in byte-equivalents at full HBM bandwidth (lower is better).

    - B (packed weights and their scales) is what a small-M GEMM streams: each program reads
      its BLOCK_N rows over its split's K range.
    - A is small (M x K bf16) and is read by every N tile of a row of tiles, so after the first
      read it is served from L2: its HBM bytes are charged once, and each program pays only
      for reading its A tile from L2 and quantizing it (``_A_ELEM_BYTES`` per element).
    - Programs run in waves of ``cus``, and one program streams at about its CU's share of HBM
      bandwidth however few CUs are busy: a workgroup of a few waves keeps too few loads in
      flight to reach more (latency-bound). So a wave lasts as long as its largest program, and
      a grid that fills more CUs with smaller programs finishes sooner: the cost counts every
      CU of a wave, busy or idle.
    - Split-K writes and re-reads fp32 partials (charged against B's bytes) and launches the
      reducer.
    """
    kps = k_per_split(k, cfg)
    splits = effective_splits(k, cfg)
    programs = workgroups(m, n, k, cfg)
    waves = math.ceil(programs / cus)
    per_program = cfg.block_n * kps // 2 + cfg.block_n * kps // 32
    per_program += cfg.block_m * kps * _A_ELEM_BYTES
    iterations = math.ceil(kps / cfg.block_k)
    cost = waves * (per_program + iterations * _ITER_BYTES) * cus + m * k * 2
    if splits > 1:
        cost += splits * m * n * 4 * 2 + m * n * 2 + _SPLIT_LAUNCH_BYTES
    return float(cost)


def model_config(m: int, n: int, k: int, cus: int, *, min_block_m: int = 16) -> GemmConfig:
    """The model's best config for (M, N, K) on a device with ``cus`` compute units.

    ``min_block_m``: the smallest M tile the target's matrix instructions take (the target
    registry's ``min_block_m``: 4 on gfx950, 16 on sm90). Split-K is considered only where it
    raises the grid fill (workgroups / CUs) over the same tile unsplit.
    """
    best: tuple[float, int, GemmConfig] | None = None
    for bm, bn, bk in _candidates(m, min_block_m):
        unsplit = output_tiles(m, n, GemmConfig(bm, bn, bk))
        max_split = max(1, min(16, math.ceil(k / bk)))
        for split in range(1, max_split + 1):
            cfg = GemmConfig(bm, bn, bk, split_k=split, num_warps=default_num_warps(bm, bn))
            if effective_splits(k, cfg) != split or shared_bytes_estimate(cfg) > _MAX_SHARED_BYTES:
                continue
            if split > 1 and (
                split not in _SPLITS or min(unsplit * split, cus) <= min(unsplit, cus)
            ):
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


def min_block_m(info: DeviceInfo) -> int:
    """The smallest M tile for ``info``'s architecture (16 where the registry does not know it)."""
    target = target_for_arch(info.arch)
    return target.min_block_m if target is not None else 16


@functools.cache
def _select(m: int, n: int, k: int, info: DeviceInfo) -> GemmConfig:
    tuned = tuned_table(info).get((m, n, k))
    if tuned is not None:
        return tuned
    return model_config(m, n, k, info.compute_units, min_block_m=min_block_m(info))


def select_config(m: int, n: int, k: int, info: DeviceInfo | None = None) -> GemmConfig:
    """The config for (M, N, K): tuned where the table has it, else the model's (cached)."""
    return _select(m, n, k, info or device_info())


def config_source(m: int, n: int, k: int, info: DeviceInfo | None = None) -> str:
    """``"tuned"`` or ``"model"``: where :func:`select_config` takes this shape's config from."""
    return "tuned" if (m, n, k) in tuned_table(info or device_info()) else "model"
