"""The differences between two revisions' facts of one benchmark, ranked: what can explain the
change, first the likeliest, each with its number.

The order is a sort on ``(tier, -score, part, target, field)``, deterministic:

| tier | what | score within the tier |
| --- | --- | --- |
| 0 | a kernel's device time in the call (measured on a GPU): it takes precedence | its relative change in % (faster: a quarter) |
| 1 | the launch on the benchmark's own target: config fields, split-K, kernels per call, grid | a fixed weight per field (:data:`LAUNCH_WEIGHTS`): split-K first, the tile, the quantizer, warps and stages |
| 2 | the host path per call: launches, allocations, copies, syncs | the count's change x :data:`HOST_WEIGHTS` |
| 3 | the static compile for the benchmark's own target | the relative change in % x :data:`STATIC_WEIGHTS` (a new spill or scratch: 100 + the count) |
| 4, 5 | the launch, then the static compile, of the other targets (gfx950 for an H200 benchmark) | as tiers 1 and 3 |
| 6 | the host path's Python calls per call | the count's change |

A config change outranks what it causes (the stages of a tile change its LDS, registers and
vector work: the config is the cause), and a changed count or code outranks the compile's
consequences in other targets. In tiers 3 and 5 a change in the direction that costs time
(more vector work, spills, VGPRs, LDS; lower occupancy) counts in full, one that saves time a
quarter: an explanation of a slowdown is led by what got worse. Every difference of the facts is
listed, none dropped; a fact that one side could not give is not compared (a note says why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

LAUNCH_WEIGHTS = {
    "split_k": 100,
    "splits": 98,
    "kernels": 96,
    "block_m": 90,
    "block_n": 90,
    "block_k": 90,
    "quantizer": 85,
    "num_warps": 80,
    "num_stages": 80,
    "waves_per_eu": 60,
    "matrix_instr_nonkdim": 60,
    "quant_widen": 55,
    "grid": 50,
    "k_per_split": 45,
    "config_source": 30,
}
HOST_WEIGHTS = {"launches": 40, "syncs": 40, "copies": 30, "allocations": 30}
# static field -> (weight, the direction that costs time: +1 growth, -1 a drop)
STATIC_WEIGHTS = {
    "spills": (2.0, +1),
    "scratch_bytes": (2.0, +1),
    "occupancy": (1.0, -1),
    "valu_per_wave": (1.0, +1),
    "instrs_per_wave": (0.5, +1),
    "mfma_per_wave": (0.5, +1),
    "vgpr": (0.5, +1),
    "lds_bytes": (0.5, +1),
    "agpr": (0.25, +1),
    "sgpr": (0.25, +1),
    "workgroups": (0.25, -1),
}
INSTRUCTION_WEIGHT = 0.1  # a tracked mnemonic's count (a new or lost one: 10)
DEVICE_FLOOR = 0.01  # a kernel's device time must move by 1% to be ranked (the A/B's threshold)
FASTER = 0.25  # what a change in the direction that saves time counts

STATIC_LABELS = {
    "vgpr": "VGPRs",
    "agpr": "AGPRs",
    "sgpr": "SGPRs",
    "spills": "spills",
    "scratch_bytes": "scratch bytes",
    "lds_bytes": "LDS bytes",
    "occupancy": "occupancy",
    "instrs_per_wave": "instructions per wave",
    "mfma_per_wave": "MMA instructions per wave",
    "workgroups": "workgroups",
}
# The vector work figure's name per vendor (perfgate.explain.static_facts)
VECTOR_LABEL = {
    "gfx950": "vector instructions per wave (VALU cost)",
    "sm90": "ALU instructions per warp (SASS cost)",
}
KERNEL_CODE = ("kernels/_quant.py", "kernels/_gemm_kernel.py")


@dataclass(frozen=True)
class Difference:
    tier: int
    score: float
    part: str  # device, launch, host, static
    target: str | None
    field: str
    base: Any
    head: Any
    text: str  # one line, with its number
    kernel: str | None = None  # the kernel it is about (gemm, reducer), None: the host path

    def key(self) -> tuple:
        return (self.tier, -self.score, self.part, self.target or "", self.field)


def _rel(base: float, head: float) -> float | None:
    if not base:
        return None
    return head / base - 1


def _pct(rel: float | None) -> str:
    return "new" if rel is None else f"{rel:+.1%}"


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return " x ".join(map(str, v)) if all(isinstance(x, int) for x in v) else " + ".join(v)
    return "-" if v is None else str(v)


def _usable(fact: Any) -> bool:
    return isinstance(fact, dict) and "error" not in fact and "unavailable" not in fact


def why_not(fact: Any) -> str | None:
    if not isinstance(fact, dict):
        return "missing"
    return fact.get("error") or fact.get("unavailable")


def launch_differences(base: dict, head: dict, target: str, own: bool) -> list[Difference]:
    tier = 1 if own else 4
    out = []
    pairs: list[tuple[str, Any, Any]] = [
        (f, base["config"].get(f), head["config"].get(f))
        for f in sorted(set(base["config"]) | set(head["config"]))
    ]
    pairs += [(f, base.get(f), head.get(f)) for f in ("splits", "kernels", "quantizer", "grid")]
    pairs += [(f, base.get(f), head.get(f)) for f in ("k_per_split", "config_source")]
    for field, b, h in pairs:
        if b == h:
            continue
        if field == "quant_widen" and "gfx950" in target:
            continue  # gfx950's conversion instruction ignores it (kernels.gemm_config)
        kernel = "reducer" if field in ("split_k", "splits", "kernels") else "gemm"
        label = {"kernels": "kernels per call", "splits": "K splits", "grid": "grid"}.get(
            field, f"config {field}"
        )
        text = f"{target} launch: {label} {_fmt(b)} -> {_fmt(h)}"
        if field == "kernels":
            text += f" ({len(b or [])} -> {len(h or [])} launches per call)"
        out.append(
            Difference(
                tier, LAUNCH_WEIGHTS.get(field, 40), "launch", target, field, b, h, text, kernel
            )
        )
    return out


def static_differences(
    base: dict, head: dict, target: str, own: bool, changed: list[dict[str, str]]
) -> list[Difference]:
    tier = 3 if own else 5
    out = []
    code = [c["path"] for c in changed if c["path"] in KERNEL_CODE]
    where = (
        "; kernel code changed: "
        + ", ".join(f"{c['path']} ({c['role']})" for c in changed if c["path"] in KERNEL_CODE)
        if code
        else ""
    )
    for field, (weight, costly) in STATIC_WEIGHTS.items():
        b, h = base.get(field), head.get(field)
        if b == h:
            continue
        if b is None or h is None:
            score, number = 0.0, f"{_fmt(b)} -> {_fmt(h)}"
        else:
            rel = _rel(b, h)
            if rel is None:  # from 0
                score = 100.0 + h if field in ("spills", "scratch_bytes") else 50.0
            else:
                score = abs(rel) * 100 * weight
            if (h - b) * costly < 0:
                score *= FASTER
            number = f"{b} -> {h} ({_pct(rel)})"
        label = VECTOR_LABEL.get(target, "vector work") if field == "valu_per_wave" else None
        label = label or STATIC_LABELS.get(field, field)
        extra = where if field in ("valu_per_wave", "instrs_per_wave") else ""
        text = f"{target} GEMM kernel: {label} {number}{extra}"
        out.append(Difference(tier, round(score, 3), "static", target, field, b, h, text, "gemm"))
    bi, hi = base.get("instructions") or {}, head.get("instructions") or {}
    for m in sorted(set(bi) | set(hi)):
        b, h = bi.get(m, 0), hi.get(m, 0)
        if b == h:
            continue
        rel = _rel(b, h)
        score = 10.0 if not b or not h else abs(rel) * 100 * INSTRUCTION_WEIGHT
        text = f"{target} GEMM kernel: {m} {b} -> {h} ({_pct(rel)})"
        out.append(
            Difference(tier, round(score, 3), "static", target, f"instr:{m}", b, h, text, "gemm")
        )
    return out


def host_differences(base: dict, head: dict) -> list[Difference]:
    out = []
    bt, ht = base["totals"], head["totals"]
    for cat in sorted(set(bt) | set(ht)):
        b, h = bt.get(cat, 0), ht.get(cat, 0)
        if b == h:
            continue
        tier, weight = (6, 1) if cat == "python_calls" else (2, HOST_WEIGHTS.get(cat, 20))
        score = abs(h - b) * weight * (1 if h > b else FASTER)
        paths = _path_changes(base["paths"].get(cat, {}), head["paths"].get(cat, {}))
        text = f"host path: {cat.replace('_', ' ')} per call {b} -> {h} ({h - b:+d})"
        if paths and cat != "python_calls":
            text += f": {paths}"
        out.append(Difference(tier, float(score), "host", None, cat, b, h, text, None))
    return out


def _path_changes(base: dict[str, int], head: dict[str, int], limit: int = 2) -> str:
    moved = [(p, head.get(p, 0) - base.get(p, 0)) for p in sorted(set(base) | set(head))]
    moved = [(p, d) for p, d in moved if d]
    shown = [
        f"{d:+d} at {p.rpartition(' > ')[0] or p} > {p.rpartition(' > ')[2]}" for p, d in moved
    ]
    return "; ".join(shown[:limit]) + (
        f" (and {len(shown) - limit} more)" if len(shown) > limit else ""
    )


def device_differences(base: dict, head: dict) -> list[Difference]:
    out = []
    bk = {k["role"]: k for k in base["kernels"]}
    hk = {k["role"]: k for k in head["kernels"]}
    bcall, hcall = base["call_median_us"], head["call_median_us"]
    for role in sorted(set(bk) | set(hk)):
        b = bk.get(role, {}).get("median_us")
        h = hk.get(role, {}).get("median_us")
        if b is None or h is None:
            text = f"device: {role}: {'launched only by the head' if b is None else 'gone in the head'}"
            out.append(Difference(0, 100.0, "device", None, role, b, h, text, _kind(role)))
            continue
        rel = _rel(b, h)
        if rel is None or abs(rel) < DEVICE_FLOOR:
            continue
        score = abs(rel) * 100 * (1 if rel > 0 else FASTER)
        text = (
            f"device: {role}: {b:.2f} -> {h:.2f} us ({_pct(rel)}), "
            f"{b / bcall:.0%} -> {h / hcall:.0%} of the call's {bcall:.2f} -> {hcall:.2f} us"
        )
        out.append(Difference(0, round(score, 3), "device", None, role, b, h, text, _kind(role)))
    return out


def _kind(role: str) -> str | None:
    if role.startswith("GEMM"):
        return "gemm"
    if "reducer" in role:
        return "reducer"
    return None


def rank(differences: list[Difference]) -> list[Difference]:
    ranked = sorted(differences, key=Difference.key)
    # a device line names the likeliest static or launch cause of the same kernel beside it
    out = []
    for d in ranked:
        if d.part == "device" and d.kernel is not None:
            cause = next(
                (c for c in ranked if c.part in ("launch", "static") and c.kernel == d.kernel),
                None,
            )
            if cause is not None:
                d = Difference(
                    **{**d.__dict__, "text": f"{d.text}; the likeliest cause: {cause.text}"}
                )
        out.append(d)
    return out


def is_finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)
