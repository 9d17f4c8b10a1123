"""The gfx950 path, compiled on any machine: the kernel must use the instructions it exists for.

``triton.compile`` with ``GPUTarget("hip", "gfx950", 64)`` runs on a CPU. A tuned gfx950 config
of the GEMM must contain the scaled MFMA (the FP4 matrix core) and the bf16 -> fp4 conversion
instruction (the in-register quantizer), and must not spill. The portable quantizer compiled for
gfx950 must not contain the conversion: the target, not a fallback, picks the path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.targets import QuantPath

CVT = "v_cvt_scalef32_pk_fp4_bf16"

# Compiled in a child process: under TRITON_INTERPRET=1 (the CPU suite) @triton.jit gives
# interpreter functions, which triton.compile cannot take.
_GEMM = """
import sys
from kernels.configs import select_config
from kernels.device import MI355X
from kernels.gemm import compile_spec
shape = tuple(int(v) for v in sys.argv[1].split(","))
print(compile_spec(select_config(*shape, MI355X), "gfx950", shape).compile("gfx950").asm["amdgcn"])
"""
_QUANT = """
import sys
from kernels._quant import quantize_kernel
from kernels.compile import CompileSpec
signature = {
    "x_ptr": "*bf16", "q_ptr": "*u8", "s_ptr": "*u8", "M": "i32", "K": "i32",
    "stride_xm": "i32", "stride_qm": "i32", "stride_sm": "i32",
    "BLOCK_M": "constexpr", "BLOCK_K": "constexpr", "QUANT_PATH": "constexpr",
    "NAN_BLOCK_CODES": "constexpr", "CAST_A": "constexpr",
}
constexprs = {"BLOCK_M": 16, "BLOCK_K": 256, "QUANT_PATH": int(sys.argv[1]), "NAN_BLOCK_CODES": True,
              "CAST_A": False}
print(CompileSpec("quantize", quantize_kernel, signature, constexprs).compile("gfx950").asm["amdgcn"])
"""


def _compile(script: str, arg: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", script, arg], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _metric(asm: str, name: str) -> int:
    return int(re.search(rf"\.{name}:\s+(\d+)", asm).group(1))


@pytest.mark.parametrize("shape", [(16, 2112, 7168), (256, 3072, 1536)], ids=["split-k", "large-m"])
def test_gemm_uses_scaled_mfma_and_the_fp4_conversion(shape):
    asm = _compile(_GEMM, ",".join(map(str, shape)))
    assert re.search(r"v_mfma_scale_f32_(16x16x128|32x32x64)_f8f6f4", asm)
    assert CVT in asm
    assert _metric(asm, "vgpr_spill_count") == 0
    assert _metric(asm, "private_segment_fixed_size") == 0  # no scratch
    assert re.search(r"(global|buffer)_load_dwordx4", asm)  # 16-byte weight loads


@pytest.mark.parametrize("path", list(QuantPath), ids=lambda p: p.name)
def test_quantizer_path_is_chosen_by_the_constexpr(path):
    asm = _compile(_QUANT, str(int(path)))
    assert (CVT in asm) is (path is QuantPath.GFX950_CVT)


# Static figures of the reference submission on the six ranked shapes (the team's gfx950
# reference figures): VALU per wave, workgroups and occupancy. Issue 14's goal, kept here: at
# most 1.25x its vector instructions per wave, no spill of any kind (VGPR, SGPR, or AGPRs taken
# as spill room), at least its grid, and occupancy >= 2 where it has 2 or more.
_REFERENCE = {
    (4, 2880, 512): (143, 23, 1),
    (16, 2112, 7168): (223, 238, 3),
    (32, 4096, 512): (267, 256, 3),
    (32, 2880, 512): (179, 92, 2),
    (64, 7168, 2048): (994, 224, 2),
    (256, 3072, 1536): (365, 192, 2),
}
_RANKED = """
import json
from kernels.targets import get_target
from kernels.configs import select_config
from kernels.device import MI355X
from kernels.gemm import compile_spec, static_workload
from perfgate.isa import collect, metrics
from kernels.shapes import LEADERBOARD
out = {}
for shape in LEADERBOARD:
    spec = compile_spec(select_config(*shape, MI355X), "gfx950", tuple(shape))
    compiled = spec.compile("gfx950")
    (k,) = metrics.parse_amdgcn(compiled.asm["amdgcn"]).values()
    fields = collect.amd_fields(
        get_target("gfx950"), compiled, spec.num_warps, static_workload(spec.config)
    )
    fields.update(vgpr_spills=k.vgpr_spills, sgpr_spills=k.sgpr_spills)
    out[",".join(map(str, shape))] = fields
print(json.dumps(out))
"""


# Static figures are facts of one compiler: the goals hold for the triton that the reference
# figures and the ISA baselines were made with (perf_baselines/isa/gfx950.json records it).
GOALS_TRITON = json.loads(
    (Path(__file__).resolve().parents[1] / "perf_baselines/isa/gfx950.json").read_text()
)["triton"]


def _missed_goals(figures: dict) -> list[str]:
    missed = []
    for shape, (valu, workgroups, occupancy) in _REFERENCE.items():
        got = figures[",".join(map(str, shape))]
        if got["valu_per_wave"] > 1.25 * valu:
            missed.append(f"{shape}: {got['valu_per_wave']} VALU/wave > 1.25 x {valu}")
        # a VGPR spill without scratch is a spill into AGPRs: vgpr_spills covers that room too
        if got["vgpr_spills"] or got["sgpr_spills"] or got["scratch_bytes"]:
            missed.append(f"{shape}: spills or scratch {got}")
        if got["workgroups"] < workgroups:
            missed.append(f"{shape}: {got['workgroups']} workgroups < {workgroups}")
        if got["occupancy"] < min(occupancy, 2):
            missed.append(f"{shape}: occupancy {got['occupancy']} < {min(occupancy, 2)}")
    return missed


def test_ranked_shapes_meet_the_static_goals():
    import triton

    missed = _missed_goals(json.loads(_compile(_RANKED, "").splitlines()[-1]))
    if missed and triton.__version__ != GOALS_TRITON:
        pytest.skip(
            f"the static goals are figures of triton {GOALS_TRITON} (run `nox -s test` without "
            f"--no-venv, whose env pins it); triton {triton.__version__} here misses them: "
            + "; ".join(missed)
        )
    assert not missed, missed


def test_static_goals_name_what_they_miss():
    # The checker itself, on figures made up here: each goal is missed by one field.
    ok = {"valu_per_wave": 0, "vgpr_spills": 0, "sgpr_spills": 0, "scratch_bytes": 0}
    figures = {
        ",".join(map(str, shape)): {**ok, "workgroups": wgs, "occupancy": 2}
        for shape, (_, wgs, _) in _REFERENCE.items()
    }
    assert _missed_goals(figures) == []
    figures["16,2112,7168"]["valu_per_wave"] = 279  # 1.25 x 223 = 278.75
    figures["4,2880,512"]["sgpr_spills"] = 1
    figures["32,4096,512"]["workgroups"] = 255
    figures["64,7168,2048"]["occupancy"] = 1
    assert [m.split(":")[0] for m in _missed_goals(figures)] == [
        "(4, 2880, 512)",
        "(16, 2112, 7168)",
        "(32, 4096, 512)",
        "(64, 7168, 2048)",
    ]
