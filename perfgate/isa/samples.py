"""Small kernels that give the ISA gate known compiler output to check itself against.

Not the code under test: ``python -m perfgate isa --providers perfgate.isa.samples`` and the tests
use them to show that the parsers find what is there (scaled MFMA, 16-byte loads).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.compile import CompileSpec
from kernels.targets import get_target


@triton.jit
def scaled_dot(
    a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    # One (BM, BN) tile of an MXFP4 x MXFP4 product: lowers to v_mfma_scale_* on gfx950.
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK // 2)
    rs = tl.arange(0, BK // 32)
    a = tl.load(a_ptr + rm[:, None] * (BK // 2) + rk[None, :])
    b = tl.load(b_ptr + rn[:, None] * (BK // 2) + rk[None, :])
    sa = tl.load(sa_ptr + rm[:, None] * (BK // 32) + rs[None, :])
    sb = tl.load(sb_ptr + rn[:, None] * (BK // 32) + rs[None, :])
    c = tl.dot_scaled(a, sa, "e2m1", tl.trans(b), sb, "e2m1")
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c.to(tl.bfloat16))


@triton.jit
def scale_bf16(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # Contiguous bf16 loads from 16-byte aligned pointers (``aligned``): 16-byte vector loads.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, (x.to(tl.float32) * 3.0).to(tl.bfloat16))


_PTRS_DOT = {"a_ptr": "*u8", "b_ptr": "*u8", "sa_ptr": "*u8", "sb_ptr": "*u8", "c_ptr": "*bf16"}


def compile_specs(target: str) -> list[CompileSpec]:
    """The sample specs; ``target`` is accepted for the provider interface (same specs for all)."""
    get_target(target)  # a clear error for an unknown target
    dot = {"BM": 32, "BN": 64, "BK": 256}
    return [
        CompileSpec(
            "sample_scaled_dot",
            scaled_dot,
            {**_PTRS_DOT, **dict.fromkeys(dot, "constexpr")},
            dot,
            num_warps=4,
            num_stages=2,
            config=dot,
        ),
        CompileSpec(
            "sample_scale_bf16",
            scale_bf16,
            {"x_ptr": "*bf16", "y_ptr": "*bf16", "BLOCK": "constexpr"},
            {"BLOCK": 2048},
            num_warps=4,
            num_stages=1,
            config={"BLOCK": 2048},
            aligned=("x_ptr", "y_ptr"),
        ),
    ]
