"""The native split-K reducer (kernels/reducer/): compile checks on CPU, build key and lock
logic, bit-exactness of its host build (the same kernels and launcher run on the CPU, see
kernels/reducer/host.py) and (marked ``gpu``) bit-exactness of the prebuilt library on the GPU.

On the GPU the native tests need ``python -m kernels.reducer.build`` (``nox -s build``) first;
without a build they skip, unless ``MXFP4_REQUIRE_NATIVE_REDUCER=1``, which makes them fail.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import reducer_strategies
import torch
from hypothesis import HealthCheck, given, settings

from kernels import splitk
from kernels.reducer import build, host, native
from kernels.reducer.cache import SOURCE_FILES, read_manifest, sources_digest
from kernels.reducer.cases import bf16_mismatch, boundary_partials

ROOT = Path(__file__).resolve().parents[1]
# The Triton twin warns about the Inf/NaN the boundary cases are made of; that is their point.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
KERNELS = {  # every kernel the source defines, by the name both compilers mangle it to
    "reduce_scalar",
    *(f"reduce_vec4ILi{s}E" for s in (0, 2, 3, 4, 7, 8, 16)),
}


def _nvcc() -> Path | None:
    try:
        return build.find_toolchain("nvidia").compiler
    except build.BuildError:
        return None


def _hipcc() -> Path | None:
    try:
        return build.find_toolchain("amd").compiler
    except build.BuildError:
        return None


NVCC = _nvcc()
HIPCC = _hipcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc (CUDA_HOME, /usr/local/cuda, PATH)")
needs_zig = pytest.mark.skipif(
    shutil.which("zig") is None and not __import__("importlib").util.find_spec("ziglang"),
    reason="no ziglang package (pip install 'ziglang>=0.17,<0.18', the `isa` extra)",
)


# ---- compile checks (CPU) ------------------------------------------------------------------------


@needs_nvcc
def test_nvcc_sm90_ptx_has_16_byte_loads_and_8_byte_stores():
    ptx = build.device_asm("sm90")
    for name in KERNELS:
        assert re.search(rf"\.entry\s+\w*{name}", ptx), f"kernel {name} missing from the PTX"
    assert "ld.global.nc.v4.f32" in ptx  # float4 loads of the partials
    assert "st.global.v2.u32" in ptx  # 4 bf16 stored as one 8-byte store


@needs_zig
def test_clang_gfx950_asm_has_16_byte_loads_and_8_byte_stores():
    asm = build.device_asm("gfx950")
    assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx950"' in asm
    for name in KERNELS:
        assert re.search(rf"^\w*{name}\w*:", asm, re.M), (
            f"kernel {name} missing from the gfx950 asm"
        )
    assert "global_load_dwordx4" in asm
    assert "global_store_dwordx2" in asm
    assert not re.search(r"scratch_|buffer_store_dword .* offen", asm), "register spills"


def test_device_asm_rejects_unknown_target():
    with pytest.raises(ValueError, match="target must be one of"):
        build.device_asm("gfx942")


def test_device_asm_names_missing_ziglang(monkeypatch):
    monkeypatch.setattr(build.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(build.BuildError, match="pip install 'ziglang"):
        build.device_asm("gfx950")


# ---- toolchain and key (CPU) ---------------------------------------------------------------------


def test_missing_compiler_names_what_and_where(monkeypatch, tmp_path):
    for var in ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(build, "DEFAULT_PREFIX", {"nvidia": tmp_path, "amd": tmp_path})
    with pytest.raises(
        build.BuildError, match=r"nvcc not found .*\$CUDA_HOME/bin \(unset\).*set CUDA_HOME"
    ):
        build.find_toolchain("nvidia")
    with pytest.raises(
        build.BuildError, match=r"hipcc not found .*\$ROCM_PATH/bin \(unset\).*ROCm"
    ):
        build.find_toolchain("amd")


@pytest.mark.parametrize(
    "spec, archs", [("sm90", ("sm90",)), ("gfx950;gfx942", ("gfx950", "gfx942"))]
)
def test_parse_archs(spec, archs):
    assert build.parse_archs(spec) == archs


@pytest.mark.parametrize(
    "spec, match", [("sm90;gfx950", "mix NVIDIA and AMD"), ("volta", "unknown architecture")]
)
def test_parse_archs_rejects(spec, match):
    with pytest.raises(build.BuildError, match=match):
        build.parse_archs(spec)


def test_rocm_arch_defaults_to_gfx950_unless_set(monkeypatch):
    monkeypatch.delenv("PYTORCH_ROCM_ARCH", raising=False)
    assert build.default_archs("amd") == ("gfx950",)
    monkeypatch.setenv("PYTORCH_ROCM_ARCH", "gfx942")
    assert build.default_archs("amd") == ("gfx942",)


def test_hipcc_command_targets_each_arch():
    tc = build.Toolchain("amd", Path("/opt/rocm/bin/hipcc"), "HIP version: 7.0")
    cmd = build.compile_command(tc, ("gfx950", "gfx942"), Path("/x/lib.so"))
    assert "--offload-arch=gfx950" in cmd and "--offload-arch=gfx942" in cmd
    assert cmd[cmd.index("-x") + 1] == "hip"  # a .cu file compiled as HIP


def test_build_key_changes_exactly_with_its_inputs():
    tc = build.Toolchain("nvidia", Path("/usr/local/cuda/bin/nvcc"), "release 12.8")
    base = build.build_key("digest", tc, ("sm90",), "2.11.0")
    assert build.build_key("digest", tc, ("sm90",), "2.11.0") == base  # deterministic
    changed = [
        build.build_key("other-sources", tc, ("sm90",), "2.11.0"),
        build.build_key(
            "digest", build.Toolchain("nvidia", tc.compiler, "release 13.0"), ("sm90",), "2.11.0"
        ),
        build.build_key(
            "digest",
            build.Toolchain("nvidia", Path("/opt/cuda/bin/nvcc"), tc.version),
            ("sm90",),
            "2.11.0",
        ),
        build.build_key("digest", tc, ("sm100",), "2.11.0"),
        build.build_key("digest", tc, ("sm90",), "2.12.0"),
    ]
    assert base not in changed and len(set(changed)) == len(changed)


def test_sources_digest_follows_every_source(tmp_path):
    # Every file next to the source that a compiler may include is in the digest.
    assert set(SOURCE_FILES) == {
        p.name for p in build.SOURCE_DIR.iterdir() if p.suffix in (".cu", ".h", ".hip")
    }
    for name in SOURCE_FILES:
        shutil.copy(build.SOURCE_DIR / name, tmp_path / name)
    assert sources_digest(tmp_path) == sources_digest()
    for name in SOURCE_FILES:
        original = (tmp_path / name).read_bytes()
        (tmp_path / name).write_bytes(original + b"\n")
        assert sources_digest(tmp_path) != sources_digest(), name
        (tmp_path / name).write_bytes(original)


# ---- lock (CPU) ------------------------------------------------------------------------------------

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kernels.reducer.build import build_lock
    with build_lock(Path(sys.argv[1])):
        print("locked", flush=True)
        time.sleep(600)
    """
)


def test_lock_of_a_killed_build_never_hangs_the_next(tmp_path):
    lock = tmp_path / "build.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(lock)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        # While the holder lives, a second build waits and then names it.
        with (
            pytest.raises(build.BuildError, match=rf"another build \(pid {holder.pid}\)"),
            build.build_lock(lock, timeout_s=0.3),
        ):
            pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # a build killed mid-way: no cleanup code runs
        holder.wait()
    assert lock.exists()  # the file stays behind ...
    start = time.monotonic()
    with build.build_lock(lock, timeout_s=5):  # ... but it is not a lock any more
        assert lock.read_text().strip() == str(os.getpid())
    assert time.monotonic() - start < 2


# ---- build and loader (CPU, with nvcc) -------------------------------------------------------------


@needs_nvcc
def test_build_then_up_to_date_then_loadable_manifest(tmp_path, monkeypatch):
    leftover = tmp_path / ".tmp-killed"  # what a build killed mid-compile leaves
    leftover.mkdir()
    logs: list[str] = []
    library = build.build(("sm90",), directory=tmp_path, log=logs.append)
    assert library.is_file() and not leftover.exists()
    assert any(line.startswith("building native reducer") for line in logs)
    manifest = read_manifest(tmp_path, "sm90")
    assert manifest["library"] == str(library) and manifest["sources_digest"] == sources_digest()
    assert native.locate("sm90", tmp_path) == library

    # The C launcher's own argument checks answer before any GPU call, so they run here too.
    _assert_launcher_checks(native.load("sm90", tmp_path))

    # Same inputs: nothing is compiled again.
    mtime = library.stat().st_mtime_ns
    monkeypatch.setattr(build.subprocess, "run", _no_compile(build.subprocess.run))
    logs.clear()
    assert build.build(("sm90",), directory=tmp_path, log=logs.append) == library
    assert logs == [f"native reducer up to date for sm90: {library}"]
    assert library.stat().st_mtime_ns == mtime


def _no_compile(run):
    def guarded(cmd, *args, **kwargs):
        assert "--version" in cmd, f"unexpected compile: {cmd}"
        return run(cmd, *args, **kwargs)

    return guarded


@pytest.mark.skipif(HIPCC is None, reason="no hipcc (ROCM_PATH, HIP_PATH, /opt/rocm, PATH)")
def test_hipcc_builds_the_shared_library(tmp_path):
    # gfx950 where this hipcc knows it (ROCm >= 6.4, the container); an older hipcc (e.g. the
    # distribution's HIP 5.x) still checks the HIP side of compat.h with gfx90a.
    try:
        library = build.build(("gfx950",), directory=tmp_path, log=lambda _: None)
    except build.BuildError as exc:
        if "gfx950" not in str(exc):
            raise
        library = build.build(("gfx90a",), directory=tmp_path, log=lambda _: None)
    assert library.is_file()


def test_loader_refuses_missing_wrong_arch_and_stale_builds(tmp_path, monkeypatch):
    with pytest.raises(native.NativeUnavailable, match="no native reducer built for sm90"):
        native.locate("sm90", tmp_path)
    lib = tmp_path / "k" / "libmxfp4_splitk.so"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    manifest = {
        "schema": 1,
        "key": "k",
        "library": str(lib),
        "archs": ["gfx950"],
        "sources_digest": "old",
    }
    build.write_json_atomic(tmp_path / "manifest-sm90.json", manifest)
    with pytest.raises(native.NativeUnavailable, match=r"for \['gfx950'\], not sm90"):
        native.locate("sm90", tmp_path)
    build.write_json_atomic(tmp_path / "manifest-sm90.json", {**manifest, "archs": ["sm90"]})
    with pytest.raises(native.NativeUnavailable, match="stale"):
        native.locate("sm90", tmp_path)
    (tmp_path / "manifest-sm90.json").write_text("{not json")
    with pytest.raises(native.NativeUnavailable, match="unreadable manifest"):
        native.locate("sm90", tmp_path)


def test_build_cli_reports_errors_with_exit_1(capsys):
    assert build.main(["--arch", "volta"]) == 1
    assert "error: unknown architecture 'volta'" in capsys.readouterr().err


# ---- the same source built for the host (CPU) ------------------------------------------------------
# These run the native reducer's kernels and C launcher one emulated thread at a time, so a wrong
# rounding, a wrong split order or a broken specialisation fails here without a GPU.


@pytest.fixture(scope="module")
def host_reducer(tmp_path_factory):
    # No skip: the test venv always has a compiler (ziglang, the `isa` extra), and a silent skip
    # would hide exactly the bugs this section exists for.
    return host.load_host(tmp_path_factory.mktemp("host-reducer"))


def _host_reduce(reducer, partials: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    s, m, n = partials.shape
    ldo = out.stride(0) if m > 1 else n
    reducer(partials.data_ptr(), out.data_ptr(), s, m, n, ldo, 0)
    return out


def _twin_bits(partials: torch.Tensor, device: torch.device) -> torch.Tensor:
    # The twin runs where Triton does: compiled on a GPU, interpreted on a CPU.
    partials = partials.to(device)
    twin = torch.empty(partials.shape[1:], dtype=torch.bfloat16, device=device)
    splitk.reduce_partials(partials, twin, backend="triton")
    return twin.cpu().view(torch.int16)


# Every specialised S, the generic loop on both sides of them (1, 5, 6, 9..13, 15) and past the
# largest (17, 33); S == 1 is "no addition at all", where -0 and NaN bits must pass unchanged.
HOST_SPLITS = sorted({*range(1, 18), 33, *native.SPECIALISED_SPLITS})


@pytest.mark.parametrize("s", HOST_SPLITS)
@pytest.mark.parametrize(
    "m, n",
    [
        (5, 9),  # odd M*N: scalar path; every boundary case fits
        (7, 64),  # N % 4 == 0: 16-byte path, specialised or generic kernel by S
        (2, 6),  # N % 4 != 0 but M*N % 4 == 0, contiguous out: 16-byte path over the flat array
        (3, 700),  # more than one 256-thread block, a ragged last block
    ],
)
def test_host_build_bitexact(host_reducer, s, m, n):
    partials = boundary_partials(s, m, n, seed=s * 7 + m)
    out = _host_reduce(host_reducer, partials, torch.empty(m, n, dtype=torch.bfloat16))
    assert bf16_mismatch(out, splitk.reduce_partials_reference(partials), nan_bits=True) is None


@pytest.mark.parametrize("s", [1, 2, 3, 5, 14, 16, 17])
@pytest.mark.parametrize("m, n", [(5, 9), (7, 64)])
def test_host_build_equals_triton_twin_in_every_bit(host_reducer, device, s, m, n):
    # NaN included: both write the canonical 0x7FC0, whatever the hardware's add made of the NaN.
    partials = boundary_partials(s, m, n, seed=s)
    out = _host_reduce(host_reducer, partials, torch.empty(m, n, dtype=torch.bfloat16))
    assert torch.equal(out.view(torch.int16), _twin_bits(partials, device))


@pytest.mark.parametrize("s", [1, 2, 5, 7, 16])
@pytest.mark.parametrize(
    "pad, offset",
    [
        (4, 0),  # row stride N + 4, still whole 8-byte vectors: 16-byte path with row mapping
        (1, 0),  # row stride N + 1: scalar path with row mapping
        (0, 1),  # partials 4 bytes past 16-byte alignment: scalar path
    ],
)
def test_host_build_strided_and_misaligned(host_reducer, s, pad, offset):
    m, n = 9, 132
    partials = torch.empty(s * m * n + offset)[offset:].view(s, m, n)
    partials.copy_(boundary_partials(s, m, n, seed=pad + offset))
    out_buf = torch.full((m, n + pad), 7.0, dtype=torch.bfloat16)
    out = _host_reduce(host_reducer, partials, out_buf[:, :n])
    assert bf16_mismatch(out, splitk.reduce_partials_reference(partials), nan_bits=True) is None
    assert torch.equal(
        out_buf[:, n:].view(torch.int16),
        torch.full((m, pad), 7.0, dtype=torch.bfloat16).view(torch.int16),
    )


@settings(suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@given(partials=reducer_strategies.partials(max_s=max(HOST_SPLITS), max_m=3, max_n=48))
def test_host_build_bitexact_on_drawn_partials(host_reducer, partials):
    # The strategy's classes (NaN and inf partials, ties, cancellation, subnormals, S == 1 and
    # S up to 33, odd widths and the 16-byte path) are checked in test_splitk.py.
    out = _host_reduce(
        host_reducer, partials, torch.empty(partials.shape[1:], dtype=torch.bfloat16)
    )
    assert bf16_mismatch(out, splitk.reduce_partials_reference(partials), nan_bits=True) is None


def _assert_launcher_checks(reducer) -> None:
    """The C launcher's argument checks (reducer(partials, out, S, M, N, ldo, stream))."""
    with pytest.raises(RuntimeError, match=r"code -1\): invalid sizes"):
        reducer(0, 0, 0, 1, 1, 1, 0)  # S = 0
    with pytest.raises(RuntimeError, match=r"code -1\): invalid sizes"):
        reducer(0, 0, 2, 3, 4, 3, 0)  # row stride < N
    with pytest.raises(RuntimeError, match=r"code -1\): invalid sizes"):
        reducer(0, 0, 2, 1 << 16, 1 << 15, 1 << 15, 0)  # M * N = 2**31
    with pytest.raises(RuntimeError, match=r"code -2\): null pointer"):
        reducer(0, 0, 2, 1, 1, 1, 0)
    reducer(0, 0, 2, 0, 5, 5, 0)  # M = 0: nothing to do, nothing launched


@pytest.mark.parametrize("s", [1, 2, 7, 14, 5])
@pytest.mark.parametrize("pad", [0, 1])  # contiguous (16-byte path) and row stride N + 1 (scalar)
def test_host_build_planned_launch_equals_the_plain_one(host_reducer, s, pad):
    # The GEMM launcher's hot path is plan(...)(out_ptr): the same launcher with its arguments
    # fixed in a C struct. A field out of order in the ctypes mirror of the struct would swap
    # M, N or the stride here and fail bit for bit.
    m, n = 9, 132
    partials = boundary_partials(s, m, n, seed=40 + s + pad)
    plain = _host_reduce(host_reducer, partials, torch.empty(m, n, dtype=torch.bfloat16))
    out_buf = torch.full((m, n + pad), 7.0, dtype=torch.bfloat16)
    out = out_buf[:, :n]
    launch = host_reducer.plan(partials.data_ptr(), s, m, n, n + pad, 0)
    assert launch(out.data_ptr()) == 0
    assert torch.equal(out.view(torch.int16), plain.view(torch.int16))
    assert torch.equal(
        out_buf[:, n:].view(torch.int16),
        torch.full((m, pad), 7.0, dtype=torch.bfloat16).view(torch.int16),
    )


def test_host_build_planned_launch_reports_the_launchers_errors(host_reducer):
    # Codes come back unraised (the hot path tests them inline); check() names them.
    assert host_reducer.plan(0, 0, 1, 1, 1, 0)(0) == -1  # S = 0
    with pytest.raises(RuntimeError, match=r"code -2\): null pointer"):
        host_reducer.check(host_reducer.plan(0, 2, 1, 1, 1, 0)(0))
    host_reducer.check(host_reducer.plan(0, 2, 0, 5, 5, 0)(0))  # M = 0: nothing to do


def test_host_build_argument_checks(host_reducer):
    # The C launcher's own checks, in the same library code the GPU build runs.
    _assert_launcher_checks(host_reducer)


def test_host_build_compiles_the_one_source():
    cmd = host.host_command(Path("/x/lib.so"), ["c++"])
    assert cmd[cmd.index("-x") + 1 :] == ["c++", str(build.SOURCE), "-o", "/x/lib.so"]
    assert "-DMXFP4_HOST_GRID" in cmd and "-ffp-contract=off" in cmd


def test_host_compiler_missing_names_what_to_install(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(host.shutil, "which", lambda name: None)
    monkeypatch.setattr(host.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(host.HostBuildError, match=r"set CXX.*ziglang"):
        host.host_compiler()


def test_host_build_failure_shows_the_compiler_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", f"{sys.executable} -c 'import sys; sys.exit(\"boom\")'")
    with pytest.raises(host.HostBuildError, match=r"host build failed.*boom"):
        host.build_host(tmp_path)


# ---- the native reducer on the GPU ---------------------------------------------------------------


@pytest.fixture
def native_reducer():
    """The native reducer of this GPU: skip without a build, fail under the env requirement."""
    splitk.reset_backend_choice()
    if splitk.reducer_backend("cuda") != "native":  # raises under MXFP4_REQUIRE_NATIVE_REDUCER
        pytest.skip(
            f"native reducer not built: {splitk.reducer_backend_reason('cuda')}; run `nox -s build`"
        )
    yield
    splitk.reset_backend_choice()


def _check_native(partials: torch.Tensor, out: torch.Tensor) -> None:
    """Native result == torch reference (NaN by position) and == the Triton twin bit for bit."""
    splitk.reduce_partials(partials, out)
    assert bf16_mismatch(out, splitk.reduce_partials_reference(partials), nan_bits=True) is None
    twin = torch.empty_like(out)
    s, m, n = partials.shape
    splitk._reduce_triton(partials, twin, s, m, n)
    torch.cuda.synchronize()
    assert torch.equal(out.view(torch.int16), twin.view(torch.int16)), (
        "native and Triton differ in bits"
    )


@pytest.mark.gpu
@pytest.mark.parametrize("s", range(1, 17))
@pytest.mark.parametrize(
    "m, n",
    [
        (5, 9),  # odd M*N: scalar path; every boundary case fits
        (7, 64),  # N % 4 == 0: 16-byte path, one partial block
        (2, 6),  # N % 4 != 0 but M*N % 4 == 0, contiguous out: 16-byte path over the flat array
        (33, 1000),  # many blocks, a ragged last block
    ],
)
def test_native_bitexact(native_reducer, s, m, n):
    partials = boundary_partials(s, m, n, seed=s * 7 + m).cuda()
    _check_native(partials, torch.empty(m, n, dtype=torch.bfloat16, device="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("s", [1, 2, 5, 7, 16])
@pytest.mark.parametrize(
    "pad, offset",
    [
        (4, 0),  # row stride N + 4, still whole 8-byte vectors: 16-byte path with row mapping
        (1, 0),  # row stride N + 1: scalar path
        (0, 1),  # partials 4 bytes past 16-byte alignment: scalar path
    ],
)
def test_native_strided_and_misaligned(native_reducer, s, pad, offset):
    m, n = 9, 132
    buf = torch.empty(s * m * n + offset, device="cuda")
    partials = buf[offset:].view(s, m, n)
    partials.copy_(boundary_partials(s, m, n, seed=pad + offset))
    out_buf = torch.full((m, n + pad), 7.0, dtype=torch.bfloat16, device="cuda")
    out = out_buf[:, :n]
    _check_native(partials, out)
    assert torch.equal(
        out_buf[:, n:].cpu().view(torch.int16),
        torch.full((m, pad), 7.0, dtype=torch.bfloat16).view(torch.int16),
    )


@pytest.mark.gpu
@pytest.mark.parametrize("s", [2, 4, 8])
@pytest.mark.parametrize(
    "m, n", [(4, 2880), (16, 2112), (32, 4096), (32, 2880), (64, 7168), (256, 3072)]
)
def test_native_leaderboard_shapes(native_reducer, s, m, n):
    _check_native(
        boundary_partials(s, m, n, seed=m + n).cuda(),
        torch.empty(m, n, dtype=torch.bfloat16, device="cuda"),
    )


@pytest.mark.gpu
def test_native_runs_on_the_current_stream(native_reducer):
    # On a side stream the partials are only written after a long sleep: a reducer launched on
    # any other stream would read the zeros that are there before and fail the comparison.
    source = boundary_partials(4, 64, 256).cuda()
    partials = torch.zeros_like(source)
    out = torch.zeros(64, 256, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # tens of milliseconds of GPU time
        partials.copy_(source)
        splitk.reduce_partials(partials, out)
    stream.synchronize()
    assert bf16_mismatch(out, splitk.reduce_partials_reference(source), nan_bits=True) is None
