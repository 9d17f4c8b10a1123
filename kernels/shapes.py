"""The task's problem shapes, written down once (task-facts section 1).

The six ranked leaderboard shapes (score = geometric mean of their times), the four test shapes,
and the production grid of 19 (N, K) pairs x M in 1..256. Each shape has a stable id
(``m16-n2112-k7168``) so that benchmark names, and the baselines matched by them, never move.
"""

from __future__ import annotations

from typing import NamedTuple


class GemmShape(NamedTuple):
    m: int
    n: int
    k: int

    @property
    def id(self) -> str:
        return f"m{self.m}-n{self.n}-k{self.k}"


# The ranked shapes; the score is the geometric mean of their times.
LEADERBOARD: tuple[GemmShape, ...] = tuple(
    GemmShape(*s)
    for s in (
        (4, 2880, 512),
        (16, 2112, 7168),
        (32, 4096, 512),
        (32, 2880, 512),
        (64, 7168, 2048),
        (256, 3072, 1536),
    )
)

GRID_NK: tuple[tuple[int, int], ...] = (
    (2880, 512),
    (2112, 7168),
    (4096, 512),
    (7168, 2048),
    (3072, 1536),
    (2880, 1536),
    (4096, 1536),
    (2112, 512),
    (2112, 2048),
    (7168, 512),
    (7168, 1536),
    (7168, 7168),
    (3072, 512),
    (3072, 7168),
    (3072, 2048),
    (4096, 2048),
    (4096, 7168),
    (2880, 2048),
    (2880, 7168),
)
GRID_M: tuple[int, ...] = tuple(2**i for i in range(9))  # 1, 2, 4, ..., 256

# The production grid, N-K major then M, so related shapes sit together in reports.
GRID: tuple[GemmShape, ...] = tuple(GemmShape(m, n, k) for n, k in GRID_NK for m in GRID_M)

# The task's correctness shapes (checked by its harness, not ranked).
TEST_SHAPES: tuple[GemmShape, ...] = tuple(
    GemmShape(*s) for s in ((8, 2112, 7168), (16, 3072, 1536), (64, 3072, 1536), (256, 2880, 512))
)
