"""Ahead-of-time compilation of the suite's Triton kernels for a named target, without a GPU.

``triton.compile`` with an explicit ``GPUTarget`` builds AMD gfx950 ISA or NVIDIA PTX/SASS on a
CPU-only machine. The static ISA gate (``perfgate isa``) and the gfx950 tests compile through
:class:`CompileSpec`, which the kernel modules produce (``kernels.gemm.compile_specs`` and
``kernels.splitk.compile_specs``), so the gate always compiles exactly what the launchers run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernels.targets import get_target


@dataclass(frozen=True)
class CompileSpec:
    """One kernel specialisation: what to compile and the config it stands for."""

    name: str  # kernel family, e.g. "gemm_a16wfp4" or "splitk_reduce"
    fn: Any  # the @triton.jit function
    signature: dict[str, str]  # arg name -> triton type ("*bf16", "i32", "constexpr", ...)
    constexprs: dict[str, Any]
    num_warps: int = 4
    num_stages: int = 2
    config: dict[str, Any] = field(default_factory=dict)  # human-readable label of the config
    # args that are 16-byte aligned / divisible by 16 when the launcher runs the kernel; the JIT
    # specialises on that at run time, so the static compile must too or it would gate on
    # narrower loads than the ones that run
    aligned: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)  # extra backend options (AMD hints)

    @property
    def label(self) -> str:
        cfg = ",".join(f"{k}={v}" for k, v in self.config.items())
        return f"{self.name}[{cfg}]"

    def compile(self, target: str):
        """Compile for ``target``; returns triton's CompiledKernel (``.asm`` has the ISA)."""
        import triton
        from triton.compiler import ASTSource

        registered = get_target(target)
        tgt = registered.gpu_target()
        src = ASTSource(self.fn, self.signature, self.constexprs, attrs=self._attrs(tgt))
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if registered.is_amd:
            options.update(self.options)
        return triton.compile(src, target=tgt, options=options)

    def _attrs(self, tgt) -> dict:
        """Run-time specialisation attributes: divisibility, and on AMD the 32-bit pointer range
        that the launcher's sub-2 GiB tensors get (it enables buffer loads)."""
        from triton import knobs
        from triton.compiler import make_backend

        backend = make_backend(tgt)
        buffer_ops = tgt.backend == "hip" and bool(getattr(knobs.amd, "use_buffer_ops", False))
        attrs = {}
        for name in self.aligned:
            desc = "D" + ("S" if buffer_ops and self.signature[name].startswith("*") else "")
            attrs[(self.fn.arg_names.index(name),)] = backend.parse_attr(desc)
        return attrs
