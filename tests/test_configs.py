"""Config selection: validation, split arithmetic, the tuned tables and the occupancy model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kernels import _configs_amd, _configs_nvidia
from kernels.configs import (
    config_source,
    min_block_m,
    model_config,
    model_cost,
    select_config,
    shared_bytes_estimate,
)
from kernels.device import H200, MI355X
from kernels.gemm_config import GemmConfig, effective_splits, k_per_split, workgroups
from kernels.shapes import GRID_NK, LEADERBOARD


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("block_m", 2, "block_m must be a power of two >= 4"),
        ("block_m", 48, "block_m must be a power of two >= 4"),
        ("block_n", 16, "block_n must be a power of two >= 32"),
        ("block_k", 32, "block_k must be a power of two >= 64"),
        ("split_k", 0, "split_k must be an int >= 1"),
        ("num_warps", 3, "num_warps must be a power of two"),
        ("num_stages", 0, "num_stages must be an int >= 1"),
        ("matrix_instr_nonkdim", 8, "matrix_instr_nonkdim must be 16 or 32"),
        ("quant_widen", "round", 'quant_widen must be "shift" or "cast"'),
    ],
)
def test_bad_config_is_named(field, value, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(GemmConfig(16, 32, 64), **{field: value})


@pytest.mark.parametrize(
    ("k", "block_k", "split", "per_split", "splits"),
    [
        (512, 128, 1, 512, 1),
        (512, 128, 4, 128, 4),
        (512, 128, 3, 256, 2),  # 4 steps over 3 splits -> 2 steps each, so only 2 splits get work
        (320, 64, 4, 128, 3),  # 5 steps -> 2,2,1
        (64, 256, 8, 256, 1),  # one short step: nothing to split
        (7168, 512, 7, 1024, 7),
    ],
)
def test_split_arithmetic_never_leaves_an_empty_split(k, block_k, split, per_split, splits):
    cfg = GemmConfig(16, 32, block_k, split_k=split)
    assert k_per_split(k, cfg) == per_split
    assert effective_splits(k, cfg) == splits
    assert per_split % block_k == 0
    assert (splits - 1) * per_split < k <= splits * per_split


@pytest.mark.parametrize("device", [MI355X, H200], ids=["mi355x", "h200"])
def test_tuned_tables_cover_the_leaderboard(device):
    for shape in LEADERBOARD:
        assert config_source(*shape, device) == "tuned"
        table = (_configs_amd if device.vendor == "amd" else _configs_nvidia).TUNED[device.arch]
        assert select_config(*shape, device) is table[shape]


def _shared_bytes_by_hand(cfg: GemmConfig) -> int:
    """What the kernel stages in shared memory, counted from its tiles: per pipeline stage an
    A tile (BLOCK_M x BLOCK_K bf16, 2 bytes) and a B tile (BLOCK_N x BLOCK_K fp4, half a
    byte), and once the B tile upcast to bf16 where FP4 is emulated (Hopper)."""
    a_tile = cfg.block_m * cfg.block_k * 2
    b_tile = cfg.block_n * cfg.block_k // 2
    b_upcast = cfg.block_n * cfg.block_k * 2
    return cfg.num_stages * (a_tile + b_tile) + b_upcast


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        # 2 x (32 KiB A + 16 KiB B) + 64 KiB upcast B
        (GemmConfig(64, 128, 256, num_stages=2), 163840),
        # 3 x (4 KiB A + 16 KiB B) + 64 KiB upcast B
        (GemmConfig(16, 256, 128, num_stages=3), 126976),
        # 1 x (512 B A + 1 KiB B) + 4 KiB upcast B
        (GemmConfig(4, 32, 64, num_stages=1), 5632),
    ],
)
def test_shared_bytes_estimate_counts_every_tile(cfg, expected):
    assert shared_bytes_estimate(cfg) == expected


def _compiled_gemm_entries():
    fields = {f.name for f in dataclasses.fields(GemmConfig)}
    root = Path(__file__).resolve().parents[1] / "perf_baselines" / "isa"
    for target in ("gfx950", "sm90"):
        baseline = json.loads((root / f"{target}.json").read_text())
        for key, entry in baseline["entries"].items():
            if entry["name"] == "gemm_a16wfp4":
                cfg = GemmConfig(**{f: v for f, v in entry["config"].items() if f in fields})
                yield target, key, cfg, entry["lds_bytes"]


def test_shared_bytes_estimate_bounds_what_the_compiler_allocates():
    # The ISA baselines hold the shared memory Triton allocated for every shipped config on
    # both targets: an independent count, which the estimate must never be below.
    entries = list(_compiled_gemm_entries())
    assert len(entries) >= 10
    for target, key, cfg, compiled in entries:
        assert shared_bytes_estimate(cfg) >= compiled, (target, key, compiled)


@pytest.mark.parametrize("cus", [256, 132, 80])
def test_model_gives_a_valid_config_for_the_production_grid(cus):
    for n, k in GRID_NK:
        for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            cfg = model_config(m, n, k, cus)
            assert effective_splits(k, cfg) == cfg.split_k
            assert cfg.block_m * cfg.block_n <= 128 * 128
            # (256, 2880, 512) once chose a tile needing 288 KiB of shared memory on the H200;
            # the model's budget is MI355X's 160 KiB of LDS less a fifth
            assert _shared_bytes_by_hand(cfg) <= 128 * 1024, (m, n, k, cfg)
            assert cfg.block_m <= max(16, 1 << (m - 1).bit_length())


def test_model_splits_long_k_and_not_short_k():
    # Reading B dominates: a long K with few N-tiles needs split-K to fill the CUs; a short K
    # does not pay for the reducer's launch.
    assert model_config(16, 2112, 7168, 256).split_k > 1
    assert model_config(4, 2880, 512, 256).split_k == 1


def test_model_shape_selection_is_cached():
    other = dataclasses.replace(H200, name="NVIDIA H200 (test)")
    assert config_source(3, 96, 640, other) == "model"
    assert select_config(3, 96, 640, other) is select_config(3, 96, 640, other)


def test_model_splits_k_only_where_it_raises_the_fill():
    # Split-K costs partials and a launch: the model takes it only when the unsplit tile leaves
    # CUs idle and the split puts more of them to work.
    for n, k in GRID_NK:
        for m in (1, 4, 16, 64, 256):
            cfg = model_config(m, n, k, 256, min_block_m=4)
            if cfg.split_k == 1:
                continue
            unsplit = workgroups(m, n, k, dataclasses.replace(cfg, split_k=1))
            assert unsplit < 256, (m, n, k, cfg)
            assert min(workgroups(m, n, k, cfg), 256) > unsplit, (m, n, k, cfg)


def test_model_charges_a_once_not_per_n_tile():
    # A is read from HBM once (then from L2): halving block_n doubles the N tiles but changes
    # only the per-program terms, never multiplies A's M*K*2 bytes by the tile count.
    m, n, k = 4, 4096, 512
    wide, narrow = GemmConfig(4, 128, 512), GemmConfig(4, 64, 512)
    assert workgroups(m, n, k, narrow) == 2 * workgroups(m, n, k, wide) <= 256
    # one wave each: the cost is per-program bytes x CUs + A once
    assert model_cost(m, n, k, wide, 256) - model_cost(m, n, k, narrow, 256) == 256 * 64 * 272


def test_min_block_m_comes_from_the_target_registry():
    assert min_block_m(MI355X) == 4
    assert min_block_m(H200) == 16
    other = dataclasses.replace(H200, arch="sm_unknown", name="NVIDIA (test)")
    assert min_block_m(other) == 16
    assert select_config(2, 7168, 1536, H200).block_m >= 16
    assert select_config(2, 7168, 1536, MI355X).block_m == 4


# Workgroups of the reference submission on the six ranked shapes (docs: gfx950 reference
# figures). The gfx950 table must fill at least as many of the 256 CUs on every shape.
REFERENCE_WORKGROUPS = {
    (4, 2880, 512): 23,
    (16, 2112, 7168): 238,
    (32, 4096, 512): 256,
    (32, 2880, 512): 92,
    (64, 7168, 2048): 224,
    (256, 3072, 1536): 192,
}


def test_gfx950_table_fills_at_least_the_reference_s_grid():
    for shape, reference in REFERENCE_WORKGROUPS.items():
        assert workgroups(*shape, select_config(*shape, MI355X)) >= reference, shape


@pytest.mark.parametrize("widen", ["shift", "cast"])
@pytest.mark.parametrize("compiled", [True, False])
def test_the_cast_widening_is_compiled_only(widen, compiled):
    # The interpreter's bf16 -> fp32 cast misconverts subnormals: an interpreted launch always
    # shifts; compiled (the launcher and the ISA gate alike), the config decides.
    from kernels.gemm import _kernel_constexprs
    from kernels.targets import QuantPath

    cfg = GemmConfig(16, 32, 64, quant_widen=widen)
    constexprs = _kernel_constexprs(cfg, 1, QuantPath.PORTABLE, 512, compiled=compiled)
    assert constexprs["CAST_A"] is (compiled and widen == "cast")
