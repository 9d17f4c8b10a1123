"""The GPU targets the suite builds for: one registry, the only place a target's facts live.

Every module that names a target (config selection, the quantizer choice, static compilation,
the ISA gate, the native reducer's build, nox sessions, baseline keys) reads it from
:data:`TARGETS`. Capabilities are predicates on a :class:`Target` (``has_fp4_convert``,
``is_amd``), never string comparisons spread through the code, so adding gfx942 or sm100 is one
entry here, optionally a tuned table (``kernels/_configs_<vendor>.py``), and a refreshed ISA
baseline (docs/CONTRIBUTING.md).

A *target* is a compile target with the facts of its reference card. A *device* is what torch
finds at run time (:mod:`kernels.device`); a device whose architecture is registered here takes
its hardware facts from here, so "MI355X has 256 CUs" is written down once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class QuantPath(enum.IntEnum):
    """How the in-kernel quantizer rounds to e2m1. An int so that it can be a Triton constexpr;
    the values are part of the compiled kernels' specialisation, so never renumber them."""

    PORTABLE = 0  # seven threshold comparisons in plain tl: every target and the interpreter
    GFX950_CVT = 1  # v_cvt_scalef32_pk_fp4_bf16 through inline asm
    # GFX950_CVT's operand preparation, then a plain-tl model of the instruction: runs anywhere
    # (the interpreter included), so a CPU test checks what the asm path hands the instruction
    GFX950_EMULATED = 2


@dataclass(frozen=True)
class Occupancy:
    """Per compute unit (CU on AMD, SM on NVIDIA): what bounds resident waves/warps."""

    simds: int  # SIMDs (AMD) or sub-partitions (NVIDIA) per CU
    max_waves_per_simd: int
    registers_per_simd: int  # 32-bit registers per SIMD / sub-partition (NVIDIA model)
    max_workgroups: int  # resident workgroups / blocks per CU
    shared_reserved_per_workgroup: int  # bytes the driver keeps per block (NVIDIA: 1 KiB)
    register_unit_per_thread: int  # allocation granularity, registers per thread


@dataclass(frozen=True)
class Target:
    """One compile target and the facts of the card it stands for."""

    name: str  # "gfx950", "sm90": the name used on command lines and in baseline files
    vendor: str  # "amd" or "nvidia"
    card: str  # the reference card, as torch names it
    backend: str  # triton.backends.compiler.GPUTarget backend: "hip" or "cuda"
    arch: Any  # GPUTarget arch: "gfx950" or 90
    wave_size: int  # threads per wave (AMD) / warp (NVIDIA)
    quant_path: QuantPath
    compute_units: int  # CUs on AMD, SMs on NVIDIA
    l2_bytes: int
    last_level_cache_bytes: int  # MI355X's Infinity Cache (torch does not report it), else L2
    shared_bytes_per_cu: int  # LDS per CU / shared memory per SM
    occupancy: Occupancy
    # smallest GEMM M tile the target's matrix instructions take through tl.dot_scaled (gfx950
    # pads 4- and 8-row tiles inside its 16-row scaled MFMA; NVIDIA's MMA needs 16)
    min_block_m: int
    baseline_key: str  # perf_baselines/<key>/: the reference card's device key
    # The runner's name in GPU MODE's harness (a submission's second POPCORN directive). GPU
    # MODE names its Hopper runners H100 (it has no H200 runner name), so sm90 says H100.
    leaderboard_gpu: str
    # The target its vendor's tools build for when nothing names one (ROCm: PYTORCH_ROCM_ARCH
    # unset); at most one per vendor.
    vendor_default: bool = False
    # Why `perfgate isa` cannot compile this target on a CPU; empty when it can.
    not_statically_compilable: str = ""
    # The ISA gate also compiles the native reducer's device code for this target, without a
    # GPU (AMD: the clang in the ziglang wheel; NVIDIA would need nvcc, which CPU runners lack).
    native_reducer_gated: bool = False

    @property
    def is_amd(self) -> bool:
        return self.vendor == "amd"

    @property
    def is_nvidia(self) -> bool:
        return self.vendor == "nvidia"

    @property
    def has_fp4_convert(self) -> bool:
        """The target converts bf16 pairs to e2m1 in one instruction."""
        return self.quant_path is QuantPath.GFX950_CVT

    @property
    def statically_compilable(self) -> bool:
        return not self.not_statically_compilable

    def gpu_target(self):
        """The ``triton.backends.compiler.GPUTarget`` that compiles for this target on a CPU."""
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.wave_size)


_MIB = 2**20

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            name="gfx950",
            vendor="amd",
            card="AMD Instinct MI355X",
            backend="hip",
            arch="gfx950",
            wave_size=64,
            quant_path=QuantPath.GFX950_CVT,
            compute_units=256,
            l2_bytes=4 * _MIB,
            last_level_cache_bytes=256 * _MIB,
            shared_bytes_per_cu=160 * 1024,  # CDNA4 LDS
            occupancy=Occupancy(
                simds=4,
                max_waves_per_simd=8,
                registers_per_simd=0,  # AMD occupancy comes from the compiler's own figure
                max_workgroups=0,
                shared_reserved_per_workgroup=0,
                register_unit_per_thread=0,
            ),
            min_block_m=4,
            baseline_key="gfx950-mi355x",
            leaderboard_gpu="MI355X",
            vendor_default=True,
            native_reducer_gated=True,
        ),
        Target(
            name="sm90",
            vendor="nvidia",
            card="NVIDIA H200",
            backend="cuda",
            arch=90,
            wave_size=32,
            quant_path=QuantPath.PORTABLE,
            compute_units=132,
            l2_bytes=60 * _MIB,
            last_level_cache_bytes=60 * _MIB,
            shared_bytes_per_cu=228 * 1024,
            occupancy=Occupancy(
                simds=4,
                max_waves_per_simd=16,  # 64 resident warps per SM
                registers_per_simd=16384,
                max_workgroups=32,
                shared_reserved_per_workgroup=1024,
                register_unit_per_thread=8,
            ),
            min_block_m=16,
            baseline_key="nvidia-h200",
            leaderboard_gpu="H100",
        ),
    )
}

# Other AMD architectures whose last-level cache torch does not report, for devices found at
# run time that are not (yet) targets.
INFINITY_CACHE_BYTES = {"gfx942": 256 * _MIB}


def get_target(name: str) -> Target:
    """The registered target ``name``; a clear error naming the known ones otherwise."""
    try:
        return TARGETS[name]
    except (KeyError, TypeError):
        raise ValueError(f"target must be one of {sorted(TARGETS)}, got {name!r}") from None


def default_for(vendor: str) -> Target:
    """The target ``vendor``'s tools build for when nothing names one."""
    (target,) = [t for t in TARGETS.values() if t.vendor == vendor and t.vendor_default]
    return target


def target_for_arch(arch: str) -> Target | None:
    """The registered target for a run-time architecture name (``gfx950``, ``sm90``), if any."""
    return TARGETS.get(arch)


def quant_path_for(arch: str, *, interpreted: bool) -> QuantPath:
    """The one rule that picks the quantizer: the target's path when compiled for a registered
    target, else the portable one (the interpreter cannot run inline asm)."""
    target = None if interpreted else target_for_arch(arch)
    return target.quant_path if target is not None else QuantPath.PORTABLE
