"""The target registry: one home for each target's facts, and the layout rules built on it."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from kernels import targets
from kernels.device import TARGET_DEVICES, target_device
from kernels.targets import TARGETS, QuantPath, get_target

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_target_is_gated_statically_or_says_why_not(name):
    from perfgate.isa.collect import TARGETS as GATED

    target = TARGETS[name]
    if target.statically_compilable:
        # the ISA gate compiles it (nox -s isa loops over GATED) against a committed baseline
        assert name in GATED
        assert (REPO / "perf_baselines" / "isa" / f"{name}.json").is_file()
    else:
        assert name not in GATED
        assert len(target.not_statically_compilable.split()) >= 3, "give the reason in words"


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_the_reference_card_s_device_key_is_the_baseline_key(name):
    # perfgate finds a device's baselines by DeviceInfo.key; a target's key must be the one its
    # own card reports, or its committed timing baselines would never be found
    assert target_device(TARGETS[name]).key == TARGETS[name].baseline_key
    # and the card of record, written out here: the MI355X and the H200
    card = TARGET_DEVICES[name]
    assert (card.vendor, card.name, card.compute_units, card.warp_size, card.key) == {
        "gfx950": ("amd", "AMD Instinct MI355X", 256, 64, "gfx950-mi355x"),
        "sm90": ("nvidia", "NVIDIA H200", 132, 32, "nvidia-h200"),
    }[name]


def test_facts_are_consistent():
    for t in TARGETS.values():
        assert t.vendor in ("amd", "nvidia")
        assert t.backend == {"amd": "hip", "nvidia": "cuda"}[t.vendor]
        assert t.wave_size == {"amd": 64, "nvidia": 32}[t.vendor]
        assert t.last_level_cache_bytes >= t.l2_bytes > 0
        assert t.has_fp4_convert is (t.quant_path is QuantPath.GFX950_CVT)
        assert t.gpu_target().arch == t.arch


def test_unknown_target_names_the_known_ones():
    known = re.escape(str(sorted(TARGETS)))
    with pytest.raises(ValueError, match=rf"target must be one of {known}, got 'no-such-gpu'"):
        get_target("no-such-gpu")


def test_quant_path_values_are_frozen():
    # the values are compiled into the kernels' specialisation and the ISA baselines' keys
    assert {p.name: int(p) for p in QuantPath} == {
        "PORTABLE": 0,
        "GFX950_CVT": 1,
        "GFX950_EMULATED": 2,
    }


def test_targets_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TARGETS["gfx950"].compute_units = 1  # type: ignore[misc]


# --- layout rules -------------------------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _kernel_modules() -> dict[str, Path]:
    return {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
        for p in (REPO / "kernels").rglob("*.py")
    }


def test_kernels_import_nothing_from_perfgate_lab_or_tools():
    # the package under test holds no measuring code and does not depend on the CI machinery
    for name, path in _kernel_modules().items():
        bad = sorted(m for m in _imports(path) if m.split(".")[0] in ("perfgate", "lab", "tools"))
        assert not bad, f"{name} imports {bad}"


def test_kernels_have_no_import_circle():
    modules = _kernel_modules()
    graph = {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }
    # a module's package __init__ is imported on the way to it; that edge is not a circle
    for name in graph:
        graph[name].discard(name.rpartition(".")[0])

    def visit(node: str, stack: list[str], done: set[str]) -> None:
        if node in stack:
            raise AssertionError(
                f"import circle: {' -> '.join([*stack[stack.index(node) :], node])}"
            )
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*stack, node], done)
        done.add(node)

    done: set[str] = set()
    for name in sorted(graph):
        visit(name, [], done)


def test_hardware_facts_live_only_in_the_registry():
    # LDS sizes and CU counts written as literals anywhere else drift from the registry
    for path in [*(REPO / "kernels").rglob("*.py"), *(REPO / "perfgate").rglob("*.py")]:
        if path == Path(targets.__file__):
            continue
        text = path.read_text()
        for literal in ("160 * 1024", "228 * 1024", "256 * 2**20"):
            assert literal not in text, f"{path.relative_to(REPO)} writes the fact {literal}"


def test_at_most_one_target_per_vendor_is_its_tools_default():
    from collections import Counter

    defaults = Counter(t.vendor for t in TARGETS.values() if t.vendor_default)
    assert all(n == 1 for n in defaults.values()), defaults
    assert defaults["amd"] == 1  # the ROCm build's default (PYTORCH_ROCM_ARCH unset)
