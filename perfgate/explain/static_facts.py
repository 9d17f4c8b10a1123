"""The static compile of one benchmark's GEMM kernel for one target, on any CPU: the spec the
revision's launcher runs for the shape's config (``kernels.gemm.compile_spec``), compiled and
read by :mod:`perfgate.isa` (:func:`perfgate.isa.collect.spec_fields`). Runs in the child, where
``TRITON_INTERPRET`` is off (an interpreted function cannot be compiled)."""

from __future__ import annotations

from typing import Any

# What is compared, in the order it is shown. ``valu_per_wave``: vector instructions one wave
# executes on gfx950 (docs/isa.md, "Static cost"); on sm90 the per-thread ALU instructions one
# warp executes, from the SASS (perfgate.isa.metrics.sass_static_cost).
FIELDS = (
    "vgpr",
    "agpr",
    "sgpr",
    "spills",
    "scratch_bytes",
    "lds_bytes",
    "occupancy",
    "valu_per_wave",
    "instrs_per_wave",
    "mfma_per_wave",
    "workgroups",
)


def static_facts(shape: tuple[int, int, int], target: str) -> dict[str, Any]:
    """The GEMM kernel's figures for ``shape`` on ``target``."""
    from kernels import gemm
    from kernels.configs import select_config
    from kernels.device import TARGET_DEVICES
    from perfgate.isa import collect

    cfg = select_config(*shape, TARGET_DEVICES[target])
    spec = gemm.compile_spec(cfg, target, tuple(shape))
    fields = collect.spec_fields(spec, target, "kernels.gemm")
    out = {f: fields.get(f) for f in FIELDS}
    out["instructions"] = dict(fields.get("instructions") or {})
    return out
