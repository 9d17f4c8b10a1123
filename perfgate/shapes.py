"""The benchmark shapes: the task's shapes (from :mod:`kernels.shapes`) and the reducer cases,
derived from the configs each target selects for the ranked shapes.

Each shape and case has a stable id (``m16-n2112-k7168``, ``s14-m16-n2112``) so that a
benchmark's ``fullname`` is the same in every run and baselines match by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from kernels.configs import select_config
from kernels.device import TARGET_DEVICES, DeviceInfo
from kernels.gemm_config import effective_splits
from kernels.shapes import GRID, GRID_M, GRID_NK, LEADERBOARD, GemmShape

__all__ = [
    "GRID",
    "GRID_M",
    "GRID_NK",
    "LEADERBOARD",
    "REDUCER",
    "GemmShape",
    "ReducerCase",
    "gemm_set_bytes",
    "reducer_cases",
    "reducer_set_bytes",
]


class ReducerCase(NamedTuple):
    splits: int  # S, the number of fp32 partials summed
    m: int
    n: int

    @property
    def id(self) -> str:
        return f"s{self.splits}-m{self.m}-n{self.n}"


def gemm_set_bytes(shape: GemmShape) -> int:
    """Bytes one GEMM call touches: A (bf16), shuffled B (fp4), B's E8M0 scales, C (bf16)."""
    m, n, k = shape
    a, b_shuffle, b_scales, out = m * k * 2, n * k // 2, n * k // 32, m * n * 2
    return a + b_shuffle + b_scales + out


def reducer_set_bytes(case: ReducerCase) -> int:
    """Bytes one reducer call touches: S fp32 partial planes and the bf16 output."""
    return case.splits * case.m * case.n * 4 + case.m * case.n * 2


def reducer_cases(
    shapes: Iterable[GemmShape] = LEADERBOARD,
    targets: Mapping[str, DeviceInfo] | None = None,
) -> tuple[ReducerCase, ...]:
    """The reducer work the shipped configs create: for each shape, and each target in registry
    order, the split count its selected config really uses (``effective_splits``); every count
    above 1 is a case. Duplicates are dropped, first occurrence kept, so the order is stable."""
    if targets is None:
        targets = TARGET_DEVICES
    cases: dict[ReducerCase, None] = {}
    for m, n, k in shapes:
        for info in targets.values():
            splits = effective_splits(k, select_config(m, n, k, info))
            if splits > 1:
                cases.setdefault(ReducerCase(splits, m, n))
    return tuple(cases)


# The split-K reducer on its own, at the sizes the ranked shapes' configs make it run on some
# target (a hand-written list drifted from the configs once: it timed S=8 and S=4).
REDUCER: tuple[ReducerCase, ...] = reducer_cases()
