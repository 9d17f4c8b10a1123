"""Device facts, from one place: vendor, architecture, compute-unit count, cache sizes.

Everything else (config selection, the reducer loader, perfgate's timing and baseline keys) asks
this module instead of probing torch itself, so that a fact such as "MI355X has 256 CUs" is
written down once.

Interpreter mode (``TRITON_INTERPRET=1``) is a device of its own: Triton kernels run on CPU
tensors, and the config model assumes the H200-like defaults below only for sizing, never for
timing.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch

# Last-level cache sizes that a flush must exceed. torch does not report the MI355X Infinity
# Cache (MALL), so it is written here per architecture.
_INFINITY_CACHE_BYTES = {"gfx950": 256 * 2**20, "gfx942": 256 * 2**20}


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

# The cards the suite targets, as device_info() reports them there. Code that works for a target
# without its GPU at hand (the static ISA gate, the gfx950 compile tests) takes the facts from here.
MI355X = DeviceInfo("amd", "AMD Instinct MI355X", "gfx950", 256, 4 * 2**20, 256 * 2**20, 64)
H200 = DeviceInfo("nvidia", "NVIDIA H200", "sm90", 132, 60 * 2**20, 60 * 2**20, 32)
TARGET_DEVICES = {"gfx950": MI355X, "sm90": H200}


def interpret_mode() -> bool:
    """True when Triton kernels run in the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_kernel_device(t: torch.Tensor, name: str) -> None:
    """Triton kernels take GPU tensors; CPU tensors only when they run in the interpreter."""
    if t.device.type != "cuda" and not interpret_mode():
        raise ValueError(
            f"{name} is on {t.device}; Triton kernels need GPU tensors, or TRITON_INTERPRET=1 set "
            "before triton is imported to run them on the CPU in the interpreter"
        )


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
        arch = props.gcnArchName.split(":")[0]
        llc = max(l2, _INFINITY_CACHE_BYTES.get(arch, 0))
        return DeviceInfo("amd", props.name, arch, props.multi_processor_count, l2, llc, 64)
    arch = f"sm{props.major}{props.minor}"
    return DeviceInfo("nvidia", props.name, arch, props.multi_processor_count, l2, l2, 32)
