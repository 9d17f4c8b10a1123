"""The fused quantize + MXFP4 GEMM against the fp64 reference.

Every output must pass the leaderboard's rule **and** lie within one bf16 ulp plus an fp32
accumulation bound of the exact product of the quantized operands; inputs that are already on
the fp4 grid make every sum exact, so there the kernel must equal the reference bit for bit.
On a CPU these run in the Triton interpreter, so shapes stay small and blocks large.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from hypothesis import Phase, event, given, settings
from hypothesis import strategies as st

from kernels import gemm
from kernels.configs import min_block_m
from kernels.device import device_info
from kernels.gemm import custom_kernel, gemm_a16wfp4
from kernels.gemm_config import GemmConfig
from kernels.layout import padded_scale_shape, shuffle_scales, shuffle_weight
from kernels.mxfp4 import dequantize_mxfp4, quantize_mxfp4
from kernels.reference import (
    check_leaderboard,
    dequantized_weight,
    generate_input,
    lossless_input,
    reference_gemm,
)
from kernels.shapes import LEADERBOARD, TEST_SHAPES
from tests.bits import assert_bits_equal


def _exact_and_bound(a: torch.Tensor, b_shuffle, b_scale_sh):
    """Exact fp64 product of the quantized operands, and |error| allowed for the kernel."""
    k = a.shape[1]
    a64 = dequantize_mxfp4(*quantize_mxfp4(a.cpu()), torch.float64)
    b64 = dequantized_weight(b_shuffle.cpu(), b_scale_sh.cpu(), k)
    exact = a64 @ b64.T
    magnitude = a64.abs() @ b64.abs().T
    _, exp = torch.frexp(exact)
    one_ulp = torch.ldexp(torch.ones_like(exact), exp - 8)  # bf16: 8 significant bits
    return exact, one_ulp + k * 2.0**-24 * magnitude


def _check(out: torch.Tensor, a, b_shuffle, b_scale_sh) -> None:
    ref = reference_gemm(a.cpu(), b_shuffle.cpu(), b_scale_sh.cpu())
    report = check_leaderboard(out, ref)
    assert report, str(report)
    exact, bound = _exact_and_bound(a, b_shuffle, b_scale_sh)
    err = (out.cpu().double() - exact).abs()
    worst = int(torch.argmax(err - bound))
    assert bool((err <= bound).all()), (
        f"element {worst}: |out - exact| = {err.flatten()[worst]} > bound {bound.flatten()[worst]}"
    )


BLOCK_NS = (32, 64, 128)


@st.composite
def gemm_cases(draw, block_n: int | None = None):
    """(m, n, k, config, seed): half the cases split K (two to four splits that all get work),
    K ends in a partial tile in half, N and M often in partial tiles; ``block_n`` fixes the N
    tile (32, 64 or 128), else it is drawn.

    Built from one drawn ``random.Random``, as tests/blocks.py builds blocks: hypothesis' own
    booleans and small ranges kept the split-K share anywhere from a third to a half."""
    rnd = draw(st.randoms(use_true_random=True))
    # 64-column K steps cost the interpreter most (test_lossless_inputs_match_exactly has them)
    block_k = rnd.choice((128, 256))
    split = rnd.random() < 0.5
    # K up to 512 mostly; one case in five goes to 768-1024 (4 steps of 256, or 6-8 of 128
    # split in two to four: what the interpreter can afford of the long-K split path)
    long_k = rnd.random() < 0.2
    if long_k:
        steps = rnd.randint(4, 8 if block_k == 128 else 4)
    else:
        steps = rnd.randint(2 if split else 1, 3 if block_k == 128 else 2)
    # a partial last K tile: 64 columns short of whole tiles
    k = block_k * steps - (64 if rnd.random() < 0.5 else 0)
    # N = 32 .. 160 against tiles of 32, 64, 128: partial N tiles of every kind; the
    # interpreter pays per program, so N stays small
    block_n = block_n or rnd.choice(BLOCK_NS)
    cfg = GemmConfig(
        block_m=rnd.choice((16, 32)),
        block_n=block_n,
        block_k=block_k,
        split_k=rnd.randint(2, min(4, steps)) if split else 1,
    )
    m = rnd.randint(1, 24)
    n = rnd.choice((32, 64, 96, 160))
    return m, n, k, cfg, rnd.randrange(2**16)


def gemm_case_classes(m: int, n: int, k: int, cfg: GemmConfig) -> set[str]:
    """What a case exercises, from its numbers (independently of kernels.gemm_config)."""
    steps = -(-k // cfg.block_k)
    per_split = -(-steps // cfg.split_k)
    found = {"split-k" if -(-steps // per_split) > 1 else "one-split"}
    if k % cfg.block_k:
        found.add("partial-k-tile")
    if n % cfg.block_n:
        found.add("partial-n-tile")
    if m % cfg.block_m:
        found.add("partial-m-tile")
    if steps >= 3:
        found.add("three-k-steps")
    if k > 512:
        found.add("k-above-512")
    found.add(f"block-n-{cfg.block_n}")
    return found


# every class the GEMM strategy must reach, and the share of cases it must reach it in
GEMM_CLASS_SHARE = {
    "split-k": 0.35,
    "one-split": 0.35,
    "partial-k-tile": 0.15,
    "partial-n-tile": 0.15,
    "partial-m-tile": 0.5,
    "three-k-steps": 0.15,
    "k-above-512": 0.12,
    "block-n-32": 0.2,
    "block-n-64": 0.2,
    "block-n-128": 0.2,
}


@pytest.mark.parametrize("block_n", BLOCK_NS)
def test_random_shapes_and_configs(device, block_n):
    # One test per N tile, each a third of the profile's examples: the same cases in all, but
    # three tests that xdist spreads (on a GPU every example compiles a kernel of its own)
    @settings(max_examples=-(-settings.default.max_examples // len(BLOCK_NS)))
    @given(case=gemm_cases(block_n=block_n))
    def check(case):
        m, n, k, cfg, seed = case
        for name in sorted(gemm_case_classes(m, n, k, cfg)):
            event(f"gemm case: {name}")
        a, _, _, b_shuffle, b_scale_sh = generate_input(m, n, k, seed, device=device)
        _check(gemm_a16wfp4(a, b_shuffle, b_scale_sh, config=cfg), a, b_shuffle, b_scale_sh)

    check()


def test_the_gemm_strategy_reaches_every_class():
    # 200 cases drawn as the ci profile draws them (derandomized): a strategy that stops
    # splitting K, or stops leaving partial tiles, fails here
    seen: Counter[str] = Counter()

    @settings(max_examples=200, derandomize=True, database=None, phases=[Phase.generate])
    @given(gemm_cases())
    def draw(case):
        seen.update(gemm_case_classes(*case[:4]))
        seen["cases"] += 1

    draw()
    assert seen["cases"] == 200
    short = {c: seen[c] for c, share in GEMM_CLASS_SHARE.items() if seen[c] < share * 200}
    assert not short, f"classes reached in too few of 200 cases: {short} (all: {dict(seen)})"


@pytest.mark.parametrize(
    ("case", "classes"),
    [
        (
            (16, 32, 512, GemmConfig(16, 32, 128, split_k=4)),
            {"split-k", "three-k-steps", "block-n-32"},
        ),
        # 4 steps over 3 splits: 2 steps each, 2 splits get work
        (
            (16, 32, 512, GemmConfig(16, 32, 128, split_k=3)),
            {"split-k", "three-k-steps", "block-n-32"},
        ),
        (
            (5, 96, 192, GemmConfig(16, 64, 128, split_k=4)),
            {"split-k", "partial-k-tile", "partial-n-tile", "partial-m-tile", "block-n-64"},
        ),
        ((16, 64, 256, GemmConfig(16, 32, 256, split_k=4)), {"one-split", "block-n-32"}),
        (
            (16, 160, 1024, GemmConfig(16, 128, 256, split_k=2)),
            {"split-k", "three-k-steps", "k-above-512", "partial-n-tile", "block-n-128"},
        ),
    ],
)
def test_the_gemm_case_classifier(case, classes):
    assert gemm_case_classes(*case) == classes


@pytest.mark.parametrize(
    "cfg",
    [
        GemmConfig(16, 32, 64),  # many K steps
        GemmConfig(32, 64, 256),  # one K step, partial M and N tiles
        GemmConfig(16, 32, 128, split_k=3),  # split-K through the reducer
    ],
    ids=["k-steps", "edge-tiles", "split-k"],
)
def test_lossless_inputs_match_exactly(device, cfg):
    a, _, _, b_shuffle, b_scale_sh = lossless_input(19, 96, 384, 5, device)
    out = gemm_a16wfp4(a, b_shuffle, b_scale_sh, config=cfg)
    assert_bits_equal(out.cpu(), reference_gemm(a.cpu(), b_shuffle.cpu(), b_scale_sh.cpu()))


@pytest.mark.parametrize("pad", [0x00, 0x7F, 0xFE, 0xFF])
def test_scale_padding_is_never_read(device, pad):
    # N=96 -> 256 padded rows; K=320 -> 10 scale columns padded to 16. Whatever the padding
    # holds, the result must be identical: an E8M0 NaN or a huge scale read by mistake would show.
    a, b, _, b_shuffle, _ = generate_input(5, 96, 320, 11, device=device)
    _, scales = quantize_mxfp4(b.cpu())
    cfg = GemmConfig(16, 64, 256, split_k=2)
    poisoned = shuffle_scales(scales, pad_value=pad).to(device)
    clean = shuffle_scales(scales, pad_value=0).to(device)
    out = gemm_a16wfp4(a, b_shuffle, poisoned, config=cfg)
    assert_bits_equal(out, gemm_a16wfp4(a, b_shuffle, clean, config=cfg))


def test_strided_a_and_strided_out(device):
    a, _, _, b_shuffle, b_scale_sh = generate_input(6, 64, 256, 3, device=device)
    wide = torch.zeros(6, 512, dtype=torch.bfloat16, device=device)
    wide[:, 100:356] = a
    a_rows = wide[:, 100:356]  # row stride 512
    a_cols = a.T.contiguous().T  # column stride 6
    out_wide = torch.full((6, 100), 7.0, dtype=torch.bfloat16, device=device)
    out = out_wide[:, 10:74]  # row stride 100
    cfg = GemmConfig(16, 32, 128)
    want = gemm_a16wfp4(a, b_shuffle, b_scale_sh, config=cfg)
    assert gemm_a16wfp4(a_rows, b_shuffle, b_scale_sh, config=cfg, out=out) is out
    assert_bits_equal(out, want)
    assert_bits_equal(gemm_a16wfp4(a_cols, b_shuffle, b_scale_sh, config=cfg), want)
    assert bool((out_wide[:, :10] == 7).all()) and bool((out_wide[:, 74:] == 7).all())  # untouched


@pytest.mark.parametrize("split", [1, 2])
def test_nan_in_a_makes_its_row_nan(device, split):
    a, _, _, b_shuffle, b_scale_sh = generate_input(4, 32, 256, 9, device=device)
    a[2, 77] = float("nan")
    out = gemm_a16wfp4(a, b_shuffle, b_scale_sh, config=GemmConfig(16, 32, 128, split_k=split))
    assert bool(torch.isnan(out[2]).all())
    assert not bool(torch.isnan(out[[0, 1, 3]]).any())
    assert check_leaderboard(out, reference_gemm(a.cpu(), b_shuffle.cpu(), b_scale_sh.cpu()))


def _skip_tiles_the_device_lacks(device, cfg: GemmConfig) -> None:
    """M tiles below 16 rows compile for gfx950 and run in the interpreter; NVIDIA's MMA (through
    Triton 3.6's dot_scaled emulation on sm90) takes 16 rows at least."""
    if device.type == "cuda" and cfg.block_m < min_block_m(device_info()):
        pytest.skip(f"block_m={cfg.block_m} is below this GPU's smallest M tile")


# The kernel's fast paths (issue 14): BLOCK_K dividing K (EVEN_K: unmasked loads), B scales read
# as contiguous runs (BLOCK_K a multiple of 256 as well), and M tiles of 4 and 8 rows. On fp4-grid
# inputs every sum is exact, so each path must equal the reference bit for bit.
@pytest.mark.parametrize(
    ("cfg", "m", "k"),
    [
        (GemmConfig(4, 32, 256), 7, 512),  # runs; two M tiles, the second partial (rows 4..6)
        (GemmConfig(8, 64, 512, split_k=2), 9, 1024),  # runs, split-K through the reducer
        (GemmConfig(4, 32, 128, split_k=3), 5, 384),  # EVEN_K without runs (gathered scales)
        (GemmConfig(16, 32, 256), 3, 768),  # runs over three 256-column chunks
    ],
    ids=["bm4-runs", "bm8-runs-split", "bm4-even-gather", "bm16-runs-3steps"],
)
def test_fast_paths_match_exactly(device, cfg, m, k):
    _skip_tiles_the_device_lacks(device, cfg)
    a, b, _, _, _ = lossless_input(m, 96, k, 7, "cpu")
    # Every (row, block) of B scaled by its own 2**0..2**2: the E8M0 scales differ from block to
    # block and row to row, so a B scale read from the wrong place shows, and the sums (multiples
    # of 1/4 below 2**18) stay exact in fp32.
    gen = torch.Generator().manual_seed(k + m)
    factor = torch.exp2(torch.randint(0, 3, (96, k // 32), generator=gen).float())
    b = (b.float() * factor.repeat_interleave(32, dim=1)).to(torch.bfloat16)
    b_q, b_scale = quantize_mxfp4(b)
    a, b_shuffle, b_scale_sh = (
        t.to(device) for t in (a, shuffle_weight(b_q), shuffle_scales(b_scale))
    )
    assert len(set(b_scale.flatten().tolist())) == 3
    out = gemm_a16wfp4(a, b_shuffle, b_scale_sh, config=cfg)
    assert_bits_equal(out.cpu(), reference_gemm(a.cpu(), b_shuffle.cpu(), b_scale_sh.cpu()))


@pytest.mark.parametrize("pad", [0x00, 0xFF])
def test_scale_runs_never_read_padding_rows(device, pad):
    # N=96 pads the scales to 256 rows; the runs path reads whole 32-row groups, clamped to
    # the last valid one for the partial N tile (block_n=64: rows 96..127 are not real).
    a, b, _, b_shuffle, _ = generate_input(5, 96, 512, 13, device=device)
    _, scales = quantize_mxfp4(b.cpu())
    cfg = GemmConfig(16, 64, 256)
    poisoned = shuffle_scales(scales, pad_value=pad).to(device)
    clean = shuffle_scales(scales, pad_value=0).to(device)
    out = gemm_a16wfp4(a, b_shuffle, poisoned, config=cfg)
    assert_bits_equal(out, gemm_a16wfp4(a, b_shuffle, clean, config=cfg))
    assert not bool(torch.isnan(out).any())


# A NaN anywhere in a row of A (first, middle or last K block; either sign; with split-K the NaN
# sits in one split only) makes exactly that row NaN, through the E8M0 NaN scale of its block
# (issue 13 item 2: there is no separate row forcing), and no other row.
@pytest.mark.parametrize(
    "cfg", [GemmConfig(16, 32, 256), GemmConfig(16, 32, 128, split_k=2)], ids=["even-k", "split"]
)
def test_nan_anywhere_in_a_row_poisons_that_row_only(device, cfg):
    a, _, _, b_shuffle, b_scale_sh = generate_input(6, 32, 512, 21, device=device)
    a[0, 0] = float("nan")  # first element of the first block
    a[2, 300] = -float("nan")  # a middle block, negative NaN
    a[4, 511] = float("nan")  # last element of the last block (the last split)
    out = gemm_a16wfp4(a, b_shuffle, b_scale_sh, config=cfg)
    assert torch.isnan(out).all(dim=1).tolist() == [True, False, True, False, True, False]
    assert not bool(torch.isnan(out[[1, 3, 5]]).any())


def test_m_zero_returns_empty(device):
    _, _, _, b_shuffle, b_scale_sh = generate_input(1, 64, 128, 0, device=device)
    out = gemm_a16wfp4(
        torch.empty(0, 128, dtype=torch.bfloat16, device=device), b_shuffle, b_scale_sh
    )
    assert out.shape == (0, 64) and out.dtype == torch.bfloat16


def test_custom_kernel_takes_the_leaderboard_tuple(device):
    data = generate_input(3, 64, 128, 1, device=device)
    assert_bits_equal(custom_kernel(data), gemm_a16wfp4(data[0], data[3], data[4]))


def test_torch_fp4_and_e8m0_views_are_accepted(device):
    a, _, _, b_shuffle, b_scale_sh = generate_input(3, 32, 128, 2, device=device)
    out = gemm_a16wfp4(
        a, b_shuffle.view(torch.float4_e2m1fn_x2), b_scale_sh.view(torch.float8_e8m0fnu)
    )
    assert_bits_equal(out, gemm_a16wfp4(a, b_shuffle, b_scale_sh))


def _operands(device, m=2, n=32, k=128):
    a, _, _, b_shuffle, b_scale_sh = generate_input(m, n, k, 0, device=device)
    return a, b_shuffle, b_scale_sh


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (lambda a, b, s: (a.float(), b, s), TypeError, "A must be a bfloat16 tensor"),
        (lambda a, b, s: (a, b.to(torch.int16), s), TypeError, "B_shuffle must have dtype"),
        (lambda a, b, s: (a[:, :64], b, s), ValueError, r"B_shuffle must be \(N, K/2\)"),
        (lambda a, b, s: (a, b, s[:, :4]), ValueError, "B_scale_sh must be the contiguous padded"),
        (lambda a, b, s: (a, b[:16], s), ValueError, "N must be a multiple of 32"),
        (
            lambda a, b, s: (
                torch.zeros(2, 96, dtype=torch.bfloat16, device=a.device),
                torch.zeros(32, 48, dtype=torch.uint8, device=a.device),
                s,
            ),
            ValueError,
            "K must be a multiple of 64",
        ),
    ],
)
def test_bad_input_is_named(device, mutate, error, match):
    with pytest.raises(error, match=match):
        gemm_a16wfp4(*mutate(*_operands(device)))


def test_bad_out_and_config_are_named(device):
    a, b, s = _operands(device)
    with pytest.raises(ValueError, match=r"out must be a bfloat16 tensor of shape \(2, 32\)"):
        gemm_a16wfp4(a, b, s, out=torch.empty(2, 32, device=device))
    with pytest.raises(ValueError, match="unit column stride"):
        gemm_a16wfp4(a, b, s, out=torch.empty(32, 2, dtype=torch.bfloat16, device=device).T)
    with pytest.raises(TypeError, match=r"config must be a kernels\.configs\.GemmConfig"):
        gemm_a16wfp4(a, b, s, config={"block_m": 16})


@pytest.mark.gpu
def test_device_mismatch_is_named():
    a, b, s = _operands(torch.device("cuda"))
    with pytest.raises(ValueError, match="B_shuffle is on cpu but A is on"):
        gemm_a16wfp4(a, b.cpu(), s)


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    a, b, s = _operands(torch.device("cpu"))
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(
        ValueError,
        match="A is on cpu; Triton kernels need GPU tensors, or TRITON_INTERPRET=1",
    ):
        gemm_a16wfp4(a, b, s)


# --- the task's shapes, on a GPU --------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("shape", TEST_SHAPES + LEADERBOARD, ids=lambda s: "x".join(map(str, s)))
def test_task_shapes_write_every_element(shape):
    m, n, k = shape
    a, _, _, b_shuffle, b_scale_sh = generate_input(m, n, k, seed=shape[0] * 7 + 1, device="cuda")
    # The scale padding is poisoned with E8M0 NaN and the output with NaN before the call: a
    # padding read or an element never written shows up as NaN.
    _, scales = quantize_mxfp4(generate_input(m, n, k, seed=shape[0] * 7 + 1)[1])
    b_scale_sh = shuffle_scales(scales, pad_value=0xFF).cuda()
    assert b_scale_sh.shape == padded_scale_shape(n, k)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    gemm_a16wfp4(a, b_shuffle, b_scale_sh, out=out)
    assert not bool(torch.isnan(out).any()), "some output elements were never written"
    _check(out, a, b_shuffle, b_scale_sh)


# --- input validation: issue 13 items 2, 3, 5 ----------------------------------------------------


@pytest.mark.parametrize(
    ("m", "n"),
    [
        (3, 32),  # K = 0 alone: the empty sum, zeros (torch.matmul's answer)
        (0, 32),  # with M = 0 too: an empty C, no launch
        (3, 0),  # with N = 0 too: an empty C, no launch
    ],
)
def test_k_zero_is_the_empty_sum(device, m, n):
    a = torch.empty(m, 0, dtype=torch.bfloat16, device=device)
    b = torch.empty(n, 0, dtype=torch.uint8, device=device)
    s = torch.empty(padded_scale_shape(n, 0), dtype=torch.uint8, device=device)
    want = torch.zeros(m, n, dtype=torch.bfloat16)
    assert_bits_equal(gemm_a16wfp4(a, b, s).cpu(), want)
    # a caller's out holding NaN must come back all zeros, not untouched
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
    assert gemm_a16wfp4(a, b, s, out=out) is out
    assert_bits_equal(out.cpu(), want)
    assert_bits_equal((a.float() @ b.float().T).to(torch.bfloat16).cpu(), want)  # torch's answer


@pytest.mark.parametrize(
    "make_out",
    [
        lambda m, n, dev: torch.zeros(1, n, dtype=torch.bfloat16, device=dev).expand(m, n),
        # rows half overlapping: a row stride of N/2
        lambda m, n, dev: torch.zeros(m * n, dtype=torch.bfloat16, device=dev).as_strided(
            (m, n), (n // 2, 1)
        ),
        # rows overlapping by one element: a row stride of N - 1
        lambda m, n, dev: torch.zeros(m * n, dtype=torch.bfloat16, device=dev).as_strided(
            (m, n), (n - 1, 1)
        ),
    ],
    ids=["expanded-row", "half-overlap", "one-element-overlap"],
)
def test_out_with_overlapping_rows_is_refused(device, make_out):
    a, b, s = _operands(device)
    with pytest.raises(ValueError, match=r"out rows overlap: row stride \d+ < N = 32"):
        gemm_a16wfp4(a, b, s, out=make_out(2, 32, device))


def _square(device):
    """Operands with N == K (= 64), so that out may have A's shape, and storage shared with
    spare room: ``room`` (6, 64) bf16 whose rows 0..1 are A."""
    a, b, s = _operands(device, m=2, n=64, k=64)
    room = torch.zeros(6, 64, dtype=torch.bfloat16, device=device)
    room[:2] = a
    return room, b, s


def _bytes_as_out(t: torch.Tensor) -> torch.Tensor:
    """A (2, 64) bf16 view of t's first 256 bytes."""
    return t.view(torch.uint8).flatten()[:256].view(torch.bfloat16).view(2, 64)


def _rows(room: torch.Tensor, first: int, step: int = 1) -> torch.Tensor:
    """Rows first, first + step of room, as a (2, 64) view."""
    return room.as_strided((2, 64), (64 * step, 1), 64 * first)


# (A, out) from the storage `room` (A's bytes in rows 0..1 unless said) and B's operands
@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda room, b, s: (room[:2], room[:2]), "A"),  # out=A itself
        (lambda room, b, s: (room[:2], room[1:3]), "A"),  # out's first row is A's second
        (lambda room, b, s: (room[1:3], room[:2]), "A"),  # out's second row is A's first
        # rows 0, 2 and rows 1, 3: no element shared, but the address ranges overlap
        (lambda room, b, s: (_rows(room, 0, 2), _rows(room, 1, 2)), "A"),
        (lambda room, b, s: (room[:2], _bytes_as_out(b)), "B_shuffle"),
        (lambda room, b, s: (room[:2], _bytes_as_out(s)), "B_scale_sh"),
        (lambda room, b, s: (room[:2], _bytes_as_out(s.flatten()[1792:])), "B_scale_sh"),
        (lambda room, b, s: (room[:2], room[2:4]), None),  # the same storage, apart: accepted
    ],
    ids=[
        "out-is-a",
        "out-after-a",
        "out-before-a",
        "interleaved-rows",
        "b-shuffle",
        "b-scale",
        "b-scale-tail",
        "same-storage-apart",
    ],
)
def test_out_overlapping_an_input_is_refused(device, make, name):
    # out=A (N == K) was accepted and most outputs came back wrong: the kernel wrote C over the
    # A it was still reading. Any byte of out shared with an input is refused, naming both.
    room, b, s = _square(device)
    a, out = make(room, b, s)
    want = gemm_a16wfp4(a.clone(), b, s)
    before = [t.clone() for t in (room, b, s)]
    if name is None:
        assert gemm_a16wfp4(a, b, s, out=out) is out
        assert_bits_equal(out, want)
        return
    with pytest.raises(ValueError, match=rf"^out overlaps {name} in memory .*must not share"):
        gemm_a16wfp4(a, b, s, out=out)
    for t, was in zip((room, b, s), before, strict=True):
        assert_bits_equal(t, was, what="an input changed")


@pytest.mark.parametrize(
    ("start", "shared"),
    [(0, 0), (1, 1), (127, 1), (128, 0)],
    ids=["adjacent-before", "last-element-is-a-s-first", "first-element-is-a-s-last",
         "adjacent-after"],
)  # fmt: skip
def test_out_sharing_one_element_with_a_is_refused_and_adjacent_is_not(device, start, shared):
    # The boundaries of the address-range rule, one element either way: A is elements
    # 128..255 of one buffer; out is the 128 elements from ``start`` (0, 1: before A) or from
    # ``128 + start`` (127, 128: at A's end).
    room, b, s = _square(device)
    flat = torch.zeros(512, dtype=torch.bfloat16, device=device)
    flat[128:256] = room[:2].flatten()
    a = flat[128:256].view(2, 64)
    first = start if start in (0, 1) else 128 + start
    out = flat[first : first + 128].view(2, 64)
    if shared:
        with pytest.raises(ValueError, match="out overlaps A in memory"):
            gemm_a16wfp4(a, b, s, out=out)
        assert_bits_equal(a, room[:2], what="A changed")
    else:
        assert_bits_equal(gemm_a16wfp4(a, b, s, out=out), gemm_a16wfp4(room[:2].clone(), b, s))


def test_out_sharing_one_byte_with_b_shuffle_is_refused(device):
    # out's last byte is B_shuffle's first, or its first byte B_shuffle's last: bytes, not
    # elements, decide
    _, b, s = _square(device)
    a = _square(device)[0][:2]
    buf = torch.zeros(256 + b.numel(), dtype=torch.uint8, device=device)
    buf[255 : 255 + b.numel()] = b.flatten()
    b_view = buf[255 : 255 + b.numel()].view(b.shape)
    out = buf[:256].view(torch.bfloat16).view(2, 64)
    with pytest.raises(ValueError, match="out overlaps B_shuffle in memory"):
        gemm_a16wfp4(a, b_view, s, out=out)
    # and out's first byte is B_shuffle's last
    buf = torch.zeros(b.numel() + 256, dtype=torch.uint8, device=device)
    buf[1 : 1 + b.numel()] = b.flatten()
    out = buf[b.numel() : b.numel() + 256].view(torch.bfloat16).view(2, 64)
    with pytest.raises(ValueError, match="out overlaps B_shuffle in memory"):
        gemm_a16wfp4(a, buf[1 : 1 + b.numel()].view(b.shape), s, out=out)
    apart = torch.zeros(2, 64, dtype=torch.bfloat16, device=device)
    buf2 = torch.zeros(256 + b.numel(), dtype=torch.uint8, device=device)
    buf2[256:] = b.flatten()
    out2 = buf2[:256].view(torch.bfloat16).view(2, 64)  # ends right before B_shuffle
    gemm_a16wfp4(a, buf2[256:].view(b.shape), s, out=out2)
    assert_bits_equal(out2, gemm_a16wfp4(a, b, s, out=apart))


def test_a_bound_launch_still_refuses_an_overlapping_out(device):
    # The first call of a key validates it in full; later calls with the same shapes and
    # strides skip validation, but an out at A's address must still be refused.
    room, b, s = _square(device)
    a = room[:2]
    gemm_a16wfp4(a, b, s, out=room[4:6])  # binds the key (A's shape and strides, out's too)
    with pytest.raises(ValueError, match="out overlaps A in memory"):
        gemm_a16wfp4(a, b, s, out=a)
    with pytest.raises(ValueError, match="out overlaps A in memory"):
        gemm_a16wfp4(room[1:3], b, s, out=room[2:4])  # A's second row is out's first
    assert_bits_equal(room[:2], _square(device)[0][:2], what="A changed")


def test_meta_operands_get_our_error():
    a, b, s = (t.to("meta") for t in _operands(torch.device("cpu")))
    with pytest.raises(ValueError, match="A is a meta tensor"):
        gemm_a16wfp4(a, b, s)


def test_three_d_a_is_told_its_rank(device):
    a, b, s = _operands(device)
    with pytest.raises(ValueError, match=r"A must be 2-D \(M, K\), got a 3-D tensor"):
        gemm_a16wfp4(a[None], b, s)


@pytest.mark.parametrize("data", [(1, 2, 3), [1, 2, 3, 4, 5, 6], "abcde", None])
def test_custom_kernel_says_what_the_tuple_holds(data):
    with pytest.raises(TypeError, match=r"data must be the leaderboard's 5-tuple \(A, B, B_q"):
        custom_kernel(data)


def test_a_bound_launch_revalidates_what_it_relies_on(device):
    """After a good call binds the launch for a shape, operands of that shape that differ in
    what the launch relies on (dtype, strides, contiguity, an out) are validated again."""
    a, b, s = _operands(device)
    gemm_a16wfp4(a, b, s)
    with pytest.raises(ValueError, match="B_shuffle must be contiguous"):
        gemm_a16wfp4(a, b.T.contiguous().T, s)
    with pytest.raises(TypeError, match="B_shuffle must have dtype"):
        gemm_a16wfp4(a, b.view(torch.int8), s)
    with pytest.raises(ValueError, match="out rows overlap"):
        gemm_a16wfp4(
            a, b, s, out=torch.zeros(1, 32, dtype=torch.bfloat16, device=device).expand(2, 32)
        )
    wide = torch.zeros(2, 64, dtype=torch.bfloat16, device=device)[:, :32]  # row stride 64: fine
    assert gemm_a16wfp4(a, b, s, out=wide) is wide
    assert_bits_equal(wide, gemm_a16wfp4(a, b, s))


@pytest.mark.gpu
def test_captured_split_k_graphs_own_their_partials():
    # torch.cuda.graph captures every graph on one shared side stream: a workspace cached per
    # stream would be shared by two graphs, and replaying them on two streams at once would mix
    # their partials. Each captured graph must get partials of its own.
    m, n, k = 16, 2112, 7168  # split-K on every target
    cfg = GemmConfig(16, 128, 512, split_k=7)
    inputs = [generate_input(m, n, k, seed=s, device="cuda") for s in (1, 2)]
    refs = [reference_gemm(d[0], d[3], d[4]) for d in inputs]
    outs = [torch.empty_like(r) for r in refs]
    graphs = []
    for d, o in zip(inputs, outs, strict=True):
        gemm_a16wfp4(d[0], d[3], d[4], config=cfg, out=o)  # compile outside the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            gemm_a16wfp4(d[0], d[3], d[4], config=cfg, out=o)
        graphs.append(g)
    for o in outs:
        o.fill_(float("nan"))
    streams = [torch.cuda.Stream() for _ in graphs]
    for s in streams:  # after the fills above, which are the default stream's
        s.wait_stream(torch.cuda.current_stream())
    for _ in range(20):  # concurrent replays: shared partials would race
        for g, s in zip(graphs, streams, strict=True):
            with torch.cuda.stream(s):
                g.replay()
    torch.cuda.synchronize()
    for o, r in zip(outs, refs, strict=True):
        assert check_leaderboard(o, r), "a graph's output used another graph's partials"


# --- the bound launch (issue 12): direct launches must give the JIT path's bits -----------------


def _jit_call(data):
    # a cleared launch cache makes this call validate, bind and launch through Triton's JIT path
    gemm.clear_launch_cache()
    return custom_kernel(data)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", LEADERBOARD, ids=lambda s: "x".join(map(str, s)))
def test_bound_launch_gives_the_jit_paths_bits(shape):
    # After the first call of a key, calls launch the compiled kernel directly with int pointers
    # and (split-K) the native reduction planned per stream. Same bits as the JIT path, on the
    # default stream and on a side stream (a workspace and plan of its own), split-K or not.
    m, n, k = shape
    sets = [generate_input(m, n, k, seed=31 + i, device="cuda") for i in range(3)]
    want = [_jit_call(d) for d in sets]
    custom_kernel(sets[0])
    a, _, _, b, s = sets[0]
    bound = gemm.bound_call(a, b, s)
    assert bound is not None and bound.launch is not None, "never bound"
    side = torch.cuda.Stream()
    got = [custom_kernel(d) for d in sets]
    # the inputs and the calls above are the default stream's work: the side stream waits for
    # them (CUDA orders nothing across streams; without this it can read inputs not yet written)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got += [custom_kernel(d) for d in sets]
    side.synchronize()
    torch.cuda.synchronize()
    for i, out in enumerate(got):
        assert_bits_equal(out, want[i % 3], what=f"call {i}")
    assert check_leaderboard(got[0], reference_gemm(a, b, s))


@pytest.mark.gpu
def test_launch_hooks_see_the_bound_launch():
    # Profilers (proton, nsight's Triton hooks) read Triton's launch hooks; the direct launch
    # must still call them with the kernel's launch metadata, as Triton's runner does.
    from triton import knobs

    m, n, k = 16, 2112, 7168
    data = generate_input(m, n, k, seed=5, device="cuda")
    custom_kernel(data)  # bind outside the hook
    seen = []

    def hook(meta):
        seen.append(None if meta is None else meta.get()["name"])

    enter = knobs.runtime.launch_enter_hook
    if hasattr(enter, "add"):  # triton >= 3.7: a HookChain
        enter.add(hook)
        undo = lambda: enter.remove(hook)  # noqa: E731
    else:
        knobs.runtime.launch_enter_hook = hook
        undo = lambda: setattr(knobs.runtime, "launch_enter_hook", enter)  # noqa: E731
    try:
        out = custom_kernel(data)
    finally:
        undo()
    torch.cuda.synchronize()
    assert seen == ["gemm_a16wfp4_kernel"], seen
    assert check_leaderboard(out, reference_gemm(data[0], data[3], data[4]))


class _FakeCompiled:
    """What _CompiledLaunch reads from a triton CompiledKernel, recording the launches."""

    function, packed_metadata = 0xF00, ("packed",)

    def __init__(self):
        self.launches, self.grids, self.meta_asked = [], [], []

    def __getitem__(self, grid):
        self.grids.append(grid)

    def run(self, *args):
        self.launches.append(args)

    def launch_metadata(self, grid, stream, *args):
        self.meta_asked.append((grid, stream, args))
        return "meta"


@pytest.mark.parametrize("hooked", [False, True])
def test_the_direct_launch_passes_what_tritons_runner_passes(monkeypatch, hooked):
    # The bound GEMM launch calls the compiled kernel's launcher as CompiledKernel[grid]'s runner
    # does: grid, stream, function, packed metadata, launch metadata, enter and exit hooks, then
    # the kernel's arguments (pointers as ints). Launch metadata is built only when a hook will
    # read it (triton <= 3.6: a hook or None; later: a HookChain, empty without hooks).
    from triton import knobs

    class Chain:
        def __init__(self, calls):
            self.calls = calls

    enter, leave = Chain(["hook"] if hooked else []), Chain([])
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", enter)
    monkeypatch.setattr(knobs.runtime, "launch_exit_hook", leave)
    compiled = _FakeCompiled()
    launch = gemm._CompiledLaunch(compiled, (7, 2, 1), ("M", "N", 64))
    launch(123, 0x1000, 0x2000, 0x3000, 0x4000)
    assert compiled.grids == [(7, 2, 1)]  # handles loaded once, at bind time
    meta = "meta" if hooked else None
    assert compiled.launches == [
        (7, 2, 1, 123, 0xF00, ("packed",), meta, enter, leave,
         0x1000, 0x2000, 0x3000, 0x4000, "M", "N", 64)
    ]  # fmt: skip
    want_asked = [((7, 2, 1), 123, (0x1000, 0x2000, 0x3000, 0x4000, "M", "N", 64))]
    assert compiled.meta_asked == (want_asked if hooked else [])
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", None)  # triton <= 3.6, no hook
    launch(5, 1, 2, 3, 4)
    assert compiled.launches[-1][6:8] == (None, None)


def test_bound_call_is_the_launch_a_first_call_binds(device):
    # what lab/scripts/host_report.py times; the host census counts its launcher's entries
    m, n, k = 4, 64, 64
    data = generate_input(m, n, k, seed=5, device=device)
    a, _, _, b, s = data
    gemm.clear_launch_cache()
    assert gemm.bound_call(a, b, s) is None  # nothing bound yet
    custom_kernel(data)
    bound = gemm.bound_call(a, b, s)
    assert bound is not None and gemm.bound_call(a, b, s) is bound
    assert gemm.bound_call(a, b, s, config="other") is None  # another key
    assert gemm.bound_call(None, b, s) is None  # not tensors: no key
    assert len(gemm.launch_entry_codes()) == 1
