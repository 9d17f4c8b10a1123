"""The host path of one call of ``custom_kernel`` on one benchmark's inputs, counted by the census
of ``perfgate host`` (:func:`perfgate.measure.host_census.count_call`): launches, allocations,
copies, syncs and Python calls per call after warm-up. On a CPU the launches are counted, not run
(the interpreter's launch is the census's stub), so it takes seconds; in the child
``TRITON_INTERPRET=1`` is set before triton loads."""

from __future__ import annotations

from typing import Any

from perfgate.gate.host_counts import CATEGORIES
from perfgate.measure import host_census


class NotAvailable(Exception):
    """The revision's ``kernels`` cannot give this fact (it predates what it needs)."""


def host_facts(shape: tuple[int, int, int]) -> dict[str, Any]:
    """Per-call totals per category, and the counts by call path."""
    import torch

    from kernels import gemm

    if not hasattr(gemm, "launch_entry_codes"):
        # the census counts the bound launch through it: without it, launches would be miscounted
        raise NotAvailable(
            "this revision's kernels.gemm has no launch_entry_codes (it predates the host census)"
        )
    from kernels.reference import generate_input

    gpu = torch.cuda.is_available()
    data = generate_input(*shape, seed=0, device="cuda" if gpu else "cpu")
    counts = host_census.count_call(lambda: gemm.custom_kernel(data), dry=not gpu)
    return {
        "dry_launches": not gpu,
        "totals": {c: sum(counts[c].values()) for c in CATEGORIES},
        "paths": {c: dict(counts[c]) for c in CATEGORIES},
    }
