"""NVIDIA-specific config facts: the tuned table for sm90 (H100/H200, 132 SMs).

Hopper has no FP4 tensor cores: Triton emulates ``dot_scaled`` through bf16 MMA, so these
configs favour smaller tiles than gfx950's. Timed on the lent H200 (see the README's notes).
"""

from kernels.configs import GemmConfig

TUNED: dict[str, dict[tuple[int, int, int], GemmConfig]] = {
    "sm90": {
        (4, 2880, 512): GemmConfig(16, 32, 256, split_k=1, num_warps=4),
        (16, 2112, 7168): GemmConfig(16, 64, 256, split_k=7, num_warps=4),
        (32, 4096, 512): GemmConfig(32, 64, 256, split_k=1, num_warps=4),
        (32, 2880, 512): GemmConfig(32, 64, 256, split_k=1, num_warps=4),
        (64, 7168, 2048): GemmConfig(64, 64, 256, split_k=2, num_warps=4),
        (256, 3072, 1536): GemmConfig(64, 128, 256, split_k=1, num_warps=8),
    }
}
