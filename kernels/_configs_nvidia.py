"""NVIDIA-specific config facts: the tuned table for sm90 (H100/H200, 132 SMs).

Hopper has no FP4 tensor cores: Triton emulates ``dot_scaled`` through bf16 MMA, so these
configs favour smaller tiles than gfx950's. Each entry is the fastest of a sweep on the lent H200
timed with the gate's device-mode timer (``perfgate.measure.launch.median_per_call``: graph replay over
input copies larger than L2, a flush before every round), the sweep of ``tools/tune.py`` widened
to three pipeline stages and 8-warp 64x256 tiles (docs/kernel-performance.md has the numbers and
the runner-up configs), with the native split-K reducer built. Three stages win on every shape.
``quant_widen`` was chosen per tile by a process-level A/B of the two conversions
(docs/measurements.md).
"""

from kernels.gemm_config import GemmConfig

TUNED: dict[str, dict[tuple[int, int, int], GemmConfig]] = {
    "sm90": {
        # (M, N, K): config                         H200 device us, 2026-12-01 (bf16 matmul us)
        # unsplit: within 4% of the best (16x128x128, 4 splits: 6.12) with one launch, not two
        (4, 2880, 512): GemmConfig(16, 32, 256, num_stages=3),  # 6.43 (4.48)
        (16, 2112, 7168): GemmConfig(16, 128, 128, split_k=14, num_stages=3),  # 18.62 (14.82)
        (32, 4096, 512): GemmConfig(16, 64, 128, num_stages=3),  # 7.83 (4.80)
        (32, 2880, 512): GemmConfig(16, 64, 128, num_stages=3),  # 7.70 (4.59)
        # the 8-warp 64x256 tiles widen A by the compiler's cast: the shift is 4.2% / 4.9%
        # slower there, and 0.6-2.8% faster on the four smaller tiles above (H200, 2026-12-01)
        (64, 7168, 2048): GemmConfig(
            64, 256, 128, split_k=4, num_warps=8, num_stages=3, quant_widen="cast"
        ),  # 25.72 (11.76)
        (256, 3072, 1536): GemmConfig(
            64, 256, 128, split_k=2, num_warps=8, num_stages=3, quant_widen="cast"
        ),  # 33.39 (7.48)
    }
}
