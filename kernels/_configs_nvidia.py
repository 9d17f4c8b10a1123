"""NVIDIA-specific config facts: the tuned table for sm90 (H100/H200, 132 SMs).

Hopper has no FP4 tensor cores: Triton emulates ``dot_scaled`` through bf16 MMA, so these
configs favour smaller tiles than gfx950's. Each entry is the fastest of a ``python -m tools.tune``
sweep on the lent H200 (device time of a graph replay over input copies larger than L2).
"""

from kernels.gemm_config import GemmConfig

TUNED: dict[str, dict[tuple[int, int, int], GemmConfig]] = {
    "sm90": {
        # (M, N, K): config                                  # H200 graph-timed us, 2026-11-30
        (4, 2880, 512): GemmConfig(16, 32, 128, split_k=2),  # 6.83
        (16, 2112, 7168): GemmConfig(16, 128, 256, split_k=14),  # 19.91
        (32, 4096, 512): GemmConfig(32, 64, 256, split_k=2),  # 10.25
        (32, 2880, 512): GemmConfig(32, 64, 256, split_k=2),  # 9.88
        (64, 7168, 2048): GemmConfig(64, 128, 256, split_k=2, num_warps=8),  # 46.98
        (256, 3072, 1536): GemmConfig(64, 128, 128, split_k=4, num_warps=8),  # 56.07
    }
}
