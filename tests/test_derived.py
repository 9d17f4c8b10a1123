"""Derived data stays derived: the native reducer's specialised split counts against its source
and against every shipped config, and the reducer benchmark cases against the configs."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import kernels.configs
from kernels import _configs_amd, _configs_nvidia
from kernels.configs import default_num_warps, model_config, select_config, tuned_table
from kernels.device import TARGET_DEVICES
from kernels.gemm_config import GemmConfig, effective_splits
from kernels.reducer.native import SPECIALISED_SPLITS
from kernels.shapes import LEADERBOARD, GemmShape
from perfgate.catalog import REDUCER, ReducerCase, reducer_cases

SOURCE = Path(__file__).resolve().parents[1] / "kernels" / "reducer" / "splitk_reduce.cu"
TARGETS = sorted(TARGET_DEVICES)


def instantiated_splits(source: str) -> set[int]:
    """S of every explicit ``reduce_vec4<S>`` instantiation; 0 is the generic runtime loop."""
    return {int(s) for s in re.findall(r"template __global__ void reduce_vec4<(\d+)>", source)}


def dispatched_splits(source: str) -> set[int]:
    """S of every ``case S: launch_vec4<S>`` of the launcher's switch (a case that launches
    another specialisation than its own S is refused)."""
    found = set()
    for case, kernel in re.findall(r"case (\d+): launch_vec4<(\d+)>", source):
        if case != kernel:
            raise ValueError(f"case {case} launches reduce_vec4<{kernel}>")
        found.add(int(case))
    return found


def test_parsers_read_what_they_claim():
    text = (
        "template __global__ void reduce_vec4<0>(...);\n"
        "template __global__ void reduce_vec4<5>(...);\n"
        "case 5: launch_vec4<5>(partials); break;\n"
        "case 9: launch_vec4<9>(partials); break;\n"
    )
    assert instantiated_splits(text) == {0, 5}
    assert dispatched_splits(text) == {5, 9}
    with pytest.raises(ValueError, match="case 6 launches reduce_vec4<7>"):
        dispatched_splits("case 6: launch_vec4<7>(p); break;")


def test_specialisation_list_is_pinned_to_the_source():
    source = SOURCE.read_text(encoding="utf-8")
    assert tuple(sorted(SPECIALISED_SPLITS)) == SPECIALISED_SPLITS
    assert dispatched_splits(source) == set(SPECIALISED_SPLITS)
    # every dispatched kernel is instantiated for device-only compiles, plus the generic one
    assert instantiated_splits(source) == {0, *SPECIALISED_SPLITS}
    assert "default: launch_vec4<0>" in source
    assert SPECIALISED_SPLITS == (2, 3, 4, 7, 8, 14, 16)


def _unspecialised(configs: dict[GemmShape, GemmConfig]) -> dict[GemmShape, int]:
    splits = {shape: effective_splits(shape[2], cfg) for shape, cfg in configs.items()}
    return {shape: s for shape, s in splits.items() if s > 1 and s not in SPECIALISED_SPLITS}


@pytest.mark.parametrize("target", TARGETS)
def test_tuned_tables_use_only_specialised_split_counts(target):
    table = tuned_table(TARGET_DEVICES[target])
    assert _unspecialised({GemmShape(*s): cfg for s, cfg in table.items()}) == {}


@pytest.mark.parametrize("target", TARGETS)
def test_model_and_selected_configs_of_ranked_shapes_use_specialised_split_counts(target):
    info = TARGET_DEVICES[target]
    model = {s: model_config(*s, info.compute_units) for s in LEADERBOARD}
    selected = {s: select_config(*s, info) for s in LEADERBOARD}
    assert _unspecialised(model) == {}
    assert _unspecialised(selected) == {}


def test_unspecialised_finds_a_generic_split_count():
    # a 5-way split of K = 5 * 256 is real and takes the generic loop
    cfg = GemmConfig(16, 64, 256, split_k=5)
    assert _unspecialised({GemmShape(16, 2112, 1280): cfg}) == {GemmShape(16, 2112, 1280): 5}


# ---- reducer benchmark cases -------------------------------------------------------------------
def test_reducer_cases_come_from_every_targets_selected_splits(monkeypatch):
    splits = {
        ("a", GemmShape(4, 64, 512)): 1,  # no split: no reducer case
        ("b", GemmShape(4, 64, 512)): 2,
        ("a", GemmShape(16, 32, 7168)): 7,
        ("b", GemmShape(16, 32, 7168)): 14,
        ("a", GemmShape(64, 128, 2048)): 2,
        ("b", GemmShape(64, 128, 2048)): 2,  # the same case twice: kept once
    }
    targets = {"a": "info-a", "b": "info-b"}

    def fake_select(m, n, k, info):
        s = splits[(info[-1], GemmShape(m, n, k))]
        return GemmConfig(16, 32, 128, split_k=s)

    monkeypatch.setattr(kernels.configs, "select_config", fake_select)
    got = reducer_cases(
        [GemmShape(4, 64, 512), GemmShape(16, 32, 7168), GemmShape(64, 128, 2048)], targets
    )
    assert got == (
        ReducerCase(2, 4, 64),
        ReducerCase(7, 16, 32),
        ReducerCase(14, 16, 32),
        ReducerCase(2, 64, 128),
    )


def test_reducer_cases_count_effective_splits_not_requested_ones(monkeypatch):
    # split_k=16 of K=512 with BLOCK_K=128 gets 4 real splits
    monkeypatch.setattr(
        kernels.configs, "select_config", lambda m, n, k, info: GemmConfig(16, 32, 128, split_k=16)
    )
    assert reducer_cases([GemmShape(8, 64, 512)], {"x": None}) == (ReducerCase(4, 8, 64),)


def _splits_by_hand(k: int, cfg: GemmConfig) -> int:
    """Splits that get work: K in BLOCK_K steps, dealt out ceil(steps / split_k) per split."""
    steps = -(-k // cfg.block_k)
    per_split = -(-steps // cfg.split_k)
    return -(-steps // per_split)


def test_reducer_benchmark_is_the_derived_list():
    # From the tuned tables themselves (every ranked shape is tuned on every target: see
    # tests/test_configs.py), shape by shape and target by target in registry order, with the
    # split count worked out here.
    tables = {"amd": _configs_amd.TUNED, "nvidia": _configs_nvidia.TUNED}
    expected: list[ReducerCase] = []
    for m, n, k in LEADERBOARD:
        for info in TARGET_DEVICES.values():
            s = _splits_by_hand(k, tables[info.vendor][info.arch][(m, n, k)])
            if s > 1 and ReducerCase(s, m, n) not in expected:
                expected.append(ReducerCase(s, m, n))
    assert tuple(expected) == REDUCER
    assert len({c.id for c in REDUCER}) == len(REDUCER)


# ---- the tuner sweeps what the model would pick from ---------------------------------------------
def _load_tool(name: str):
    # by path: tools/ is run from a checkout and is not part of the installed package
    path = Path(__file__).resolve().parents[1] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_tools_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("shape", LEADERBOARD, ids=[s.id for s in LEADERBOARD])
def test_tuner_candidates_use_the_models_warp_rule(shape):
    tune = _load_tool("tune")
    m, _, k = shape
    cands = list(tune.candidates(m, k))
    assert cands
    for cfg in cands:
        assert cfg.num_warps == default_num_warps(cfg.block_m, cfg.block_n), cfg
        assert effective_splits(k, cfg) == cfg.split_k, cfg
    # a long K sweeps sm90's tuned 14-way split, which the reducer specialises
    assert {c.split_k for c in cands} <= {1, *SPECIALISED_SPLITS}
    # each tile in each widening asked for, the shift alone by default
    assert {c.quant_widen for c in cands} == {"shift"}
    both = list(tune.candidates(m, k, ("shift", "cast")))
    assert [c for c in both if c.quant_widen == "shift"] == cands
    assert len(both) == 2 * len(cands)


def test_tuner_parses_shapes():
    tune = _load_tool("tune")
    assert tune.parse_shape("16,2112,7168") == GemmShape(16, 2112, 7168)
    with pytest.raises(ValueError, match="M,N,K"):
        tune.parse_shape("16,2112")
