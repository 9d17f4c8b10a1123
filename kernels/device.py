"""The device the code runs on: vendor, architecture, compute-unit count, cache sizes.

Everything else (config selection, the reducer loader, perfgate's timing and baseline keys) asks
this module instead of probing torch itself. Hardware facts of the suite's targets are written
once, in :mod:`kernels.targets`; a device found at run time takes from there what torch does not
report (MI355X's Infinity Cache) and the wave size.

Interpreter mode (``TRITON_INTERPRET=1``) is a device of its own: Triton kernels run on CPU
tensors, and the config model assumes the H200-like defaults below only for sizing, never for
timing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from kernels.interpreter import interpret_mode, interpreter_problem
from kernels.targets import INFINITY_CACHE_BYTES, TARGETS, Target, target_for_arch


@dataclass(frozen=True)
class DeviceInfo:
    vendor: str  # "amd", "nvidia" or "interpreter"
    name: str  # marketing name, e.g. "AMD Instinct MI355X" / "NVIDIA H200"
    arch: str  # "gfx950", "sm90", or "interpreter"
    compute_units: int  # CUs on AMD, SMs on NVIDIA
    l2_bytes: int
    last_level_cache_bytes: int  # Infinity Cache on AMD where there is one, else L2
    warp_size: int

    @property
    def key(self) -> str:
        """Baseline directory name, e.g. ``gfx950-mi355x`` or ``nvidia-h200``."""
        if self.vendor == "amd":
            model = self.name.split()[-1].lower() if self.name else "unknown"
            return f"{self.arch}-{model}"
        if self.vendor == "nvidia":
            model = self.name.lower().replace("nvidia", "").strip().split()[0]
            return f"nvidia-{model}"
        return "interpreter"


# Used for sizing (configs) when no GPU exists: the interpreter's numbers only shape the split
# decisions that the CPU tests exercise; they never reach a baseline.
INTERPRETER = DeviceInfo("interpreter", "Triton interpreter", "interpreter", 132, 0, 0, 32)


def target_device(target: Target) -> DeviceInfo:
    """A target's reference card as :func:`device_info` reports it there: code that works for a
    target without its GPU at hand (the static ISA gate, config tables) sizes with this."""
    return DeviceInfo(
        target.vendor,
        target.card,
        target.name,
        target.compute_units,
        target.l2_bytes,
        target.last_level_cache_bytes,
        target.wave_size,
    )


TARGET_DEVICES: dict[str, DeviceInfo] = {name: target_device(t) for name, t in TARGETS.items()}
MI355X = TARGET_DEVICES["gfx950"]
H200 = TARGET_DEVICES["sm90"]


# Read once: the check below is on the launcher's path, whose Python calls the host census counts.
INTERPRETER_PROBLEM = interpreter_problem()


def check_kernel_device(t: torch.Tensor, name: str) -> None:
    """Triton kernels take GPU tensors; CPU tensors only when they run in the interpreter, and
    only in an interpreter that can run them (:data:`INTERPRETER_PROBLEM`)."""
    if t.device.type != "cuda":
        if not interpret_mode():
            raise ValueError(
                f"{name} is on {t.device}; Triton kernels need GPU tensors, or TRITON_INTERPRET=1 "
                "set before triton is imported to run them on the CPU in the interpreter"
            )
        if INTERPRETER_PROBLEM is not None:
            raise RuntimeError(INTERPRETER_PROBLEM)


def is_hip() -> bool:
    return torch.version.hip is not None


def gpu_available() -> bool:
    return torch.cuda.is_available()


@functools.cache
def device_info(index: int | None = None) -> DeviceInfo:
    """Facts of GPU ``index`` (current device by default), or of the interpreter without a GPU."""
    if not gpu_available():
        return INTERPRETER
    idx = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(idx)
    l2 = int(getattr(props, "L2_cache_size", 0))
    if is_hip():
        vendor, arch = "amd", props.gcnArchName.split(":")[0]
    else:
        vendor, arch = "nvidia", f"sm{props.major}{props.minor}"
    target = target_for_arch(arch)
    infinity_cache = target.last_level_cache_bytes if target else INFINITY_CACHE_BYTES.get(arch, 0)
    # torch reports the wave size only in recent versions; the target knows it
    wave = getattr(props, "warp_size", None) or (target.wave_size if target else _WAVE[vendor])
    return DeviceInfo(
        vendor, props.name, arch, props.multi_processor_count, l2, max(l2, infinity_cache), wave
    )


# Wave size of a device that is not a registered target: every AMD Instinct GPU runs wave64,
# every NVIDIA GPU 32-thread warps.
_WAVE = {"amd": 64, "nvidia": 32}
