"""The environment a benchmark ran in: GPU, driver, runtime, torch/triton, git commit, clocks.

``collect()`` never fails for a missing tool or GPU: what cannot be read is ``None``. It goes
into pytest-benchmark's ``machine_info["perfgate"]["fingerprint"]`` (docs/CONTRACTS.md), so a
comparison can warn when the environment changed and refuse when the device did.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate import git, spawn
from perfgate.checkout import REPO as _REPO

_TIMEOUT_S = 10

# nvidia-smi fields -> our keys (MHz, W, degrees C)
_NVIDIA_FIELDS = (
    ("driver_version", "driver"),
    ("clocks.max.sm", "sm_max_mhz"),
    ("clocks.max.mem", "mem_max_mhz"),
    ("clocks.applications.graphics", "sm_app_mhz"),
    ("clocks.applications.memory", "mem_app_mhz"),
    ("power.limit", "power_limit_w"),
    ("clocks.sm", "sm_mhz"),
    ("clocks.mem", "mem_mhz"),
    ("power.draw", "power_w"),
    ("temperature.gpu", "temperature_c"),
)
_NVIDIA_GROUPS = (_NVIDIA_FIELDS[:1] + _NVIDIA_FIELDS[5:], _NVIDIA_FIELDS[1:3], _NVIDIA_FIELDS[3:5])
# Settings of the card (limits, application/locked clocks): the same run to run unless someone
# changed the machine, so they belong in the fingerprint that compare diffs.
CLOCK_SETTING_KEYS = ("sm_max_mhz", "mem_max_mhz", "sm_app_mhz", "mem_app_mhz", "power_limit_w")
# Readings that move with load and temperature: stored per benchmark (extra_info), never in the
# fingerprint, where they would raise a warning on every comparison.
CLOCK_READING_KEYS = ("sm_mhz", "mem_mhz", "power_w", "temperature_c")

Runner = Callable[[Sequence[str]], "str | None"]


def run_tool(cmd: Sequence[str]) -> str | None:
    """stdout of ``cmd``, or None when the tool is absent, fails or hangs."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = spawn.run(
            list(cmd), capture_output=True, text=True, timeout=_TIMEOUT_S, check=False, cwd=_REPO
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    match = re.search(r"[-+]?\d+(?:\.\d+)?", text)
    return float(match.group()) if match else None


def nvidia_smi(index: int, run: Runner = run_tool) -> dict[str, Any]:
    """Driver version, clocks, power and temperature of NVIDIA GPU ``index`` (None if unknown).

    Queried in small groups: nvidia-smi rejects a whole query when one field is unknown to the
    installed driver (field names change between releases).
    """
    result: dict[str, Any] = {key: None for _, key in _NVIDIA_FIELDS}
    for group in _NVIDIA_GROUPS:
        query = ",".join(field for field, _ in group)
        out = run(["nvidia-smi", f"--id={index}", f"--query-gpu={query}", "--format=csv,noheader,nounits"])  # fmt: skip
        line = out.strip().splitlines()[0] if out and out.strip() else ""
        values = [v.strip() for v in line.split(",")] if line else []
        if len(values) == len(group):
            for (_, key), value in zip(group, values, strict=True):
                result[key] = value if key == "driver" else _number(value)
    return result


def rocm_smi(index: int, run: Runner = run_tool) -> dict[str, Any]:
    """Driver version, clocks and power of AMD GPU ``index`` from rocm-smi (None if unknown).

    rocm-smi's JSON keys differ between releases, so values are matched by key text.
    """
    result: dict[str, Any] = {key: None for _, key in _NVIDIA_FIELDS}
    out = run(["rocm-smi", "-d", str(index), "--showclocks", "--showpower", "--showtemp",
               "--showmaxpower", "--showdriverversion", "--json"])  # fmt: skip
    try:
        data = json.loads(out) if out else {}
    except ValueError:
        data = {}
    fields: dict[str, str] = {}
    for section in data.values() if isinstance(data, dict) else ():
        if isinstance(section, dict):
            fields.update({str(k).lower(): str(v) for k, v in section.items()})
    for key, pattern in (
        ("driver", r"driver version"),
        ("sm_mhz", r"^sclk clock"),
        ("mem_mhz", r"^mclk clock"),
        ("power_w", r"(average|current).*power"),
        ("power_limit_w", r"max graphics package power"),
        ("temperature_c", r"temperature.*(edge|junction)"),
    ):
        for name, value in fields.items():
            if re.search(pattern, name):
                result[key] = value.strip() if key == "driver" else _number(value)
                break
    if result["driver"] is None:
        version = Path("/sys/module/amdgpu/version")
        with contextlib.suppress(OSError):
            result["driver"] = version.read_text().strip() or None
    return result


def smi(vendor: str, index: int, run: Runner = run_tool) -> dict[str, Any]:
    """Driver and clocks from the vendor tool; all None on a machine without one."""
    if vendor == "nvidia":
        return nvidia_smi(index, run)
    if vendor == "amd":
        return rocm_smi(index, run)
    return {key: None for _, key in _NVIDIA_FIELDS}


def clock_readings(run: Runner = run_tool) -> dict[str, Any]:
    """SM/memory clocks (MHz), power (W) and temperature now; None for what cannot be read."""
    info = smi(*_current_gpu(), run)
    return {key: info[key] for key in CLOCK_READING_KEYS}


def git_state(read: Callable[..., str | None] = git.read) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the repository holding perfgate; (None, None) outside git."""
    commit = read("rev-parse", "HEAD", cwd=_REPO, timeout=_TIMEOUT_S)
    if not commit:
        return None, None
    status = read("status", "--porcelain", "--untracked-files=no", cwd=_REPO, timeout=_TIMEOUT_S)
    return commit.strip(), (bool(status.strip()) if status is not None else None)


def physical_index(index: int, environ: Mapping[str, str] = os.environ) -> int:
    """The index nvidia-smi / rocm-smi use for torch's device ``index``.

    torch numbers only the visible GPUs; the tools number all of them. A visibility list of
    plain integers maps one to the other; anything else (UUIDs) is left as torch's index.
    """
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        visible = environ.get(var, "").strip()
        if visible:
            ids = [v.strip() for v in visible.split(",")]
            if all(v.isdigit() for v in ids) and index < len(ids):
                return int(ids[index])
            return index
    return index


def _current_gpu() -> tuple[str, int]:
    import torch

    from kernels.device import device_info

    vendor = device_info().vendor
    index = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return vendor, physical_index(index)


def _runtime() -> str | None:
    import torch

    if torch.version.hip:
        return f"hip {torch.version.hip}"
    if torch.version.cuda:
        return f"cuda {torch.version.cuda}"
    return None


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # an absent or broken install is recorded as unknown, never fatal
        return None


def collect(run: Runner = run_tool) -> dict[str, Any]:
    """The fingerprint: the contract's keys plus ``git_dirty`` and ``device_key``."""
    from kernels.device import device_info

    info = device_info()
    vendor, index = _current_gpu()
    tool = smi(vendor, index, run)
    commit, dirty = git_state()
    gpu = info.vendor != "interpreter"
    return {
        "gpu_name": info.name if gpu else None,
        "arch": info.arch if gpu else None,
        "compute_units": info.compute_units if gpu else None,
        "driver": tool["driver"],
        "runtime": _runtime(),
        "torch": _version("torch"),
        "triton": _version("triton"),
        "git_commit": commit,
        "git_dirty": dirty,
        "clocks": {key: tool[key] for key in CLOCK_SETTING_KEYS},
        "device_key": info.key,
    }
