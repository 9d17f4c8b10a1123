"""What the compiler says about a kernel: parsers for AMDGCN text, cuobjdump/nvdisasm output and PTX.

Pure text in, plain numbers out; nothing here compiles or imports triton, so the parsers are tested
on stored real compiler output. Every parser raises :class:`IsaParseError` when a field it needs
is absent: a changed output format must stop the gate, never read as "0 spills".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from kernels.targets import Target, get_target
from perfgate.refusal import Refusal

# Mnemonics whose counts a report keeps, per vendor's ISA (AMDGCN; SASS + PTX). Everything else is noise for this gate.
_TRACKED = {
    "amd": re.compile(
        r"^(v_mfma\w*|v_cvt_scalef32\w*|v_cvt_pk_bf16_f32|"
        r"(global|buffer)_(load|store|atomic)\w*|ds_(read|write|load|store)\w*|scratch_\w*)$"
    ),
    "nvidia": re.compile(
        r"^(HGMMA|HMMA|LDG|STG|LDGSTS|UTMALDG|UBLKCP|LDSM|STL|LDL|F2FP)(\.[\w.]+)?$"
        r"|^ptx\.(wgmma\.mma_async|mma\.sync|ld\.global|cvt\.rn\.bf16)[\w.]*$"
    ),
}

# Instruction families whose loss (baseline count > 0, current count 0) is a regression.
WANTED_FAMILIES: dict[str, dict[str, re.Pattern[str]]] = {
    "amd": {
        "scaled MFMA (v_mfma_scale_*)": re.compile(r"^v_mfma_scale_"),
        "any MFMA (v_mfma*)": re.compile(r"^v_mfma"),
        "fp4 convert (v_cvt_scalef32_pk_fp4_*)": re.compile(r"^v_cvt_scalef32_pk_fp4_"),
        "16-byte global loads": re.compile(
            r"^(global_load_dwordx4|buffer_load_dwordx4|global_load_b128|buffer_load_b128)$"
        ),
    },
    "nvidia": {
        "tensor-core MMA (HGMMA/HMMA)": re.compile(r"^(HGMMA|HMMA)"),
        "warpgroup MMA (HGMMA)": re.compile(r"^HGMMA"),
        # plain 16-byte loads, cp.async 16-byte copies, and TMA bulk loads
        "16-byte global loads (LDG/LDGSTS .128, UTMALDG)": re.compile(
            r"^((LDG|LDGSTS)\..*128|UTMALDG)"
        ),
        "bf16 convert (F2FP.BF16*)": re.compile(r"^F2FP\.BF16"),
    },
}


class IsaParseError(Refusal, ValueError):
    """The compiler output lacks a field the gate needs (format changed, or not this kind of text)."""


@dataclass(frozen=True)
class AmdgcnKernel:
    """The numbers the AMDGPU backend reports for one kernel in an assembly file."""

    name: str
    vgpr: int  # .vgpr_count: architected + accumulation VGPRs (unified file on gfx90a+)
    agpr: int
    sgpr: int
    vgpr_spills: int
    sgpr_spills: int
    lds_bytes: int  # .group_segment_fixed_size: static LDS only
    scratch_bytes: int  # .private_segment_fixed_size, per work-item
    occupancy: int  # "; Occupancy: N" waves per SIMD, from registers and static LDS
    instructions: dict[str, int]
    # static counts per class (see :func:`static_cost`), outside and inside the loop bodies
    cost: StaticCost | None = None


def tracked(target: str, counts: Counter[str] | dict[str, int]) -> dict[str, int]:
    """The counts of the mnemonics that matter for ``target``, sorted by mnemonic."""
    return _tracked(get_target(target).vendor, counts)


def _tracked(vendor: str, counts: Counter[str] | dict[str, int]) -> dict[str, int]:
    pattern = _TRACKED[vendor]
    return {m: int(n) for m, n in sorted(counts.items()) if n and pattern.match(m)}


def family_counts(target: str, instructions: dict[str, int]) -> dict[str, int]:
    """Sum of counts per wanted family (see :data:`WANTED_FAMILIES`) of ``target``'s ISA."""
    return {
        family: sum(n for m, n in instructions.items() if pattern.match(m))
        for family, pattern in WANTED_FAMILIES[get_target(target).vendor].items()
    }


# ---------------------------------------------------------------- AMDGCN

_FUNCTION = re.compile(r"^\t\.type\t([\w.$]+),@function$", re.M)
_METADATA = re.compile(r"^\t\.amdgpu_metadata\n(.*?)^\t\.end_amdgpu_metadata$", re.M | re.S)
_OCCUPANCY = re.compile(r"^; Occupancy: (\d+)$", re.M)
_INSTRUCTION = re.compile(r"^\s+([a-z][a-z0-9_]*)(?:\s|$)", re.M)
_META_FIELDS = {
    "vgpr": ".vgpr_count",
    "agpr": ".agpr_count",
    "sgpr": ".sgpr_count",
    "vgpr_spills": ".vgpr_spill_count",
    "sgpr_spills": ".sgpr_spill_count",
    "lds_bytes": ".group_segment_fixed_size",
    "scratch_bytes": ".private_segment_fixed_size",
}


def _metadata_entries(text: str) -> dict[str, dict[str, str]]:
    """``amdhsa.kernels`` of the code-object metadata (YAML), as {kernel name: {key: value}}."""
    blocks = _METADATA.findall(text)
    if len(blocks) != 1:
        raise IsaParseError(f"expected one .amdgpu_metadata block, found {len(blocks)}")
    entries: list[dict[str, str]] = []
    for line in blocks[0].splitlines():
        # Each kernel is a YAML list item at indent 2; its scalar fields sit at indent 4.
        item = re.match(r"^  - (\.\w+):\s+(\S+)$", line)
        field = re.match(r"^    (\.\w+):\s+(\S+)$", line)
        if item:
            entries.append({item[1]: item[2]})
        elif field and entries:
            entries[-1][field[1]] = field[2]
    by_name = {}
    for entry in entries:
        if ".name" not in entry:
            raise IsaParseError("a kernel in amdhsa.kernels has no .name")
        by_name[entry[".name"]] = entry
    return by_name


def parse_amdgcn(text: str) -> dict[str, AmdgcnKernel]:
    """Every kernel in an AMDGCN assembly file (triton's ``asm["amdgcn"]`` or ``clang -S``)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str (AMDGCN assembly), got {type(text).__name__}")
    meta = _metadata_entries(text)
    starts = list(_FUNCTION.finditer(text))
    if not starts:
        raise IsaParseError("no '.type NAME,@function' in the text: not AMDGCN assembly")
    kernels = {}
    for i, start in enumerate(starts):
        name = start[1]
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        segment = text[start.start() : end]
        if name not in meta:
            continue  # a device function, not a kernel: its cost shows in its callers
        # The body runs from the label to .Lfunc_end; the "; Kernel info" block follows it.
        body_end = segment.find(".Lfunc_end")
        if body_end < 0:
            raise IsaParseError(f"kernel {name}: no .Lfunc_end label")
        occupancy = _OCCUPANCY.findall(segment)
        if len(occupancy) != 1:
            raise IsaParseError(
                f"kernel {name}: expected one '; Occupancy: N' line, found {len(occupancy)}"
            )
        fields = {}
        for attr, key in _META_FIELDS.items():
            if key not in meta[name]:
                raise IsaParseError(f"kernel {name}: metadata has no {key}")
            fields[attr] = int(meta[name][key])
        counts = Counter(_INSTRUCTION.findall(segment[:body_end]))
        kernels[name] = AmdgcnKernel(
            name=name,
            occupancy=int(occupancy[0]),
            instructions=_tracked("amd", counts),
            cost=static_cost(segment[:body_end]),
            **fields,
        )
    missing = sorted(set(meta) - set(kernels))
    if missing:
        raise IsaParseError(f"kernels in the metadata without a function body: {missing}")
    return kernels


# ---------------------------------------------------------------- AMDGCN static cost
#
# The figures the gate compares kernels by (docs/isa.md, "Static cost"): how many vector
# instructions a wave issues for one program, from the static code and the trip count of its
# main loop. The loop trips are not in the ISA: the launcher knows them (the GEMM's K steps per
# program), so the parser only splits the code into "once" and "per loop iteration", and
# :func:`per_wave` combines the two with the caller's step count.

_LABEL = re.compile(r"^([.\w$]+):", re.M)
_LINE_INSTRUCTION = re.compile(r"^\s+([a-z][a-z0-9_]*)(?:\s+(.*?))?\s*(?:;.*)?$")
_BRANCH = re.compile(r"^s_(c?branch)\w*$")


@dataclass(frozen=True)
class StaticCost:
    """Static instruction counts of one kernel body, split by where they sit.

    ``loop_*`` count the instructions between a loop's header label and its backward branch
    (nested or repeated loops are summed); the rest run once per program. Classes: ``all`` every
    instruction, ``valu`` every ``v_*`` (MFMA and converts included, as the reference figures
    count), ``mfma`` every ``v_mfma*``.
    """

    once_all: int
    once_valu: int
    once_mfma: int
    loop_all: int
    loop_valu: int
    loop_mfma: int
    loops: int  # backward branches found


def static_cost(body: str) -> StaticCost:
    """Split an AMDGCN function body (label to ``.Lfunc_end``) into once / per-iteration counts."""
    labels: dict[str, int] = {}
    ops: list[tuple[str, str]] = []  # (mnemonic, operands), in order
    for line in body.splitlines():
        label = _LABEL.match(line)
        if label:
            labels[label[1]] = len(ops)
            continue
        inst = _LINE_INSTRUCTION.match(line)
        if inst and not line.lstrip().startswith("."):
            ops.append((inst[1], inst[2] or ""))

    def loop_start(i: int, op: str, args: str) -> int | None:
        target = labels.get(args.split()[0] if args else "") if _BRANCH.match(op) else None
        return target if target is not None and target <= i else None

    def kinds(op: str) -> tuple[str, ...]:
        if not op.startswith("v_"):
            return ()
        return ("valu", "mfma") if op.startswith("v_mfma") else ("valu",)

    return _cost(ops, loop_start, kinds)


def _cost(
    ops: list[tuple[str, str]],
    loop_start: Callable[[int, str, str], int | None],
    kinds: Callable[[str], tuple[str, ...]],
) -> StaticCost:
    """The :class:`StaticCost` of ``ops`` (mnemonic, operands), in order: ``loop_start(i, op,
    args)`` is the index a backward branch at ``i`` goes back to (None: no loop), and everything
    from there to ``i`` is loop body; ``kinds(op)`` the counters besides ``all`` an op adds to."""
    in_loop = [False] * len(ops)
    loops = 0
    for i, (op, args) in enumerate(ops):
        start = loop_start(i, op, args)
        if start is not None:
            loops += 1
            for j in range(start, i + 1):
                in_loop[j] = True
    counts = {"once": Counter(), "loop": Counter()}
    for (op, _), looped in zip(ops, in_loop, strict=True):
        c = counts["loop" if looped else "once"]
        c["all"] += 1
        c.update(kinds(op))
    once, loop = counts["once"], counts["loop"]
    return StaticCost(
        once_all=once["all"], once_valu=once["valu"], once_mfma=once["mfma"],
        loop_all=loop["all"], loop_valu=loop["valu"], loop_mfma=loop["mfma"], loops=loops,
    )  # fmt: skip


def per_wave(cost: StaticCost, steps: int) -> dict[str, float | int]:
    """Executed instructions per wave for a program that runs ``steps`` main-loop steps.

    The compiler software-pipelines the loop: it peels whole iterations into the prologue and
    epilogue, so the loop body runs ``steps - peeled`` times, where ``peeled`` is the number of
    MFMA groups outside the loop (each step issues ``loop_mfma`` MFMAs). Instructions on
    mutually exclusive paths (the "no iterations" branch) are all counted: an upper bound.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if cost.loops == 0 or cost.loop_mfma == 0:
        trips = 0 if cost.loops == 0 else steps
    else:
        peeled = round(cost.once_mfma / cost.loop_mfma)
        trips = max(0, steps - peeled)
    valu = cost.once_valu + trips * cost.loop_valu
    mfma = cost.once_mfma + trips * cost.loop_mfma
    instrs = cost.once_all + trips * cost.loop_all
    return {
        "loop_trips": trips,
        "valu_per_wave": valu,
        "mfma_per_wave": mfma,
        "instrs_per_wave": instrs,
        "instrs_per_mfma": round(instrs / mfma, 1) if mfma else None,
    }


def amd_occupancy(
    target: Target, compiler_occupancy: int, lds_bytes: int, waves_per_workgroup: int
) -> int:
    """Waves per SIMD: the compiler's figure, lowered by the LDS that the launcher allocates.

    Triton allocates its LDS dynamically (``metadata.shared``), which the compiler's
    ``; Occupancy`` line does not see: ``floor(LDS per CU / lds)`` workgroups fit in a CU, each
    spreading ``waves_per_workgroup`` waves over the CU's SIMDs.
    """
    if lds_bytes < 0 or waves_per_workgroup < 1 or compiler_occupancy < 0:
        raise ValueError(
            f"need lds_bytes >= 0, waves_per_workgroup >= 1, compiler_occupancy >= 0; got "
            f"{lds_bytes}, {waves_per_workgroup}, {compiler_occupancy}"
        )
    if lds_bytes == 0:
        return compiler_occupancy
    occ = target.occupancy
    workgroups = target.shared_bytes_per_cu // lds_bytes
    by_lds = workgroups * waves_per_workgroup // occ.simds
    return min(compiler_occupancy, by_lds, occ.max_waves_per_simd)


# ---------------------------------------------------------------- NVIDIA (SASS, PTX)

_RES_USAGE = re.compile(r"^\s*Function ([\w.$]+):\n\s*(.*)$", re.M)
_SASS_OPCODE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)", re.M)
_PTX_INSTRUCTION = re.compile(r"^\s+(?:@!?%p\w+\s+)?([a-z][a-z0-9_.]*)\s", re.M)


@dataclass(frozen=True)
class ResourceUsage:
    """``cuobjdump -res-usage`` for one function."""

    registers: int
    stack_bytes: int
    shared_bytes: int  # static shared memory
    local_bytes: int  # per-thread local memory: spills and stack arrays


def parse_res_usage(text: str) -> dict[str, ResourceUsage]:
    """``cuobjdump -res-usage CUBIN`` output, as {function name: usage}."""
    usages = {}
    for name, line in _RES_USAGE.findall(text):
        fields = dict(re.findall(r"([A-Z_\[\]0-9]+):(\d+)", line))
        try:
            usages[name] = ResourceUsage(
                registers=int(fields["REG"]),
                stack_bytes=int(fields["STACK"]),
                shared_bytes=int(fields["SHARED"]),
                local_bytes=int(fields["LOCAL"]),
            )
        except KeyError as exc:
            raise IsaParseError(
                f"function {name}: cuobjdump -res-usage has no {exc.args[0]}"
            ) from None
    if not usages:
        raise IsaParseError("no 'Function NAME:' in cuobjdump -res-usage output")
    return usages


def count_sass(text: str) -> Counter[str]:
    """Opcode counts (with modifiers, e.g. ``LDG.E.128``) in ``nvdisasm``/``cuobjdump -sass`` text."""
    counts = Counter(_SASS_OPCODE.findall(text))
    if not counts:
        raise IsaParseError("no SASS instructions found in the disassembly")
    return counts


def count_ptx(text: str) -> Counter[str]:
    """PTX instruction counts, keyed ``ptx.<opcode with modifiers>``."""
    counts = Counter(f"ptx.{op}" for op in _PTX_INSTRUCTION.findall(text))
    if not counts:
        raise IsaParseError("no PTX instructions found")
    return counts


# SASS has no vector/scalar split in its mnemonics: the per-thread ALU work is every instruction
# that is not an MMA, a memory access, control flow or the uniform (per-warp scalar) datapath.
_SASS_MMA = re.compile(r"^(HGMMA|HMMA)")
_SASS_NOT_ALU = re.compile(
    r"^(LD|ST|ATOM|RED|UTMA|UBLKCP|CCTL|MEMBAR|FENCE|ERRBAR|DEPBAR|LDGDEPBAR|"
    r"BRA|BRX|JMP|JMX|CALL|RET|EXIT|BAR|BSYNC|BSSY|WARPSYNC|NOP|YIELD|WARPGROUP|SYNCS|"
    r"ELECT|BPT|KILL|NANOSLEEP|ACQBULK|ENDCOLLECTIVE|U[A-Z])"
)
_SASS_LINE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)(.*)$")
_SASS_LABEL = re.compile(r"^(\.L_x_\d+):")
_SASS_TARGET = re.compile(r"`\((\.L_x_\d+)\)")


def sass_static_cost(text: str) -> StaticCost:
    """:class:`StaticCost` of the one kernel in ``nvdisasm -c`` text, the SASS counterpart of
    :func:`static_cost`: ``valu`` counts the per-thread ALU instructions (every instruction but
    MMAs, memory accesses, control flow and the uniform datapath's ``U*`` ones), ``mfma`` the
    ``HGMMA``/``HMMA`` ones; a loop is the code between a label and a backward ``BRA`` to it (a
    branch to itself, the trap at the end, is no loop). :func:`per_wave` then gives per-warp
    figures."""
    labels: dict[str, int] = {}
    ops: list[tuple[str, str]] = []
    for line in text.splitlines():
        label = _SASS_LABEL.match(line)
        if label:
            labels[label[1]] = len(ops)
            continue
        inst = _SASS_LINE.match(line)
        if inst:
            ops.append((inst[1].split(".")[0], inst[2]))
    if not ops:
        raise IsaParseError("no SASS instructions found in the disassembly")

    def loop_start(i: int, op: str, args: str) -> int | None:
        target = _SASS_TARGET.search(args) if op == "BRA" else None
        start = labels.get(target[1]) if target else None
        return start if start is not None and start < i else None  # a BRA to itself: the trap

    def kinds(op: str) -> tuple[str, ...]:
        if _SASS_MMA.match(op):
            return ("mfma",)
        return () if _SASS_NOT_ALU.match(op) else ("valu",)

    return _cost(ops, loop_start, kinds)


def nvidia_occupancy(
    target: Target, registers: int, shared_bytes: int, warps_per_block: int
) -> int:
    """Resident warps per SM from registers, shared memory and the block limits."""
    if registers < 0 or shared_bytes < 0 or warps_per_block < 1:
        raise ValueError(
            f"need registers >= 0, shared_bytes >= 0, warps_per_block >= 1; got "
            f"{registers}, {shared_bytes}, {warps_per_block}"
        )
    occ, lanes = target.occupancy, target.wave_size
    blocks = min(occ.max_workgroups, occ.simds * occ.max_waves_per_simd // warps_per_block)
    if registers:
        unit = occ.register_unit_per_thread
        per_thread = -(-registers // unit) * unit
        warps = occ.simds * (occ.registers_per_simd // (per_thread * lanes))
        blocks = min(blocks, warps // warps_per_block)
    per_block = shared_bytes + occ.shared_reserved_per_workgroup
    blocks = min(blocks, target.shared_bytes_per_cu // per_block)
    return blocks * warps_per_block
