"""AMD-specific config facts: the tuned table for gfx950 (MI355X, 256 CUs).

Derived without an MI355X (none was available): each entry starts from the occupancy model's
choice (:func:`kernels.configs.model_config` with gfx950's 4-row minimum M tile) and is checked
with the static figures of ``perfgate isa`` (docs/kernel-performance.md has the table): vector
instructions per wave, workgroups against the 256 CUs, spills, occupancy. Where the model's tile
costs more vector work per wave for the same fill, the entry says so and takes the cheaper one.
All entries use one pipeline stage: with one or two K steps per program there is nothing to
prefetch into, the second stage only duplicates the loop body (prologue and epilogue copies),
and occupancy (4-8 waves per SIMD) hides the load latency instead. Refresh from
``nox -s bench`` on the MI355X runner when one is available.
"""

from kernels.gemm_config import GemmConfig

TUNED: dict[str, dict[tuple[int, int, int], GemmConfig]] = {
    "gfx950": {
        # the model's tile: 90 workgroups (the reference submission: 23)
        (4, 2880, 512): GemmConfig(4, 32, 512, num_stages=1),
        # the model's tile and split: 14 splits of 512, 238 workgroups
        (16, 2112, 7168): GemmConfig(16, 128, 256, split_k=14, num_stages=1),
        # 256 workgroups like the model's 16x32x512, whose 16x32 tile leaves 4 warps doing
        # duplicate MFMA work: 8x64 issues half the vector instructions per wave (155 vs 244)
        (32, 4096, 512): GemmConfig(8, 64, 512, num_stages=1),
        # the same trade as above: 180 workgroups either way, 155 vs 244 instructions per wave
        (32, 2880, 512): GemmConfig(8, 64, 512, num_stages=1),
        # 224 workgroups like the model's 32x64x256, at about half its vector work per wave
        # (711 vs 1331: each program quantizes 16 rows of A instead of 32 for twice the B)
        (64, 7168, 2048): GemmConfig(16, 128, 256, num_stages=1),
        # 192 workgroups like the model's 64x64x256; 8 warps over a 16x256 tile quantize a 16-row
        # A tile once per 256 columns of B: 383 vs 1894 instructions per wave
        (256, 3072, 1536): GemmConfig(16, 256, 512, num_warps=8, num_stages=1),
    }
}
