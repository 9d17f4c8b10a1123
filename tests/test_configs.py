"""Config selection: validation, split arithmetic, the tuned tables and the occupancy model."""

from __future__ import annotations

import dataclasses

import pytest

from kernels import _configs_amd, _configs_nvidia
from kernels.configs import (
    config_source,
    model_config,
    select_config,
    shared_bytes_estimate,
)
from kernels.device import H200, MI355X
from kernels.gemm_config import GemmConfig, effective_splits, k_per_split
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


@pytest.mark.parametrize("cus", [256, 132, 80])
def test_model_gives_a_valid_config_for_the_production_grid(cus):
    for n, k in GRID_NK:
        for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            cfg = model_config(m, n, k, cus)
            assert effective_splits(k, cfg) == cfg.split_k
            assert cfg.block_m * cfg.block_n <= 128 * 128
            # (256, 2880, 512) once chose a tile needing 288 KiB of shared memory on the H200
            assert shared_bytes_estimate(cfg) <= 128 * 1024
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
