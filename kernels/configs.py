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
from dataclasses import asdict, dataclass

from kernels.device import DeviceInfo, device_info


@dataclass(frozen=True)
class GemmConfig:
    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 2
    # AMD compiler hints; passed to Triton on ROCm only (0 leaves the compiler's default)
    waves_per_eu: int = 0
    matrix_instr_nonkdim: int = 16

    def __post_init__(self) -> None:
        def pow2(v: int) -> bool:
            return isinstance(v, int) and v > 0 and v & (v - 1) == 0

        checks = [
            ("block_m", pow2(self.block_m) and self.block_m >= 16, "a power of two >= 16"),
            ("block_n", pow2(self.block_n) and self.block_n >= 32, "a power of two >= 32"),
            ("block_k", pow2(self.block_k) and self.block_k >= 64, "a power of two >= 64"),
            ("split_k", isinstance(self.split_k, int) and self.split_k >= 1, "an int >= 1"),
            ("num_warps", pow2(self.num_warps) and self.num_warps <= 16, "a power of two <= 16"),
            (
                "num_stages",
                isinstance(self.num_stages, int) and self.num_stages >= 1,
                "an int >= 1",
            ),
            (
                "waves_per_eu",
                isinstance(self.waves_per_eu, int) and self.waves_per_eu >= 0,
                "an int >= 0",
            ),
            ("matrix_instr_nonkdim", self.matrix_instr_nonkdim in (16, 32), "16 or 32"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise ValueError(
                    f"GemmConfig.{name} must be {expected}, got {getattr(self, name)!r}"
                )

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def k_per_split(k: int, cfg: GemmConfig) -> int:
    """K elements per split: whole BLOCK_K steps, so no split starts mid-block."""
    return math.ceil(math.ceil(k / cfg.block_k) / cfg.split_k) * cfg.block_k


def effective_splits(k: int, cfg: GemmConfig) -> int:
    """Splits that actually get work (fewer than ``split_k`` when K is short)."""
    return math.ceil(k / k_per_split(k, cfg))


# --- the occupancy model ---------------------------------------------------------------------

# Register budget: the fp32 accumulator and the B tile must fit without spilling.
_MAX_ACC_ELEMS = 128 * 128
_MAX_B_TILE_BYTES = 32 * 1024
# Shared memory / LDS budget: MI355X has 160 KiB of LDS per CU and H200 227 KiB per SM; stay
# under the smaller with room for the compiler's own scratch.
_MAX_SHARED_BYTES = 128 * 1024


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
            warps = 8 if bm * bn >= 128 * 128 else 4
            cfg = GemmConfig(bm, bn, bk, split_k=split, num_warps=warps)
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


def tuned_table(info: DeviceInfo) -> dict[tuple[int, int, int], GemmConfig]:
    """The tuned table of ``info``'s architecture (empty where there is none)."""
    if info.vendor == "amd":
        from kernels._configs_amd import TUNED
    elif info.vendor == "nvidia":
        from kernels._configs_nvidia import TUNED
    else:
        return {}
    return TUNED.get(info.arch, {})


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
