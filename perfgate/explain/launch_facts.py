"""The launch of one benchmark on one target, as the revision's launcher decides it: the config
selected for the shape (tuned table or the occupancy model), its split-K, the quantizer variant,
the grid and the kernels one call launches. Runs in the child (:mod:`perfgate.explain.child`)
against the revision's ``kernels``; needs no GPU."""

from __future__ import annotations

from typing import Any

# The fields a launch is compared by, in the order they are shown.
CONFIG_FIELDS = (
    "block_m",
    "block_n",
    "block_k",
    "split_k",
    "num_warps",
    "num_stages",
    "waves_per_eu",
    "matrix_instr_nonkdim",
    "quant_widen",
)


def launch_facts(shape: tuple[int, int, int], target: str) -> dict[str, Any]:
    """The launch of ``shape`` (M, N, K) on ``target`` (a name of ``kernels.targets``)."""
    from kernels import gemm_config
    from kernels.configs import select_config
    from kernels.device import TARGET_DEVICES
    from kernels.targets import QuantPath, get_target

    m, n, k = shape
    info = TARGET_DEVICES[target]
    cfg = select_config(m, n, k, info)
    splits = gemm_config.effective_splits(k, cfg)
    tiles = gemm_config.output_tiles(m, n, cfg)
    path = get_target(target).quant_path
    quantizer = path.name.lower()
    if path is QuantPath.PORTABLE and hasattr(cfg, "quant_widen"):
        # the portable path's fp32 widening is the config's choice (kernels.gemm_config)
        quantizer += f" ({cfg.quant_widen})"
    config = cfg.as_dict()
    try:
        from kernels.configs import config_source

        source = config_source(m, n, k, info)
    except ImportError:
        source = None
    return {
        "config": {f: config[f] for f in CONFIG_FIELDS if f in config},
        "config_source": source,
        "quantizer": quantizer,
        "splits": splits,
        "grid": [tiles, splits],
        "workgroups": tiles * splits,
        "k_per_split": gemm_config.k_per_split(k, cfg),
        # the GEMM (the quantizer fused in it), then the split-K reducer when K is split
        "kernels": ["gemm"] + (["reducer"] if splits > 1 else []),
    }
