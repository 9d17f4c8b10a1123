"""AMD-specific config facts: the tuned table for gfx950 (MI355X, 256 CUs).

These entries are the occupancy model's choices for the six ranked leaderboard shapes, with
BLOCK_K raised to 256+ for the 16-byte weight loads and AMD's compiler hints set. They have not
been timed on an MI355X (the suite's authors had none); refresh them from
``nox -s bench`` on the MI355X runner. The static ISA gate compiles every entry.
"""

from kernels.gemm_config import GemmConfig

TUNED: dict[str, dict[tuple[int, int, int], GemmConfig]] = {
    "gfx950": {
        (4, 2880, 512): GemmConfig(16, 32, 512, split_k=1, num_warps=4, waves_per_eu=2),
        (16, 2112, 7168): GemmConfig(16, 128, 512, split_k=7, num_warps=4, waves_per_eu=2),
        (32, 4096, 512): GemmConfig(32, 64, 512, split_k=1, num_warps=4, waves_per_eu=2),
        (32, 2880, 512): GemmConfig(32, 32, 512, split_k=1, num_warps=4, waves_per_eu=2),
        (64, 7168, 2048): GemmConfig(64, 128, 256, split_k=2, num_warps=4, waves_per_eu=1),
        (256, 3072, 1536): GemmConfig(64, 128, 256, split_k=1, num_warps=8, waves_per_eu=1),
    }
}
