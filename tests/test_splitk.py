"""kernels.splitk: the Triton reducer (interpreter on CPU, compiled on GPU) against the torch
reference, input validation, and the backend choice (logged once, enforced by env)."""

from __future__ import annotations

import collections
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import reducer_strategies
import torch
from hypothesis import HealthCheck, given, settings

from kernels import splitk
from kernels.reducer.cases import bf16_mismatch, boundary_partials, f32

ROOT = Path(__file__).resolve().parents[1]

# numpy warns about the Inf/NaN the boundary cases are made of; that is the point of them.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _bits(t: torch.Tensor) -> list[int]:
    return [b & 0xFFFF for b in t.contiguous().view(torch.int16).flatten().tolist()]


def _run_triton(partials: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return splitk.reduce_partials(partials, out, backend="triton")


@pytest.fixture(autouse=True)
def _fresh_choice(monkeypatch):
    monkeypatch.delenv(splitk.REQUIRE_NATIVE_ENV, raising=False)
    splitk.reset_backend_choice()
    yield
    splitk.reset_backend_choice()


# ---- the oracle itself ---------------------------------------------------------------------------


def test_reference_rounds_to_nearest_even():
    # Each value pins one rounding fact, so a reference that truncates or rounds half-up fails.
    values = [
        f32(0x3F808000),  # 1 + 2**-8: tie, lower neighbour 0x3F80 is even -> down
        f32(0x3F818000),  # 1 + 3 * 2**-8: tie, lower neighbour odd -> up to 0x3F82
        f32(0x3F808001),  # just above a tie -> up
        f32(0x7F7F7FFF),  # below the overflow midpoint -> max finite 0x7F7F
        f32(0x7F7F8000),  # the overflow midpoint, odd neighbour -> Inf
        -0.0,  # sign of zero kept
    ]
    ref = splitk.reduce_partials_reference(torch.tensor(values).reshape(1, 1, -1))
    assert _bits(ref) == [0x3F80, 0x3F82, 0x3F81, 0x7F7F, 0x7F80, 0x8000]


def test_reference_sums_in_split_order():
    # (1e8 + 1) - 1e8 is 0 in fp32; any other order gives 1.
    ref = splitk.reduce_partials_reference(torch.tensor([1e8, 1.0, -1e8]).reshape(3, 1, 1))
    assert _bits(ref) == [0x0000]


# ---- Triton reducer vs reference ---------------------------------------------------------------


@pytest.mark.parametrize("s", range(1, 17))
def test_triton_bitexact_boundary_cases(device, s):
    # 5 x 9 = 45 outputs: odd M*N, and room for every special case of kernels.reducer.cases.
    partials = boundary_partials(s, 5, 9, seed=s).to(device)
    out = torch.empty(5, 9, dtype=torch.bfloat16, device=device)
    assert (
        bf16_mismatch(
            _run_triton(partials, out), splitk.reduce_partials_reference(partials), nan_bits=True
        )
        is None
    )


@pytest.mark.parametrize(
    "m, n",
    [
        (1, 1),  # a single element
        (1, 3),  # one row, odd width
        (3, 1),  # one column
        (9, 515),  # more than one program along both M (BLOCK_M=4) and N (BLOCK_N=512), ragged
    ],
)
def test_triton_shapes(device, m, n):
    partials = boundary_partials(3, m, n, seed=m * 1000 + n).to(device)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    assert (
        bf16_mismatch(
            _run_triton(partials, out), splitk.reduce_partials_reference(partials), nan_bits=True
        )
        is None
    )


def test_strided_out_leaves_padding_alone(device):
    # Row stride N + 5: the reducer must write the (M, N) window and nothing between rows.
    m, n = 6, 11
    partials = boundary_partials(4, m, n, seed=7).to(device)
    buf = torch.full((m, n + 5), 12.5, dtype=torch.bfloat16, device=device)
    out = buf[:, :n]
    splitk.reduce_partials(partials, out)
    assert bf16_mismatch(out, splitk.reduce_partials_reference(partials), nan_bits=True) is None
    assert _bits(buf[:, n:]) == _bits(torch.full((m, 5), 12.5, dtype=torch.bfloat16))


def test_reduce_partials_returns_out(device):
    partials = boundary_partials(2, 3, 4).to(device)
    out = torch.empty(3, 4, dtype=torch.bfloat16, device=device)
    assert splitk.reduce_partials(partials, out) is out


def test_backend_can_be_forced_for_tools(device):
    partials = boundary_partials(3, 2, 8).to(device)
    out = torch.empty(2, 8, dtype=torch.bfloat16, device=device)
    assert splitk.BACKENDS == ("native", "triton")
    assert splitk.reduce_partials(partials, out, backend="triton") is out
    assert bf16_mismatch(out, splitk.reduce_partials_reference(partials), nan_bits=True) is None
    with pytest.raises(ValueError, match="backend must be one of native, triton or None"):
        splitk.reduce_partials(partials, out, backend="cuda")


def test_forcing_native_without_a_build_names_why(monkeypatch, tmp_path, device):
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path))  # no build can be found there
    partials = torch.ones(2, 1, 4, device=device)
    out = torch.empty(1, 4, dtype=torch.bfloat16, device=device)
    with pytest.raises(RuntimeError, match=rf"no native split-K reducer for {partials.device}: "):
        splitk.reduce_partials(partials, out, backend="native")


@pytest.mark.parametrize("shape", [(2, 0, 5), (2, 5, 0)])
def test_empty_output_is_a_no_op(device, shape):
    out = torch.empty(shape[1:], dtype=torch.bfloat16, device=device)
    assert splitk.reduce_partials(torch.empty(shape, device=device), out) is out


@settings(suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@given(partials=reducer_strategies.partials())
def test_triton_bitexact_hypothesis(device, partials):
    partials = partials.to(device)
    out = torch.empty(partials.shape[1:], dtype=torch.bfloat16, device=device)
    assert (
        bf16_mismatch(
            _run_triton(partials, out), splitk.reduce_partials_reference(partials), nan_bits=True
        )
        is None
    )


def test_partials_strategy_reaches_every_class():
    # The property tests above and in test_reducer_native.py draw from this strategy under the
    # active profile; the same number of examples must reach every class the reducers treat
    # apart, or a degenerate strategy would pass them vacuously.
    seen: collections.Counter[str] = collections.Counter()

    @settings(database=None, suppress_health_check=[HealthCheck.data_too_large])
    @given(partials=reducer_strategies.partials())
    def probe(partials):
        seen.update(reducer_strategies.classes(partials))

    probe()
    missing = reducer_strategies.ALL_CLASSES - set(seen)
    assert not missing, f"classes never drawn: {sorted(missing)}; drawn: {dict(seen)}"


# Every NaN word (both signs, quiet and signalling, with payloads), alone (S == 1: no addition)
# and added to a finite partial (S == 2: the hardware's add decides sign and payload).
NAN_WORDS = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FC0ABCD]


@pytest.mark.parametrize("s", [1, 2, 3])
def test_every_nan_is_written_as_the_canonical_nan(device, s):
    words = torch.tensor(NAN_WORDS, dtype=torch.int64).to(torch.int32).view(torch.float32)
    partials = torch.ones(s, 1, len(NAN_WORDS))
    partials[s // 2, 0] = words
    out = _run_triton(
        partials.to(device), torch.empty(1, len(NAN_WORDS), dtype=torch.bfloat16, device=device)
    )
    assert _bits(out) == [0x7FC0] * len(NAN_WORDS)
    assert _bits(splitk.reduce_partials_reference(partials)) == [0x7FC0] * len(NAN_WORDS)


# ---- validation ----------------------------------------------------------------------------------


def _p(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


def _o(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


@pytest.mark.parametrize(
    "partials, out, exc, match",
    [
        ([[[1.0]]], _o(1, 1), TypeError, "partials must be a torch.Tensor"),
        (_p(2, 3, 4), "out", TypeError, "out must be a torch.Tensor"),
        (_p(2, 3, 4, dtype=torch.float16), _o(3, 4), TypeError, "partials must be float32"),
        (_p(2, 3, 4), _o(3, 4, dtype=torch.float32), TypeError, "out must be bfloat16"),
        (_p(3, 4), _o(3, 4), ValueError, r"partials must be 3-D \(S, M, N\)"),
        (_p(0, 3, 4), _o(3, 4), ValueError, "at least one split"),
        (_p(2, 4, 3).transpose(1, 2), _o(3, 4), ValueError, "partials must be contiguous"),
        (_p(2, 3, 4), _o(4, 3), ValueError, r"out must have shape \(M, N\) = \(3, 4\)"),
        (_p(2, 3, 4), _o(4, 3).t(), ValueError, "unit column stride"),
        (_p(2, 3, 4), _o(1, 4).expand(3, 4), ValueError, "rows overlap"),
    ],
)
def test_bad_arguments_are_named(partials, out, exc, match):
    with pytest.raises(exc, match=match):
        splitk.reduce_partials(partials, out)


def test_out_aliasing_partials_is_rejected():
    buf = torch.zeros(64, dtype=torch.float32)
    partials = buf[:24].view(2, 3, 4)
    out = buf.view(torch.bfloat16)[:12].view(3, 4)
    with pytest.raises(ValueError, match="shares storage"):
        splitk.reduce_partials(partials, out)


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="partials is on cpu; Triton kernels need GPU tensors"):
        splitk.reduce_partials(_p(2, 3, 4), _o(3, 4))


# ---- backend choice ------------------------------------------------------------------------------


def test_cpu_backend_is_triton_and_says_why():
    assert splitk.reducer_backend("cpu") == "triton"
    assert "no native reducer for cpu tensors" in splitk.reducer_backend_reason("cpu")


def test_choice_is_logged_once(caplog):
    with caplog.at_level(logging.INFO, logger="kernels.splitk"):
        for _ in range(3):
            splitk.reducer_backend("cpu")
    records = [r for r in caplog.records if r.name == "kernels.splitk"]
    assert len(records) == 1
    assert "split-K reducer on cpu: triton" in records[0].getMessage()


@pytest.mark.parametrize("device_name", ["cpu", None])
def test_require_native_without_a_build_raises(monkeypatch, tmp_path, device_name):
    # An empty cache directory: no manifest for any architecture. On a GPU machine the default
    # device (None) exercises the "no build for sm90/gfx950" path; on CPU both are "cpu".
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(splitk.REQUIRE_NATIVE_ENV, "1")
    with pytest.raises(
        RuntimeError, match=r"MXFP4_REQUIRE_NATIVE_REDUCER .*unavailable.*nox -s build"
    ):
        splitk.reducer_backend(device_name)


def test_require_native_raises_from_reduce_partials(monkeypatch, tmp_path, device):
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(splitk.REQUIRE_NATIVE_ENV, "1")
    partials = torch.zeros(2, 3, 4, device=device)
    with pytest.raises(RuntimeError, match="nox -s build"):
        splitk.reduce_partials(partials, torch.empty(3, 4, dtype=torch.bfloat16, device=device))


# ---- static ISA gate input -----------------------------------------------------------------------


def test_compile_specs_rejects_unknown_target():
    with pytest.raises(ValueError, match="target must be one of"):
        splitk.compile_specs("gfx942")


@pytest.mark.slow
def test_compile_specs_compile_for_both_targets():
    # In a child without TRITON_INTERPRET: under the interpreter @triton.jit yields an
    # InterpretedFunction, which triton.compile cannot take.
    code = (
        "from kernels.splitk import compile_specs\n"
        "for target, key in (('gfx950', 'amdgcn'), ('sm90', 'ptx')):\n"
        "    specs = compile_specs(target)\n"
        "    assert [s.name for s in specs] == ['splitk_reduce'], specs\n"
        "    assert specs[0].compile(target).asm[key]\n"
        "print('ok')\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_DEFAULT_FP_FUSION": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


@pytest.mark.parametrize(
    ("value", "on"),
    [("1", True), ("TRUE", True), (" yes ", True), ("on", True), ("0", False), ("false", False),
     ("No", False), ("off", False), ("", False), (None, False)],
)  # fmt: skip
def test_require_native_reads_on_and_off_as_perfgate_does(monkeypatch, value, on):
    # MXFP4_REQUIRE_NATIVE_REDUCER=false once counted as on
    if value is None:
        monkeypatch.delenv(splitk.REQUIRE_NATIVE_ENV, raising=False)
    else:
        monkeypatch.setenv(splitk.REQUIRE_NATIVE_ENV, value)
    assert splitk._require_native() is on


def test_require_native_refuses_anything_else(monkeypatch):
    monkeypatch.setenv(splitk.REQUIRE_NATIVE_ENV, "maybe")
    with pytest.raises(
        RuntimeError, match=r"MXFP4_REQUIRE_NATIVE_REDUCER must be one of .* got 'maybe'"
    ):
        splitk._require_native()
