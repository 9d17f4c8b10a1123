"""The benchmark shapes: the task's shapes (from :mod:`kernels.shapes`) and the reducer cases.

 Each shape has a stable id (``m16-n2112-k7168``) so
that a benchmark's ``fullname`` is the same in every run and baselines match by name.
"""

from __future__ import annotations

from typing import NamedTuple

from kernels.shapes import GRID, GRID_M, GRID_NK, LEADERBOARD, GemmShape

__all__ = [
    "GRID",
    "GRID_M",
    "GRID_NK",
    "LEADERBOARD",
    "REDUCER",
    "GemmShape",
    "ReducerCase",
]


class ReducerCase(NamedTuple):
    splits: int  # S, the number of fp32 partials summed
    m: int
    n: int

    @property
    def id(self) -> str:
        return f"s{self.splits}-m{self.m}-n{self.n}"


# The split-K reducer on its own, at the sizes the long-K leaderboard shapes produce:
# (16, 2112, 7168) split 8 ways (896 K per split) and (64, 7168, 2048) split 4 ways.
REDUCER: tuple[ReducerCase, ...] = (ReducerCase(8, 16, 2112), ReducerCase(4, 64, 7168))
