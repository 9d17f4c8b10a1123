"""The static ISA gate: parsers on real compiler output, the gate's verdicts on edited baselines,
the CLI's exit codes, and the scaled-MFMA content of the real GEMM.

Compiles run in a subprocess: tests/conftest.py sets TRITON_INTERPRET=1 in this process, and an
interpreted @triton.jit function cannot be compiled.

Real output comes from two places: triton compiles of the small kernels in perfgate.isa.samples
(gfx950 and sm90 compile on any CPU) and data/isa/hip_kernels.gfx950.s, clang 22 (ziglang 0.17.1)
output of data/isa/hip_kernels.hip, whose ``starved`` kernel spills on purpose.
"""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.targets import get_target
from perfgate.isa import collect, gate, metrics

DATA = Path(__file__).parent / "data" / "isa"
HIP_ASM = (DATA / "hip_kernels.gfx950.s").read_text()
SAMPLES = "perfgate.isa.samples"
DOT = "sample_scaled_dot[BM=32,BN=64,BK=256]"
COPY = "sample_scale_bf16[BLOCK=2048]"


def _has_nvidia_tools() -> bool:
    try:
        collect._nvidia_tool("cuobjdump")
        collect._nvidia_tool("nvdisasm")
    except collect.ProviderError:
        return False
    return True


ROOT = Path(__file__).parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _cli(
    *args: str, target: str = "gfx950", providers: str = SAMPLES
) -> subprocess.CompletedProcess:
    """``python -m perfgate isa`` on the sample kernels, without the native reducer."""
    cmd = [sys.executable, "-m", "perfgate", "isa", "--target", target, "--providers", providers]
    cmd += ["--skip-native", "--jobs", "1", *args]
    return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)


# perfgate's main as ``python -m perfgate`` runs it, then on stdout the heavy libraries it loaded
_PROBE = (
    "import sys\n"
    "from perfgate.__main__ import main\n"
    "code = main(sys.argv[1:])\n"
    "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))\n"
    "sys.exit(code)\n"
)


def _refused(
    *args: str,
    target: str = "gfx950",
    providers: str = SAMPLES,
    env: dict[str, str] | None = None,
    loads: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """``perfgate isa`` that must refuse: exit 2, one line on stderr, nothing else on stdout than
    the probe's list of heavy libraries, which must be ``loads``. A refusal that waits for torch
    (seconds) costs every CI run and every test of it that time."""
    cmd = [sys.executable, "-c", _PROBE, "isa", "--target", target, "--providers", providers]
    cmd += ["--skip-native", "--jobs", "1", *args]
    result = subprocess.run(
        cmd, cwd=ROOT, env=env or _env(), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == f"{sorted(loads)}\n", result.stdout + result.stderr
    return result


def _collect(target: str, path: Path) -> dict:
    result = _cli("--json", str(path), target=target)
    assert result.returncode == 0, result.stderr
    return gate.load(path, target=target)


@pytest.fixture(scope="module")
def gfx950_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("isa") / "gfx950.json"
    _collect("gfx950", path)
    return path


@pytest.fixture
def gfx950_report(gfx950_file) -> dict:
    return gate.load(gfx950_file, target="gfx950")


@pytest.fixture(scope="module")
def sm90_report(tmp_path_factory) -> dict:
    if not _has_nvidia_tools():
        pytest.skip("this triton ships no cuobjdump/nvdisasm (a ROCm build): sm90 needs them")
    return _collect("sm90", tmp_path_factory.mktemp("isa") / "sm90.json")


def _with_native(report: dict) -> dict:
    """``report`` plus the stored clang output's kernels, as the native reducer's entries are."""
    out = copy.deepcopy(report)
    for entry in collect.asm_entries(HIP_ASM, "gfx950"):
        out["entries"][entry["key"]] = entry
    out["native_compiler"] = "ziglang 0.17.1"
    return out


# ---------------------------------------------------------------- parsers


def test_parse_amdgcn_real_clang_output():
    # Exact values of the stored file: a parser change that misreads a field fails here.
    kernels = metrics.parse_amdgcn(HIP_ASM)
    assert sorted(kernels) == ["starved", "sum4"]
    starved, sum4 = kernels["starved"], kernels["sum4"]
    assert (starved.vgpr, starved.agpr, starved.sgpr) == (32, 0, 10)
    assert (starved.vgpr_spills, starved.sgpr_spills, starved.scratch_bytes) == (18, 0, 76)
    assert (starved.lds_bytes, starved.occupancy) == (0, 8)
    assert starved.instructions == {
        "global_load_dword": 32,
        "global_store_dword": 32,
        "scratch_load_dword": 20,
        "scratch_store_dword": 18,
    }
    # Instructions are counted per kernel: sum4's 16-byte loads are not starved's.
    assert sum4.instructions == {"global_load_dwordx4": 2, "global_store_dwordx4": 1}
    assert (sum4.vgpr, sum4.sgpr, sum4.vgpr_spills, sum4.scratch_bytes, sum4.occupancy) == (
        14,
        14,
        0,
        0,
        8,
    )


def test_parse_amdgcn_rejects_incomplete_text():
    with pytest.raises(TypeError, match="text must be str"):
        metrics.parse_amdgcn(HIP_ASM.encode())
    # No metadata block: a format change must not read as zero spills.
    no_meta = HIP_ASM[: HIP_ASM.index("\t.amdgpu_metadata")]
    with pytest.raises(metrics.IsaParseError, match="amdgpu_metadata"):
        metrics.parse_amdgcn(no_meta)
    # One kernel without its "; Occupancy:" line.
    no_occ = HIP_ASM.replace("; Occupancy: 8\n", "", 1)
    with pytest.raises(metrics.IsaParseError, match="Occupancy"):
        metrics.parse_amdgcn(no_occ)
    no_spill_field = re.sub(r"\n    \.vgpr_spill_count:\s+18", "", HIP_ASM)
    with pytest.raises(metrics.IsaParseError, match="vgpr_spill_count"):
        metrics.parse_amdgcn(no_spill_field)


def test_parse_res_usage_and_sass():
    text = "\nResource usage:\n Common:\n  GLOBAL:0\n Function ds:\n  REG:244 STACK:8 SHARED:1024 LOCAL:16 CONSTANT[0]:584 TEXTURE:0\n"
    assert metrics.parse_res_usage(text) == {"ds": metrics.ResourceUsage(244, 8, 1024, 16)}
    with pytest.raises(metrics.IsaParseError):
        metrics.parse_res_usage("Resource usage:\n")
    sass = (
        "        /*0080*/                   LDG.E.128 R4, desc[UR4][R2.64] ;\n"
        "        /*0090*/              @!P0 LDG.E.128 R8, desc[UR4][R2.64+0x10] ;\n"
        "        /*00a0*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ ;\n"
    )
    assert metrics.count_sass(sass) == {"LDG.E.128": 2, "HGMMA.64x128x16.F32.BF16": 1}


@pytest.mark.parametrize(
    ("compiler", "lds", "waves", "expected"),
    [
        (5, 0, 4, 5),  # no dynamic LDS: the compiler's figure stands
        (5, 8192, 4, 5),  # 20 workgroups fit: registers still limit to 5
        (8, 65536, 4, 2),  # 2 workgroups x 4 waves over 4 SIMDs
        (8, 65536, 8, 4),  # same LDS, twice the waves per workgroup
        (8, 160 * 1024, 4, 1),  # exactly the CU's LDS: one workgroup
        (8, 160 * 1024 + 1, 4, 0),  # one byte more: does not fit at all
        (8, 1, 16, 8),  # tiny LDS: capped at the 8-wave hardware limit
    ],
)
def test_gfx950_occupancy(compiler, lds, waves, expected):
    assert metrics.amd_occupancy(get_target("gfx950"), compiler, lds, waves) == expected


@pytest.mark.parametrize(
    ("regs", "smem", "warps", "expected"),
    [
        (0, 0, 4, 64),  # only the 64-warp limit
        (32, 0, 4, 64),  # 32 regs x 64 warps = 64K exactly
        (33, 0, 4, 48),  # rounds to 40 regs: 12 warps per sub-partition
        (244, 9216, 4, 8),  # the sample scaled dot on sm90: rounds to 248 -> 2 warps/sub-partition
        (255, 0, 8, 8),  # 256 regs: 8 warps, one block of 8
        (16, 100 * 1024, 4, 8),  # shared memory: 2 blocks of 101 KiB in 228 KiB
        (16, 0, 1, 32),  # the 32-block limit with 1-warp blocks
    ],
)
def test_sm90_occupancy(regs, smem, warps, expected):
    assert metrics.nvidia_occupancy(get_target("sm90"), regs, smem, warps) == expected


def test_occupancy_rejects_bad_arguments():
    with pytest.raises(ValueError, match="waves_per_workgroup"):
        metrics.amd_occupancy(get_target("gfx950"), 8, 0, 0)
    with pytest.raises(ValueError, match="warps_per_block"):
        metrics.nvidia_occupancy(get_target("sm90"), 32, 0, 0)


# ---------------------------------------------------------------- compiled samples


def test_gfx950_samples_have_scaled_mfma_and_wide_loads(gfx950_report):
    entries = gfx950_report["entries"]
    assert sorted(entries) == [COPY, DOT]
    dot, copy_ = entries[DOT], entries[COPY]
    assert any(m.startswith("v_mfma_scale_f32_") for m in dot["instructions"])
    assert dot["lds_bytes"] > 0 and dot["vgpr"] > 0 and dot["spills"] == 0
    # global_load_dwordx4, or buffer_load_dwordx4 where triton uses buffer ops (3.9 does)
    assert metrics.family_counts("gfx950", copy_["instructions"])["16-byte global loads"] > 0
    assert gfx950_report["triton"] and gfx950_report["native_compiler"] is None
    gate.validate(gfx950_report)


def test_sm90_samples_have_mma_and_wide_loads(sm90_report):
    entries = sm90_report["entries"]
    dot, copy_ = entries[DOT], entries[COPY]
    assert metrics.family_counts("sm90", dot["instructions"])["tensor-core MMA (HGMMA/HMMA)"] > 0
    assert copy_["instructions"].get("LDG.E.128", 0) > 0
    assert dot["vgpr"] > 0 and dot["sgpr"] is None and dot["spills"] == 0
    gate.validate(sm90_report)


# ---------------------------------------------------------------- gate verdicts


def _verdicts(baseline: dict, current: dict, **kw) -> list[tuple[str, str, str]]:
    return [(r.key, r.metric, r.verdict) for r in gate.compare(baseline, current, **kw).rows]


def test_identical_reports_pass(gfx950_report):
    comparison = gate.compare(gfx950_report, copy.deepcopy(gfx950_report))
    assert comparison.rows == [] and comparison.warnings == []


def _shipped_isa() -> dict:
    """[tool.perfgate.isa] read straight from pyproject.toml: the gate's numbers, not its code."""
    from perfgate.checkout import tomllib  # tomli on Python 3.10

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["perfgate"]["isa"]


@pytest.mark.parametrize(
    ("baseline_vgpr", "current_vgpr", "regression"),
    [
        (40, 44, False),  # +4: the absolute allowance (5% of 40 is only 2)
        (40, 45, True),  # one more than that
        (200, 210, False),  # +10: 5% of 200, above the absolute 4
        (200, 211, True),
        (100, 140, True),
    ],
)
def test_vgpr_growth_is_gated_at_the_larger_of_abs_and_rel(
    gfx950_report, baseline_vgpr, current_vgpr, regression
):
    from perfgate.gate.settings import IsaTolerances

    baseline, current = copy.deepcopy(gfx950_report), copy.deepcopy(gfx950_report)
    baseline["entries"][DOT]["vgpr"] = baseline_vgpr
    current["entries"][DOT]["vgpr"] = current_vgpr
    tolerances = IsaTolerances(vgpr_tolerance_abs=4, vgpr_tolerance_rel=0.05)
    rows = gate.compare(baseline, current, tolerances=tolerances).rows
    assert [r.metric for r in rows] == ["vgpr"]
    assert (rows[0].verdict == gate.REGRESSION) is regression


def test_baseline_claiming_more_vgprs_is_an_improvement(gfx950_report):
    baseline = copy.deepcopy(gfx950_report)
    baseline["entries"][DOT]["vgpr"] += 10
    assert _verdicts(baseline, gfx950_report) == [(DOT, "vgpr", gate.IMPROVED)]


def test_vgpr_tolerance_comes_from_the_settings(gfx950_report):
    from perfgate.gate.settings import IsaTolerances, defaults

    shipped = _shipped_isa()
    assert defaults().isa.vgpr_tolerance_abs == shipped["vgpr_tolerance_abs"]
    # without tolerances, compare gates with the table's: growth of exactly the absolute
    # allowance on a small entry passes, one more fails
    small = shipped["vgpr_tolerance_abs"] * 2  # where the relative part is below the absolute
    assert shipped["vgpr_tolerance_rel"] * small < shipped["vgpr_tolerance_abs"]
    for grew, fails in (
        (shipped["vgpr_tolerance_abs"], False),
        (shipped["vgpr_tolerance_abs"] + 1, True),
    ):
        base, cur = copy.deepcopy(gfx950_report), copy.deepcopy(gfx950_report)
        base["entries"][DOT]["vgpr"], cur["entries"][DOT]["vgpr"] = small, small + grew
        assert bool(gate.compare(base, cur).regressions) is fails, grew
    baseline = copy.deepcopy(gfx950_report)
    baseline["entries"][DOT]["vgpr"] -= 1  # one VGPR of growth: within the shipped tolerance
    assert gate.compare(baseline, gfx950_report).regressions == []
    strict = IsaTolerances(vgpr_tolerance_abs=0, vgpr_tolerance_rel=0.0)
    comparison = gate.compare(baseline, gfx950_report, tolerances=strict)
    assert [(r.metric, r.verdict) for r in comparison.rows] == [("vgpr", gate.REGRESSION)]
    assert comparison.tolerances == strict
    with pytest.raises(
        TypeError, match=r"tolerances must be a perfgate\.gate\.settings\.IsaTolerances"
    ):
        gate.compare(baseline, gfx950_report, tolerances={"vgpr_tolerance_abs": 0})


def test_render_echoes_the_tolerances_it_used(gfx950_report):
    from rich.console import Console

    from perfgate.gate.settings import IsaTolerances

    tolerances = IsaTolerances(vgpr_tolerance_abs=6, vgpr_tolerance_rel=0.1)
    comparison = gate.compare(gfx950_report, gfx950_report, tolerances=tolerances)
    console = Console(width=300, record=True, file=io.StringIO())
    gate.render(comparison, target="gfx950", n_entries=2, console=console)
    assert "vgpr_tolerance_abs=6, vgpr_tolerance_rel=0.1" in console.export_text()


def test_cli_bad_tolerance_is_exit_2_before_compiling():
    result = _refused("--isa-vgpr-tolerance-rel", "2")
    assert (
        "--isa-vgpr-tolerance-rel: isa.vgpr_tolerance_rel must be a fraction in [0, 1), got 2.0"
        in result.stderr
    )


def test_cli_tolerance_override_changes_the_verdict(tmp_path, gfx950_report):
    gfx950_report["entries"][DOT]["vgpr"] -= 20  # fails at the shipped tolerance (CLI test above)
    path = tmp_path / "gfx950.json"
    path.write_text(json.dumps(gfx950_report))
    result = _cli("--check", str(path), "--isa-vgpr-tolerance-abs", "20")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "vgpr_tolerance_abs=20" in result.stdout and "PASS" in result.stdout


def test_baseline_claiming_no_spills_where_there_are_spills_fails(gfx950_report):
    current = _with_native(gfx950_report)  # the starved kernel really spills
    baseline = copy.deepcopy(current)
    baseline["entries"]["native.starved"]["spills"] = 0
    baseline["entries"]["native.starved"]["scratch_bytes"] = 0
    assert _verdicts(baseline, current) == [
        ("native.starved", "spills", gate.REGRESSION),
        ("native.starved", "scratch_bytes", gate.REGRESSION),
    ]
    # The reverse is an improvement, not a pass by accident.
    assert gate.compare(current, baseline).regressions == []


def test_occupancy_drop_fails(gfx950_report):
    baseline = copy.deepcopy(gfx950_report)
    baseline["entries"][DOT]["occupancy"] += 1
    assert _verdicts(baseline, gfx950_report) == [(DOT, "occupancy", gate.REGRESSION)]


def test_lost_instruction_family_fails(gfx950_report):
    # The baseline says the dot kernel had 16-byte global loads; the current one has none.
    baseline = copy.deepcopy(gfx950_report)
    baseline["entries"][DOT]["instructions"]["global_load_dwordx4"] = 3
    rows = gate.compare(baseline, gfx950_report).rows
    assert [(r.metric, r.verdict) for r in rows] == [
        ("16-byte global loads: lost", gate.REGRESSION),
        ("instructions", gate.CHANGED),
    ]
    # Scaled MFMA gone from the current build.
    current = copy.deepcopy(gfx950_report)
    current["entries"][DOT]["instructions"] = {
        m: n
        for m, n in current["entries"][DOT]["instructions"].items()
        if not m.startswith("v_mfma")
    }
    lost = {r.metric for r in gate.compare(gfx950_report, current).regressions}
    assert lost == {"scaled MFMA (v_mfma_scale_*): lost", "any MFMA (v_mfma*): lost"}


def test_count_change_without_loss_is_reported_not_failed(gfx950_report):
    baseline = copy.deepcopy(gfx950_report)
    baseline["entries"][DOT]["instructions"]["global_load_ubyte"] += 1
    assert _verdicts(baseline, gfx950_report) == [(DOT, "instructions", gate.CHANGED)]


def test_missing_new_and_skipped_entries(gfx950_report):
    with_native = _with_native(gfx950_report)
    # The native entries in the baseline, absent now: missing unless skipped on purpose.
    missing = gate.compare(with_native, gfx950_report)
    assert {(r.key, r.verdict) for r in missing.rows} == {
        ("native.starved", gate.REGRESSION),
        ("native.sum4", gate.REGRESSION),
    }
    skipped = gate.compare(with_native, gfx950_report, skipped_sources=("native",))
    assert skipped.regressions == [] and {r.verdict for r in skipped.rows} == {gate.SKIPPED}
    # New entries are listed and warned about, not failed.
    new = gate.compare(gfx950_report, with_native)
    assert new.regressions == [] and {r.verdict for r in new.rows} == {gate.NEW}
    assert any("not gated" in w for w in new.warnings)


def test_triton_version_mismatch_warns_and_still_compares(gfx950_report):
    baseline = copy.deepcopy(gfx950_report)
    baseline["triton"] = "3.5.0"
    comparison = gate.compare(baseline, gfx950_report)
    assert comparison.rows == [] and len(comparison.warnings) == 1
    assert "triton 3.5.0" in comparison.warnings[0]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.update(schema=2), "schema"),
        (lambda r: r.update(tool="pytest-benchmark"), "not an ISA report"),
        (lambda r: r.update(target="gfx942"), "target"),
        (lambda r: r.pop("triton"), "triton"),
        (lambda r: r.update(entries={}), "non-empty"),
        (lambda r: r["entries"][DOT].update(vgpr=-1), "vgpr"),
        (lambda r: r["entries"][DOT].update(spills=None), "spills"),
        (lambda r: r["entries"][DOT].update(key="other"), "key"),
        (lambda r: r["entries"][DOT]["instructions"].update(v_mfma="8"), "instructions"),
    ],
)
def test_validate_rejects_corrupt_reports(gfx950_report, edit, message):
    report = copy.deepcopy(gfx950_report)
    edit(report)
    with pytest.raises(gate.IsaReportError, match=message):
        gate.validate(report)


def test_load_rejects_unreadable_and_mismatched_files(tmp_path, gfx950_report):
    with pytest.raises(gate.IsaReportError, match="cannot read"):
        gate.load(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1, ')
    with pytest.raises(gate.IsaReportError, match="not valid JSON"):
        gate.load(bad)
    good = tmp_path / "gfx950.json"
    good.write_text(json.dumps(gfx950_report))
    with pytest.raises(gate.IsaReportError, match="this run is for 'sm90'"):
        gate.load(good, target="sm90")


# ---------------------------------------------------------------- CLI and providers


def test_cli_passes_on_its_own_report_and_fails_on_an_edited_one(tmp_path, gfx950_report):
    path = tmp_path / "gfx950.json"
    path.write_text(json.dumps(gfx950_report))
    result = _cli("--check", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    gfx950_report["entries"][DOT]["vgpr"] -= 20  # a baseline that claims fewer VGPRs
    path.write_text(json.dumps(gfx950_report))
    result = _cli("--check", str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "REGRESSION" in result.stdout and "FAIL" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),  # missing file
        ("not json", "not valid JSON"),
        # a valid sm90 report given to a gfx950 run
        (
            '{"tool": "perfgate-isa", "schema": 1, "target": "sm90", "triton": "3.9.0", "entries": {}}',
            "sm90",
        ),
    ],
)
def test_cli_unusable_baseline_exits_2(tmp_path, content, message):
    path = tmp_path / "baseline.json"
    if content is not None:
        path.write_text(content)
    result = _refused("--check", str(path))
    assert message in result.stderr


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe{\x00}\x00",  # a UTF-16 file (an editor's "Unicode" save)
        b'{"schema": 1, "target": "gfx950\xe9"}',  # latin-1 inside otherwise valid JSON
    ],
)
def test_cli_non_utf8_baseline_exits_2_with_one_line(tmp_path, content):
    path = tmp_path / "baseline.json"
    path.write_bytes(content)
    with pytest.raises(gate.IsaReportError, match=r"not UTF-8 text \(byte 0x"):
        gate.load(path)
    result = _refused("--check", str(path))  # unusable input (exit 2), not a regression
    assert "Traceback" not in result.stderr and "not UTF-8 text" in result.stderr


def test_missing_provider_is_an_error():
    # triton, for its version in the report; torch only with a provider that imports it
    result = _refused(providers="kernels.no_such_module", target="sm90", loads=("triton",))
    assert "kernels.no_such_module" in result.stderr
    with pytest.raises(collect.ProviderError, match="no compile_specs"):
        collect.load_specs("perfgate.isa.metrics", "gfx950")


def test_interpreter_mode_is_refused():
    result = _refused(target="sm90", env={**_env(), "TRITON_INTERPRET": "1"})
    assert "TRITON_INTERPRET" in result.stderr


def test_missing_ziglang_fails_unless_skipped(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        collect.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ziglang" else real_find_spec(name, *a),
    )
    with pytest.raises(collect.ProviderError, match="--skip-native"):
        collect.native_entries("gfx950")


def test_committed_baselines_are_valid():
    root = Path(__file__).parents[2] / "perf_baselines" / "isa"
    for target in collect.TARGETS:
        path = root / f"{target}.json"
        if not path.exists():
            pytest.fail(
                f"{path} is missing: run python -m perfgate isa --target {target} --json {path}"
            )
        report = gate.load(path, target=target)
        assert {e["source"] for e in report["entries"].values()} >= {"triton"}


# ---------------------------------------------------------------- the real kernel


@pytest.mark.slow
def test_real_gemm_gfx950_has_scaled_mfma_and_fp4_convert():
    code = (
        "import json; from perfgate.isa import collect; "
        "specs = collect.load_specs('kernels.gemm', 'gfx950'); "
        "print(json.dumps([collect.compile_entry('kernels.gemm', 'gfx950', i) "
        "for i in sorted({0, len(specs) - 1})]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # The first and last specs: the tuned table's head and the model's tail of the list.
    for entry in json.loads(result.stdout):
        mnemonics = entry["instructions"]
        assert any(m.startswith("v_mfma_scale_f32_") for m in mnemonics), (entry["key"], mnemonics)
        assert mnemonics.get("v_cvt_scalef32_pk_fp4_bf16", 0) > 0, (entry["key"], mnemonics)


def test_render_prints_full_keys_and_verdict(gfx950_report):
    # Keys hold "[...]": rendered as rich markup they would lose their config (a real bug once).
    from rich.console import Console

    baseline = copy.deepcopy(gfx950_report)
    baseline["entries"][DOT]["occupancy"] += 1
    comparison = gate.compare(baseline, gfx950_report)
    console = Console(width=300, record=True, file=io.StringIO())
    gate.render(comparison, target="gfx950", n_entries=2, console=console)
    text = console.export_text()
    assert DOT in text and "REGRESSION" in text and "FAIL" in text


def test_a_spec_that_does_not_compile_is_named():
    # In this process TRITON_INTERPRET=1, so triton.compile fails on the interpreted function:
    # a real compile failure, which the gate must report with the spec's label (exit 1).
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip(
            "uses the interpreter's uncompilable functions; conftest sets it only without a GPU"
        )
    with pytest.raises(collect.CompileError, match=re.escape(DOT)):
        collect.compile_entry(SAMPLES, "gfx950", 0)


# ---------------------------------------------------------------- static cost (issue 14)

# A body in the shape the AMDGPU backend prints: setup, one loop (header label ... backward
# branch), epilogue. The loop holds 3 instructions, 2 of them vector, 1 an MFMA.
_LOOP_BODY = """
\ts_load_dwordx2 s[0:1], s[4:5], 0x0
\tv_mov_b32_e32 v0, 0
\tv_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:7], v[8:11], v[0:3], v12, v13
.LBB0_1:                                ; =>This Inner Loop Header: Depth=1
\t.loc\t1 87 5 is_stmt 1
\tv_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:7], v[8:11], v[0:3], v12, v13
\tv_add_u32_e32 v1, 1, v1
\ts_cbranch_scc1 .LBB0_1
; %bb.2:
\ts_branch .LBB0_3
.LBB0_3:
\tv_cvt_pk_bf16_f32 v2, v0, v1
\ts_endpgm
"""


def test_static_cost_splits_loop_from_once():
    cost = metrics.static_cost(_LOOP_BODY)
    # the forward branch to .LBB0_3 is no loop; .loc is a directive, not an instruction
    assert cost == metrics.StaticCost(
        once_all=6, once_valu=3, once_mfma=1, loop_all=3, loop_valu=2, loop_mfma=1, loops=1
    )


@pytest.mark.parametrize(
    ("steps", "trips", "valu", "mfma", "instrs"),
    [
        # one MFMA group sits outside the loop: the pipeliner peeled one step, so the loop body
        # runs steps - 1 times
        (1, 0, 3, 1, 6),
        (2, 1, 5, 2, 9),
        (8, 7, 17, 8, 27),
    ],
)
def test_per_wave_counts_the_loop_body_per_remaining_step(steps, trips, valu, mfma, instrs):
    wave = metrics.per_wave(metrics.static_cost(_LOOP_BODY), steps)
    assert wave == {
        "loop_trips": trips,
        "valu_per_wave": valu,
        "mfma_per_wave": mfma,
        "instrs_per_wave": instrs,
        "instrs_per_mfma": round(instrs / mfma, 1),
    }
    with pytest.raises(ValueError, match="steps must be >= 1"):
        metrics.per_wave(metrics.static_cost(_LOOP_BODY), 0)


def test_parse_amdgcn_gives_every_kernel_a_static_cost():
    kernels = metrics.parse_amdgcn(HIP_ASM)
    for k in kernels.values():
        assert k.cost is not None and k.cost.once_all + k.cost.loop_all > 0
        assert k.cost.once_valu + k.cost.loop_valu <= k.cost.once_all + k.cost.loop_all


def test_cost_fields_need_a_workload():
    target = get_target("gfx950")
    cost = metrics.static_cost(_LOOP_BODY)
    assert collect.cost_fields(target, cost, None) == dict.fromkeys(collect.COST_FIELDS)
    fields = collect.cost_fields(target, cost, {"k_steps": 2, "workgroups": 192})
    assert fields["valu_per_wave"] == 5 and fields["mfma_per_wave"] == 2
    assert fields["workgroups"] == 192 and fields["grid_fill"] == 0.75  # of 256 CUs
    # sm90: the fill only (SASS has no per-wave count here)
    fields = collect.cost_fields(get_target("sm90"), None, {"k_steps": 2, "workgroups": 66})
    assert fields["grid_fill"] == 0.5 and fields["valu_per_wave"] is None


_PLAIN_PROVIDER = """
from kernels import gemm
from kernels.configs import select_config
from kernels.device import MI355X

SHAPE = (32, 4096, 512)  # a ranked shape: the tuned gfx950 config, 157 vector instructions/wave


def compile_specs(target):
    return [gemm.compile_spec(select_config(*SHAPE, MI355X), target, SHAPE)]


static_workload = gemm.static_workload
"""

# The same GEMM spec with one more per-element operation in the quantizer's block maximum: the
# per-element NaN select issue 14 removed (a compare and a select on every element of A). It
# adds 41 vector instructions per wave at 32x4096x512 (157 -> 198), far past the 3% tolerance.
# (Cheaper injections can vanish: an XOR folds into gfx950's 3-input v_bitop3 with the AND, and
# an add commutes with the max, so LLVM moves it after the reduction.)
_INJECTED_PROVIDER = """
import triton
import triton.language as tl

import kernels._quant as quant
from plain_provider import compile_specs, static_workload  # noqa: F401


@triton.jit
def block_abs_max(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    bits = x.to(tl.uint16, bitcast=True) & 0x7FFF
    bits = tl.where(bits > 0x7F80, 0, bits)
    return tl.max(tl.reshape(bits, (BLOCK_M, BLOCK_K // 32, 32)), axis=2).to(tl.int32)


quant.block_abs_max = block_abs_max  # quantize_tile resolves it when the GEMM compiles
"""


@pytest.mark.slow
def test_gate_catches_an_injected_per_element_operation(tmp_path):
    (tmp_path / "plain_provider.py").write_text(_PLAIN_PROVIDER)
    (tmp_path / "injected_provider.py").write_text(_INJECTED_PROVIDER)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")

    def isa(provider: str, *args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "perfgate", "isa", "--target", "gfx950", "--skip-native"]
        cmd += ["--jobs", "1", "--providers", provider, *args]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    base = tmp_path / "base.json"
    made = isa("plain_provider", "--json", str(base))
    assert made.returncode == 0, made.stderr
    (entry,) = json.loads(base.read_text())["entries"].values()
    assert entry["valu_per_wave"] > 0 and entry["workgroups"] == 256
    assert isa("plain_provider", "--check", str(base)).returncode == 0  # deterministic
    injected = isa("injected_provider", "--check", str(base))
    assert injected.returncode == 1, injected.stdout + injected.stderr
    assert re.search(r"valu_per_wave[^\n]*REGRESSION", injected.stdout), injected.stdout
    assert "1 regression(s)" in injected.stdout  # the VALU rule alone: no spill, VGPR or family


@pytest.mark.parametrize(
    ("baseline_valu", "current_valu", "verdict"),
    [
        (200, 206, "changed (within +6)"),  # 3% of 200: the edge still passes
        (200, 207, gate.REGRESSION),  # one more instruction per wave than that fails
        (200, 150, gate.IMPROVED),
        (None, 150, None),  # a baseline without the figure (older report): not compared
        (200, None, None),  # nor a current entry without it (an sm90 or reducer entry)
    ],
)
def test_valu_per_wave_is_gated_with_the_settings_tolerance(
    gfx950_report, baseline_valu, current_valu, verdict
):
    assert _shipped_isa()["valu_tolerance_rel"] == 0.03  # the table the rows above assume
    baseline, current = copy.deepcopy(gfx950_report), copy.deepcopy(gfx950_report)
    baseline["entries"][DOT]["valu_per_wave"] = baseline_valu
    current["entries"][DOT]["valu_per_wave"] = current_valu
    gate.validate(baseline)  # the cost fields are ints or null
    rows = [r for r in gate.compare(baseline, current).rows if r.metric == "valu_per_wave"]
    assert [r.verdict for r in rows] == ([] if verdict is None else [verdict])


def test_cost_fields_must_be_ints_or_null(gfx950_report):
    bad = copy.deepcopy(gfx950_report)
    bad["entries"][DOT]["valu_per_wave"] = -3
    with pytest.raises(gate.IsaReportError, match="'valu_per_wave' must be null or an int >= 0"):
        gate.validate(bad)
