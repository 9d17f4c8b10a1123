"""Compile every spec of a target and turn the compiler's output into report entries.

Specs come from provider modules (``compile_specs(target) -> list[CompileSpec]``); a provider that
cannot be imported or returns nothing is an error, never a silent skip. Triton compiles are
CPU-bound and independent, so they run in a process pool; each worker rebuilds the provider's spec
list itself (a ``@triton.jit`` function does not pickle) and sends back only the small entry dict.
The native HIP reducer's gfx950 assembly (``kernels.reducer.build.device_asm``) adds its kernels
as entries of their own.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import multiprocessing
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from kernels.targets import TARGETS as REGISTRY
from kernels.targets import Target, get_target
from perfgate import cores, spawn
from perfgate.atomic import write_json
from perfgate.gate.paths import SCHEMA
from perfgate.isa import metrics

TOOL = "perfgate-isa"
# The registered targets that compile on a CPU (kernels.targets says why the others cannot).
TARGETS = tuple(name for name, t in REGISTRY.items() if t.statically_compilable)
# The modules whose compile_specs(target) the gate compiles (docs/CONTRACTS.md).
PROVIDERS = ("kernels.gemm", "kernels.splitk")
NATIVE_PROVIDER = "kernels.reducer.build"  # device_asm(target="gfx950") -> str
NATIVE_TARGETS = tuple(name for name in TARGETS if REGISTRY[name].native_reducer_gated)


class ProviderError(RuntimeError):
    """A spec provider is missing or broken: the gate cannot know what to compile."""


class CompileError(RuntimeError):
    """A spec failed to compile (the kernel or config is broken for this target)."""


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")


@functools.cache
def load_specs(module_name: str, target: str) -> tuple[Any, ...]:
    """The specs of one provider module for ``target`` (cached per process)."""
    from kernels.compile import CompileSpec

    _check_target(target)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProviderError(f"spec provider {module_name!r} cannot be imported: {exc}") from exc
    provider = getattr(module, "compile_specs", None)
    if not callable(provider):
        raise ProviderError(f"spec provider {module_name!r} has no compile_specs(target) function")
    specs = tuple(provider(target))
    if not specs:
        raise ProviderError(f"{module_name}.compile_specs({target!r}) returned no specs")
    for spec in specs:
        if not isinstance(spec, CompileSpec):
            raise ProviderError(
                f"{module_name}.compile_specs({target!r}) returned a {type(spec).__name__}, "
                "expected kernels.compile.CompileSpec"
            )
    return specs


def _entry(spec: Any, target: str, source: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": spec.label,
        "name": spec.name,
        "config": {
            k: v if isinstance(v, (int, float, str, bool)) else repr(v)
            for k, v in spec.config.items()
        },
        "target": target,
        "source": source,
        "num_warps": spec.num_warps,
        "num_stages": spec.num_stages,
        **fields,
    }


def cost_fields(
    target: Target, cost: metrics.StaticCost | None, workload: dict[str, int] | None
) -> dict[str, Any]:
    """The static cost figures of an entry (docs/isa.md, "Static cost"): vector instructions per
    wave and per MFMA from the code and the launch's K steps, and the grid fill from its
    workgroups. ``None`` where the spec has no workload (no shape) or the target no AMDGCN."""
    fields: dict[str, Any] = dict.fromkeys(COST_FIELDS)
    if workload is not None:
        fields["workgroups"] = workload["workgroups"]
        fields["grid_fill"] = round(workload["workgroups"] / target.compute_units, 3)
        if cost is not None:
            wave = metrics.per_wave(cost, workload["k_steps"])
            fields.update({k: wave[k] for k in _WAVE_FIELDS})
    return fields


# Per-entry cost fields; null where unknown (see cost_fields).
_WAVE_FIELDS = ("valu_per_wave", "instrs_per_wave", "mfma_per_wave", "instrs_per_mfma")
COST_FIELDS = (*_WAVE_FIELDS, "workgroups", "grid_fill")


def amd_fields(
    target: Target, compiled: Any, num_warps: int, workload: dict[str, int] | None = None
) -> dict[str, Any]:
    """Entry fields from a triton CompiledKernel for an AMD target."""
    kernels = metrics.parse_amdgcn(compiled.asm["amdgcn"])
    if len(kernels) != 1:
        raise metrics.IsaParseError(
            f"expected one kernel in triton's AMDGCN, found {sorted(kernels)}"
        )
    (k,) = kernels.values()
    # Triton's LDS is dynamic (metadata.shared): add it to any static LDS the compiler reports.
    lds = k.lds_bytes + int(compiled.metadata.shared)
    return {
        "vgpr": k.vgpr,
        "agpr": k.agpr,
        "sgpr": k.sgpr,
        "spills": k.vgpr_spills + k.sgpr_spills,
        "lds_bytes": lds,
        "scratch_bytes": k.scratch_bytes,
        "occupancy": metrics.amd_occupancy(target, k.occupancy, lds, num_warps),
        "instructions": k.instructions,
        **cost_fields(target, k.cost, workload),
    }


def _nvidia_tool(name: str) -> str:
    """Path of triton's bundled cuobjdump/nvdisasm (``TRITON_CUOBJDUMP_PATH`` etc. override)."""
    try:
        from triton import knobs

        path = getattr(knobs.nvidia, name).path
    except (ImportError, AttributeError) as exc:
        raise ProviderError(
            f"this triton has no knobs.nvidia.{name}: NVIDIA targets need triton >= 3.4"
        ) from exc
    if not path or not os.path.exists(path):
        raise ProviderError(
            f"{name} not found ({path!r}): NVIDIA targets need the backend tools that the PyPI "
            "triton wheel ships (a ROCm triton build lacks them)"
        )
    return path


def nvidia_fields(
    target: Target,
    compiled: Any,
    num_warps: int,
    workload: dict[str, int] | None = None,
    *,
    sass_cost: bool = False,
) -> dict[str, Any]:
    """Entry fields from a triton CompiledKernel for an NVIDIA target: cuobjdump, nvdisasm and
    the PTX. The gate's per-wave instruction figures are AMDGCN-only (null here); the grid fill
    is recorded. ``sass_cost``: the per-warp figures from the SASS instead
    (:func:`perfgate.isa.metrics.sass_static_cost`, ALU instructions in ``valu_per_wave``), which
    ``perfgate explain`` shows and the gate's baselines do not hold."""
    name = compiled.metadata.name
    with tempfile.TemporaryDirectory(prefix="perfgate-isa-") as tmp:
        cubin = Path(tmp, "kernel.cubin")
        cubin.write_bytes(compiled.asm["cubin"])
        usage_text = spawn.run(
            [_nvidia_tool("cuobjdump"), "-res-usage", str(cubin)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        sass = spawn.run(
            [_nvidia_tool("nvdisasm"), "-c", str(cubin)], check=True, capture_output=True, text=True
        ).stdout
    usages = metrics.parse_res_usage(usage_text)
    if name not in usages:
        raise metrics.IsaParseError(
            f"cuobjdump -res-usage has no function {name!r}: {sorted(usages)}"
        )
    usage = usages[name]
    counts = metrics.count_sass(sass) + metrics.count_ptx(compiled.asm["ptx"])
    shared = usage.shared_bytes + int(compiled.metadata.shared)
    return {
        "vgpr": usage.registers,
        "agpr": None,
        "sgpr": None,
        # Local-memory stores: Triton kernels keep no arrays in local memory, so these are spills.
        "spills": sum(n for op, n in counts.items() if op.split(".")[0] == "STL"),
        "lds_bytes": shared,
        "scratch_bytes": usage.local_bytes + usage.stack_bytes,
        "occupancy": metrics.nvidia_occupancy(target, usage.registers, shared, num_warps),
        "instructions": metrics.tracked(target.name, counts),
        **cost_fields(target, metrics.sass_static_cost(sass) if sass_cost else None, workload),
    }


_FIELDS: dict[str, Callable[..., dict[str, Any]]] = {
    "amd": amd_fields,
    "nvidia": nvidia_fields,
}


def workload_of(module_name: str, spec: Any) -> dict[str, int] | None:
    """What one launch of ``spec`` does (``k_steps``, ``workgroups``), from the provider's
    optional ``static_workload(config)``; ``None`` when the provider has none or the config no
    shape."""
    provider = getattr(importlib.import_module(module_name), "static_workload", None)
    if provider is None:
        return None
    workload = provider(spec.config)
    if workload is not None and not (
        isinstance(workload, dict)
        and all(isinstance(workload.get(key), int) for key in ("k_steps", "workgroups"))
    ):
        raise ProviderError(
            f"{module_name}.static_workload({spec.label}) must return None or "
            f"{{'k_steps': int, 'workgroups': int}}, got {workload!r}"
        )
    return workload


def compile_entry(module_name: str, target: str, index: int) -> dict[str, Any]:
    """Compile spec ``index`` of ``module_name`` for ``target``; runs in a pool worker."""
    spec = load_specs(module_name, target)[index]
    workload = workload_of(module_name, spec)
    compiled = _compile(spec, target)
    tgt = get_target(target)
    fields = _FIELDS[tgt.vendor](tgt, compiled, spec.num_warps, workload)
    return _entry(spec, target, "triton", fields)


def _compile(spec: Any, target: str) -> Any:
    """``spec`` compiled for ``target``; CompileError naming both when it fails."""
    with warnings.catch_warnings():
        # Triton 3.9 warns once per process that its fp-fusion default will change; the gate
        # records what the launchers compile today, so the notice is only noise in every worker.
        warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
        try:
            return spec.compile(target)
        except Exception as exc:
            raise CompileError(
                f"{spec.label} failed to compile for {target}: {type(exc).__name__}: {exc}"
            ) from exc


def spec_fields(spec: Any, target: str, module_name: str) -> dict[str, Any]:
    """The fields of one spec compiled for ``target`` (``module_name`` provides its workload),
    as :func:`compile_entry` records them, plus on NVIDIA the per-warp figures from the SASS
    (``sass_cost``): what ``perfgate explain`` compares one benchmark's kernel by."""
    workload = workload_of(module_name, spec)
    compiled = _compile(spec, target)
    tgt = get_target(target)
    if tgt.vendor == "nvidia":
        return nvidia_fields(tgt, compiled, spec.num_warps, workload, sass_cost=True)
    return _FIELDS[tgt.vendor](tgt, compiled, spec.num_warps, workload)


def native_entries(target: str) -> list[dict[str, Any]]:
    """Entries for every kernel in the native reducer's device assembly (``NATIVE_TARGETS``)."""
    if target not in NATIVE_TARGETS:
        raise ValueError(
            f"the native reducer's ISA is gated for {NATIVE_TARGETS} only, got {target!r}"
        )
    if importlib.util.find_spec("ziglang") is None:
        raise ProviderError(
            f"ziglang is not installed, so the native HIP reducer cannot be compiled for {target}: "
            "install the isa extra (pip install -e '.[isa]') or pass --skip-native"
        )
    try:
        build = importlib.import_module(NATIVE_PROVIDER)
    except ImportError as exc:
        raise ProviderError(
            f"native reducer provider {NATIVE_PROVIDER!r} cannot be imported: {exc}"
        ) from exc
    if not callable(getattr(build, "device_asm", None)):
        raise ProviderError(f"{NATIVE_PROVIDER} has no device_asm(target) function")
    try:
        text = build.device_asm(target=target)
    except getattr(build, "BuildError", RuntimeError) as exc:
        raise CompileError(f"the native reducer failed to compile for {target}: {exc}") from exc
    return asm_entries(text, target)


def asm_entries(text: str, target: str) -> list[dict[str, Any]]:
    """Entries (source "native") for every kernel in a clang-made AMDGCN assembly file."""
    entries = []
    for name, k in sorted(metrics.parse_amdgcn(text).items()):
        entries.append(
            {
                "key": f"native.{name}",
                "name": f"native.{name}",
                "config": {},
                "target": target,
                "source": "native",
                "num_warps": None,
                "num_stages": None,
                "vgpr": k.vgpr,
                "agpr": k.agpr,
                "sgpr": k.sgpr,
                "spills": k.vgpr_spills + k.sgpr_spills,
                "lds_bytes": k.lds_bytes,  # HIP's LDS is static: the compiler's occupancy counts it
                "scratch_bytes": k.scratch_bytes,
                "occupancy": k.occupancy,
                "instructions": k.instructions,
                **dict.fromkeys(COST_FIELDS),
            }
        )
    return entries


def native_compiler_version() -> str:
    return f"ziglang {importlib.metadata.version('ziglang')}"


def _pool(jobs: int) -> ProcessPoolExecutor:
    # fork: workers inherit the imported torch/triton instead of importing them again (seconds
    # each); nothing in the parent has started a GPU context or compiler thread by then.
    method = "fork" if "fork" in _start_methods() else "spawn"
    return ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=get_context(method),
        initializer=spawn.init_worker,  # they die with this process, and stop when told to
        initargs=(os.getpid(),),
    )


def _compile_all(work: list[tuple[str, str, int]], jobs: int) -> list[dict[str, Any]]:
    """``compile_entry`` of each item, in ``jobs`` worker processes. A failed compile, Ctrl-C
    or a stop signal ends every worker at once: the pool's own exit would first finish every
    compile already queued (minutes)."""
    pool = _pool(jobs)
    try:
        entries = list(pool.map(compile_entry, *zip(*work, strict=True)))
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    return entries


def _stop(pool: ProcessPoolExecutor) -> None:
    # Before Python 3.14 (terminate_workers) the executor has no public way to end its workers
    # before their work is done; its table of them is the way in.
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for worker in workers:
        worker.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.join(timeout=spawn.GRACE_S)


def _start_methods() -> list[str]:
    return multiprocessing.get_all_start_methods()


def collect(
    target: str,
    *,
    providers: Sequence[str] = PROVIDERS,
    native: bool = True,
    jobs: int = 1,
) -> dict[str, Any]:
    """The report for ``target``: every provider's specs compiled, plus the native reducer."""
    import triton

    _check_target(target)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
    if not providers:
        raise ValueError("providers must name at least one spec provider module")
    work = [(m, target, i) for m in providers for i in range(len(load_specs(m, target)))]
    if jobs == 1 or len(work) == 1:
        entries = [compile_entry(*w) for w in work]
    else:
        entries = _compile_all(work, min(jobs, len(work)))
    native = native and target in NATIVE_TARGETS
    if native:
        entries += native_entries(target)
    by_key: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry["key"] in by_key:
            raise ProviderError(
                f"two specs share the key {entry['key']!r}: give their configs distinct labels"
            )
        by_key[entry["key"]] = entry
    return {
        "schema": SCHEMA,
        "tool": TOOL,
        "target": target,
        "triton": triton.__version__,
        "native_compiler": native_compiler_version() if native else None,
        "providers": list(providers) + ([NATIVE_PROVIDER] if native else []),
        "entries": dict(sorted(by_key.items())),
    }


def default_jobs() -> int:
    """One worker per CPU the process may use."""
    return cores.usable()


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write ``report`` as stable, diff-friendly JSON, atomically (no half-written baseline)."""
    write_json(path, report, indent=1)
