"""The GEMM's tile config, and the K arithmetic that every user of a config shares.

Its own module so that the tuned tables (``kernels/_configs_*.py``) and the selection logic
(:mod:`kernels.configs`) both import it without importing each other.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

QUANT_WIDENINGS = ("shift", "cast")


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
    # How the portable quantizer (NVIDIA) makes A's fp32 values from its bf16 bits: "shift"
    # (the bit pattern shifted into an fp32) or "cast" (the compiler's bf16 -> fp32
    # conversion). Both are exact on a GPU and give the same codes; which one schedules faster
    # depends on the tile (docs/kernel-performance.md). The interpreter always shifts: its cast
    # misconverts bf16 subnormals (kernels._quant). gfx950's conversion instruction ignores it.
    quant_widen: str = "shift"

    def __post_init__(self) -> None:
        def pow2(v: int) -> bool:
            return isinstance(v, int) and v > 0 and v & (v - 1) == 0

        checks = [
            ("block_m", pow2(self.block_m) and self.block_m >= 4, "a power of two >= 4"),
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
            ("quant_widen", self.quant_widen in QUANT_WIDENINGS, '"shift" or "cast"'),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise ValueError(
                    f"GemmConfig.{name} must be {expected}, got {getattr(self, name)!r}"
                )

    def as_dict(self) -> dict[str, int | str]:
        return asdict(self)


def k_per_split(k: int, cfg: GemmConfig) -> int:
    """K elements per split: whole BLOCK_K steps, so no split starts mid-block."""
    return math.ceil(math.ceil(k / cfg.block_k) / cfg.split_k) * cfg.block_k


def effective_splits(k: int, cfg: GemmConfig) -> int:
    """Splits that actually get work (fewer than ``split_k`` when K is short)."""
    return math.ceil(k / k_per_split(k, cfg))


def output_tiles(m: int, n: int, cfg: GemmConfig) -> int:
    """(M, N) tiles of ``cfg``: the launch grid's first dimension."""
    return math.ceil(m / cfg.block_m) * math.ceil(n / cfg.block_n)


def workgroups(m: int, n: int, k: int, cfg: GemmConfig) -> int:
    """Programs in the launch grid of ``cfg`` for (M, N, K): M tiles x N tiles x splits."""
    return output_tiles(m, n, cfg) * effective_splits(k, cfg)
