"""The benchmark catalogue: each group, its cases, their ids and pytest node ids.

The task's shapes come from :mod:`kernels.shapes`; the reducer cases are derived from the configs
each target selects for the ranked shapes. Each case has a stable id (``m16-n2112-k7168``,
``s14-m16-n2112``) so that a benchmark's ``fullname`` is the same in every run and baselines match
by name. ``tests/perf`` parametrizes over :data:`GROUPS`, and the A/B workers and the experiment
take their cases from :func:`cases`, so the stored gate and the A/B gate time the same work under
the same names. Adding a group: one :class:`Group` here and its ``tests/perf`` file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kernels.shapes import GRID, GRID_M, GRID_NK, LEADERBOARD, GemmShape
from perfgate.modes import times_group
from perfgate.refusal import Refusal

# kernels.configs and kernels.device import torch: they load when the reducer cases are first
# asked for, so that the command line (--help, the container launcher) stays free of torch.

__all__ = [
    "GRID",
    "GRID_M",
    "GRID_NK",
    "GROUPS",
    "LEADERBOARD",
    "GemmShape",
    "Group",
    "ReducerCase",
    "cases",
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
    targets: Mapping[str, Any] | None = None,
) -> tuple[ReducerCase, ...]:
    """The reducer work the shipped configs create: for each shape, and each target in registry
    order, the split count its selected config really uses (``effective_splits``); every count
    above 1 is a case. Duplicates are dropped, first occurrence kept, so the order is stable."""
    from kernels.configs import select_config
    from kernels.device import TARGET_DEVICES
    from kernels.gemm_config import effective_splits

    if targets is None:
        targets = TARGET_DEVICES
    cases: dict[ReducerCase, None] = {}
    for m, n, k in shapes:
        for info in targets.values():
            splits = effective_splits(k, select_config(m, n, k, info))
            if splits > 1:
                cases.setdefault(ReducerCase(splits, m, n))
    return tuple(cases)


@functools.cache
def _reducer() -> tuple[ReducerCase, ...]:
    # The split-K reducer on its own, at the sizes the ranked shapes' configs make it run on some
    # target (a hand-written list drifted from the configs once: it timed S=8 and S=4).
    return reducer_cases()


def __getattr__(name: str) -> Any:
    if name == "REDUCER":  # the derived reducer cases, computed on first use
        return _reducer()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Group:
    """A benchmark group: its cases, the test that parametrizes over them, and their kind."""

    name: str
    kind: str  # "gemm" or "reducer": how a case is built (perfgate.measure.harness)
    test: str  # the test function in tests/perf/<test>.py (the host group: test_host_time.py)
    source: Callable[[], tuple[Any, ...]]  # the cases, made when first asked for
    file: str = ""

    @property
    def items(self) -> tuple[Any, ...]:
        return self.source()

    @property
    def path(self) -> str:
        return f"tests/perf/{self.file or self.test}.py"

    def nodeid(self, item: Any) -> str:
        """The pytest node id of one case: the name its results and baselines are filed under."""
        return f"{self.path}::{self.test}[{item.id}]"

    def ids(self) -> list[str]:
        return [item.id for item in self.items]


GROUPS: dict[str, Group] = {
    g.name: g
    for g in (
        Group("leaderboard", "gemm", "test_leaderboard", lambda: LEADERBOARD),
        Group("reducer", "reducer", "test_reducer", _reducer),
        Group("grid", "gemm", "test_grid", lambda: GRID),
        Group("host", "gemm", "test_host", lambda: LEADERBOARD, file="test_host_time"),
    )
}


def case_record(group: Group, item: Any) -> dict[str, Any]:
    """One case as the A/B worker protocol carries it (JSON): name, kind, sizes, set bytes."""
    if group.kind == "reducer":
        sizes = {"splits": item.splits, "m": item.m, "n": item.n}
        set_bytes = reducer_set_bytes(item)
    else:
        sizes = {"m": item.m, "n": item.n, "k": item.k}
        set_bytes = gemm_set_bytes(item)
    return {"name": group.nodeid(item), "kind": group.kind, **sizes, "set_bytes": set_bytes}


def case_of(record: dict[str, Any]) -> GemmShape | ReducerCase:
    """The case a worker record describes (the inverse of :func:`case_record`)."""
    if record["kind"] == "gemm":
        return GemmShape(record["m"], record["n"], record["k"])
    if record["kind"] == "reducer":
        return ReducerCase(record["splits"], record["m"], record["n"])
    raise ValueError(f"case kind must be gemm or reducer, got {record['kind']!r}")


class GroupsError(Refusal, ValueError):
    """A ``--groups`` that names no group the mode times."""


def cases(
    groups: tuple[str, ...], keyword: str | None = None, *, mode: str = "device"
) -> list[dict]:
    """The worker cases of ``groups`` (those ``mode`` times), named as the pytest benchmarks are;
    ``keyword`` keeps the names containing it; GroupsError for an unknown group."""
    timed = tuple(name for name in GROUPS if times_group(mode, name))
    unknown = [g for g in groups if g not in timed]
    if unknown or not groups:
        raise GroupsError(f"--groups must name some of {', '.join(timed)}, got {groups!r}")
    out = [case_record(GROUPS[g], item) for g in groups for item in GROUPS[g].items]
    return [c for c in out if keyword is None or keyword in c["name"]]
