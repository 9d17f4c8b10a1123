"""The in-kernel quantizer (``kernels._quant.quantize_tile``) against the oracle, bit for bit.

It runs through ``kernels.quant.quantize_mxfp4_triton``, a small kernel around the very
``@triton.jit`` function the GEMM calls: in the interpreter on a CPU, compiled on a GPU.

Where the input space is small it is enumerated: every bf16 bit pattern as a whole block, and
every pattern that can share a block with each of the 254 finite scales (all 8.4 million
(element, scale) pairs the rule can meet). Hypothesis draws the combinations that cannot be
enumerated (mixed blocks, NaN blocks, shapes), from :mod:`tests.blocks`.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.device import device_info
from kernels.interpreter import interpret_mode
from kernels.mxfp4 import quantize_mxfp4
from kernels.quant import check_impl, quant_impl, quantize_mxfp4_triton
from kernels.targets import QuantPath, quant_path_for
from tests import blocks
from tests.bits import assert_bits_equal


def _bf16(patterns, m: int, k: int, device) -> torch.Tensor:
    x = torch.as_tensor(patterns, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    return x.reshape(m, k).to(device)


# Every quantizer path: the portable code, the model of the gfx950 instruction fed by the asm
# path's own operand preparation (plain tl: a wrong scale operand or nibble order for
# v_cvt_scalef32_pk_fp4_bf16 fails here on a CPU), and the asm path itself, compiled on a
# gfx950 GPU only.
# The portable path's two fp32 widenings (GemmConfig.quant_widen): the cast runs compiled
# only, so it is enumerated here on a GPU; on a CPU the tests below check it on every pattern
# but the subnormals, where the interpreter's own conversion is what differs.
COMPILED_ONLY = pytest.mark.skipif(
    interpret_mode(),
    reason="the cast widening runs compiled only: Triton's interpreter misconverts bf16 "
    "subnormals in x.to(tl.float32) (test_the_interpreter_cast_differs_only_on_subnormals)",
)
PATHS = [
    pytest.param(QuantPath.PORTABLE, "shift", id="portable"),
    pytest.param(QuantPath.PORTABLE, "cast", id="portable-cast", marks=COMPILED_ONLY),
    pytest.param(QuantPath.GFX950_EMULATED, "shift", id="gfx950-emulated"),
    pytest.param(QuantPath.GFX950_CVT, "shift", id="gfx950-asm", marks=pytest.mark.gfx950),
]
BOTH_MODES = (True, False)


def _assert_same_as_oracle(
    x: torch.Tensor,
    impl: QuantPath,
    widen: str = "shift",
    *,
    modes=BOTH_MODES,
    tile=(16, 256),
) -> None:
    """Codes and scale bytes bit for bit, in the standalone mode (``nan_block_codes=True``:
    every byte) and in the GEMM's (every scale, the 0xFF of a NaN block included, and the codes
    of every block without a NaN)."""
    block_m, block_k = tile
    want_p, want_s = quantize_mxfp4(x.cpu())
    for nan_block_codes in modes:
        packed, scales = quantize_mxfp4_triton(
            x, impl=impl, block_m=block_m, block_k=block_k, nan_block_codes=nan_block_codes,
            widen=widen,
        )  # fmt: skip
        mode = f"standalone ({widen})" if nan_block_codes else f"gemm mode ({widen})"
        assert_bits_equal(scales, want_s, what=f"{impl.name} {mode} scales")
        if nan_block_codes:
            assert_bits_equal(packed, want_p, what=f"{impl.name} {mode} codes")
        else:
            kept = (want_s != 0xFF).repeat_interleave(16, dim=-1)
            assert_bits_equal(packed.cpu()[kept], want_p[kept], what=f"{impl.name} {mode} codes")


def _enumeration_tile(device: torch.device) -> tuple[int, int]:
    # The interpreter runs one program after the other: few, large ones keep millions of
    # elements to seconds. A GPU compiles the launcher's default tile (a 256 x 1024 tile of
    # one program would not fit its registers).
    return (256, 1024) if device.type == "cpu" else (16, 256)


# --- enumeration ----------------------------------------------------------------------------


@functools.cache
def _every_pattern_as_a_block() -> torch.Tensor:
    """(2048, 1024): block i is 32 copies of the bf16 pattern i, for all 65536 patterns."""
    patterns = torch.arange(1 << 16, dtype=torch.int32).repeat_interleave(32)
    return _bf16(patterns, 2048, 1024, "cpu")


def _scale_exponents(magnitudes: torch.Tensor) -> torch.Tensor:
    """The rule's scale exponent of a block whose maximum is each bf16 magnitude pattern."""
    rounded = ((magnitudes.to(torch.int64) << 16) + 0x200000) & 0x7F800000
    return ((rounded >> 23) - 129).clamp(-127, 127)


@functools.cache
def _every_element_at_every_scale() -> torch.Tensor:
    """For each finite scale byte B (0..253): blocks led by the largest finite magnitude whose
    scale is B, filled with every pattern of either sign that keeps the block's scale at B
    (+-0, the subnormals, every tie, +-inf at B = 253; no NaN), the maximum at position
    ``i % 32`` of block ``i``. About 8.7 million elements, as (rows, 1024)."""
    exps = _scale_exponents(torch.arange(blocks.POS_INF + 1))
    # magnitudes 0 .. n_B - 1 keep the scale at B (the exponent grows with the magnitude)
    n = torch.bucketize(torch.arange(254) - 127, exps, right=True)
    top = torch.where(n - 1 == blocks.POS_INF, n - 2, n - 1)  # the largest finite one
    per_byte = -(-2 * n // 31)  # blocks of 31 members: n_B magnitudes, positive then negative
    byte = torch.repeat_interleave(torch.arange(254), per_byte)
    first = torch.cumsum(per_byte, 0) - per_byte
    j = torch.arange(len(byte)) - first[byte]  # block j of its byte
    slot = j[:, None] * 31 + torch.arange(31)[None, :]
    nb = n[byte][:, None]
    body = torch.where(slot < nb, slot, torch.where(slot < 2 * nb, (slot - nb) | 0x8000, 0))
    lead = top[byte] | (j & 1) * 0x8000  # either sign
    pos = (torch.arange(len(byte)) & 31)[:, None]
    col = torch.arange(32)[None, :]
    block = torch.where(
        col == pos, lead[:, None], body.gather(1, (col - (col > pos).long()).clamp(max=30))
    )
    block = torch.cat([block, block.new_zeros(-len(block) % 32, 32)])
    return _bf16(block.flatten(), len(block) // 32, 1024, "cpu")


@pytest.mark.parametrize(("impl", "widen"), PATHS)
def test_every_bf16_pattern_as_a_whole_block(device, impl, widen):
    # 0x0003 x 32 once gave code 2 in the interpreter where the oracle gives 0
    x = _every_pattern_as_a_block().to(device)
    _assert_same_as_oracle(x, impl, widen, tile=_enumeration_tile(device))


@pytest.mark.parametrize(("impl", "widen"), PATHS)
def test_every_element_at_every_scale(device, impl, widen):
    # No NaN: the GEMM's mode must give the oracle's every byte. The standalone mode differs
    # from it only in NaN blocks, which the whole-block enumeration and the NaN blocks below
    # check.
    x = _every_element_at_every_scale().to(device)
    _assert_same_as_oracle(x, impl, widen, modes=(False,), tile=_enumeration_tile(device))


@pytest.mark.parametrize(("impl", "widen"), PATHS)
def test_nan_blocks_at_every_scale(device, impl, widen):
    # A NaN in every block: the standalone mode's codes are the oracle's, against the finite
    # maximum, at every scale. Every 8th block of the enumeration (its maximum in every
    # position), one element replaced by a NaN of either sign.
    x = _every_element_at_every_scale()
    rows = x.view(torch.int16).reshape(-1, 32)[::8].clone()
    nan = torch.tensor([0x7FC0, 0x7F81, 0x7FFF, 0xFFC1 - 0x10000], dtype=torch.int16)
    idx = torch.arange(len(rows))
    rows[idx, (idx * 7 + 3) % 32] = nan[idx % 4]
    rows = torch.cat([rows, rows.new_zeros(-len(rows) % 32, 32)])
    x = rows.view(torch.bfloat16).reshape(-1, 1024).to(device)
    _assert_same_as_oracle(x, impl, widen, modes=(True,), tile=_enumeration_tile(device))


@pytest.mark.parametrize(("impl", "widen"), PATHS)
def test_nan_blocks_take_the_scale_of_everything_else(device, impl, widen):
    # The standalone mode's codes of a NaN block are against the block without its NaNs:
    # infinities included (they set scale byte 253), NaNs of either sign, and a NaN that
    # would have been the maximum.
    base = [0x3C00 + 3 * j for j in range(32)]  # ~2**-7 .. 2**-6.4: byte 120 on their own
    rows = []
    for extra in (
        {0: 0x7FC0, 1: 0x7F80},  # NaN and +inf: byte 253, the small values code 0
        {7: 0xFFFF, 9: 0xFF80},  # -NaN and -inf
        {3: 0x7F81, 4: 0x7F81, 5: 0x40C0},  # two NaNs and a 6: byte 127
        {31: 0xFFC1},  # one NaN among the small values
        {i: 0x7FC0 for i in range(32)},  # nothing but NaN: byte 0 for the codes, all 0
    ):
        row = list(base)
        for i, p in extra.items():
            row[i] = p
        rows += row + base  # the second block: the same small values, no NaN
    _assert_same_as_oracle(_bf16(rows, len(rows) // 64, 64, device), impl, widen)


def _is_subnormal(x: torch.Tensor) -> torch.Tensor:
    bits = x.view(torch.int16).to(torch.int32) & 0x7FFF
    return (bits > 0) & (bits < 0x80)


@pytest.mark.skipif(not interpret_mode(), reason="pins a bug of Triton's CPU interpreter")
def test_the_interpreter_cast_differs_only_on_subnormals(device):
    # What keeps the cast widening off the CPU: in the interpreter, the cast and the shift give
    # the same bytes on every whole-pattern block except those of subnormal patterns (the
    # shift is the oracle's there: test_every_bf16_pattern_as_a_whole_block). If Triton fixes
    # its bf16 -> fp32 conversion, this fails: then let the cast run in the interpreter too.
    x = _every_pattern_as_a_block().to(device)
    tile = _enumeration_tile(device)
    got = {
        widen: quantize_mxfp4_triton(
            x, impl=QuantPath.PORTABLE, block_m=tile[0], block_k=tile[1], widen=widen
        )
        for widen in ("shift", "cast")
    }
    assert_bits_equal(got["cast"][1], got["shift"][1], what="scales (the widening never sets them)")
    differs = (got["cast"][0] != got["shift"][0]).reshape(-1, 16).any(dim=1)
    subnormal = _is_subnormal(x).reshape(-1, 32).all(dim=1)
    assert differs.any(), "the interpreter's cast is right now: run the cast widening on the CPU"
    assert not (differs & ~subnormal).any(), (
        f"the widenings differ on non-subnormal blocks: {torch.nonzero(differs & ~subnormal)[:8]}"
    )


@pytest.mark.skipif(not interpret_mode(), reason="the compiled cast is enumerated whole above")
def test_the_cast_widening_matches_the_oracle_off_subnormals(device):
    # Every pattern at every scale with the subnormal members set to +0 (a member, never a
    # block's maximum there, so every scale stays): the cast widening's source is checked on
    # the CPU wherever the interpreter's conversion is right.
    x = _every_element_at_every_scale()
    x = torch.where(_is_subnormal(x), torch.zeros_like(x), x).to(device)
    _assert_same_as_oracle(
        x, QuantPath.PORTABLE, "cast", modes=(False,), tile=_enumeration_tile(device)
    )


def test_an_unknown_widening_is_refused():
    with pytest.raises(ValueError, match="widen must be one of shift, cast, got 'round'"):
        quantize_mxfp4_triton(torch.zeros(1, 64, dtype=torch.bfloat16), widen="round")


def test_the_enumerations_cover_what_they_claim():
    # every pattern exactly 32 times, in whole blocks
    whole = _every_pattern_as_a_block().view(torch.int16).reshape(-1, 32)
    assert bool((whole == whole[:, :1]).all())
    assert sorted((whole[:, 0].to(torch.int32) & 0xFFFF).tolist()) == list(range(1 << 16))
    # every (non-NaN pattern, finite scale byte) pair the rule allows, and no NaN
    x = _every_element_at_every_scale()
    blocks_ = x.view(torch.int16).to(torch.int32).reshape(-1, 32) & 0xFFFF
    assert not bool(((blocks_ & 0x7FFF) > blocks.POS_INF).any())
    scale = _scale_exponents((blocks_ & 0x7FFF).amax(dim=1)) + 127
    pairs = torch.unique(scale[:, None] * 65536 + blocks_).numel()
    # bytes 0..253 with every pattern of magnitude up to the largest keeping that byte
    mags = torch.arange(0x7F81)
    counts = [int((_scale_exponents(mags) <= b - 127).sum()) for b in range(254)]
    assert pairs == 2 * sum(counts)
    assert sorted(set(scale.tolist())) == list(range(254))


# --- sampled combinations -------------------------------------------------------------------


@pytest.mark.parametrize(("impl", "widen"), PATHS)
@given(data=st.data())
def test_drawn_blocks_quantize_like_the_oracle(device, impl, widen, data):
    m = data.draw(st.integers(1, 20), label="m")
    k = data.draw(st.sampled_from([64, 256, 320]), label="k")  # 320: a partial K tile
    drawn = data.draw(st.lists(blocks.quant_block(), min_size=1, max_size=12), label="blocks")
    blocks.report(drawn)
    rows = [drawn[i % len(drawn)] for i in range(m * k // 32)]
    _assert_same_as_oracle(_bf16([p for b in rows for p in b], m, k, device), impl, widen)


# Any 16-bit pattern anywhere: NaNs of both signs, infinities, subnormals, zeros of both signs
@pytest.mark.parametrize(("impl", "widen"), PATHS)
@given(st.lists(st.integers(0, 0xFFFF), min_size=128, max_size=128))
def test_any_bf16_bit_patterns_quantize_like_the_oracle(device, impl, widen, patterns):
    _assert_same_as_oracle(_bf16(patterns, 2, 64, device), impl, widen)


def test_the_block_strategy_reaches_every_class():
    # Drawn as the ci profile draws (derandomized), 200 blocks: each class in its share of
    # them at least, so a strategy that stops reaching one fails here, not silently.
    from collections import Counter

    from hypothesis import Phase, settings

    seen: Counter[str] = Counter()
    drawn = []

    @settings(max_examples=200, derandomize=True, database=None, phases=[Phase.generate])
    @given(blocks.quant_block())
    def draw(block):
        drawn.append(block)
        seen.update(blocks.block_classes(block))

    draw()
    assert len(drawn) == 200
    short = {c: seen[c] for c, share in blocks.CLASS_SHARE.items() if seen[c] < share * 200}
    assert not short, f"classes reached in too few of 200 blocks: {short} (all: {dict(seen)})"


@pytest.mark.parametrize(
    ("block", "classes"),
    [
        ([0x40C0, 0xBE80] + [0] * 30, {"no-nan", "neg-tie"}),  # 6 sets 2**0; -0.25 a tie
        ([0x40C0, 0x3F40, 0x8000] + [0] * 29, {"no-nan", "pos-tie", "neg-zero"}),  # 0.75
        ([0x0003] * 32, {"no-nan", "subnormal", "subnormal-max"}),
        ([0x7F80, 0xFFC1] + [0] * 30, {"nan", "inf", "nan-and-inf"}),
        ([0x40DF] + [0] * 31, {"no-nan", "saturated"}),  # 6.97 against 2**0
        ([0x40C0, 0x3E81] + [0] * 30, {"no-nan"}),  # next to a tie is no tie
    ],
)
def test_the_block_classifier(block, classes):
    assert blocks.block_classes(block) == classes


@pytest.mark.parametrize(("impl", "widen"), PATHS)
@pytest.mark.parametrize("sign", [0x0000, 0x8000], ids=["pos", "neg"])
def test_block_maximum_boundaries(device, impl, widen, sign):
    # Block maxima where the scale byte changes, and the NaN/inf boundary of the integer
    # maximum: 0x7F80 (+inf) must not flag a NaN, 0x7F81 (the smallest NaN) must; 0x7FFF is the
    # largest NaN (its rounded exponent field overflows to 0x100); 0x0000 gives byte 0;
    # 0x3F5F/0x3F60 straddle the round-up of the mantissa (fraction 0.75 of a binade rounds
    # up); 0x7F7F/0x7F60 are the largest finite values, whose rounding reaches exponent field
    # 255 (byte 253). One row per maximum, the other block with the opposite sign.
    tops = [0x0000, 0x0001, 0x3F5F, 0x3F60, 0x7F5F, 0x7F60, 0x7F7F, 0x7F80, 0x7F81, 0x7FFF]
    rows = []
    for top in tops:
        row = [0x3C00 + 3 * j for j in range(64)]
        row[5] = top | sign
        row[40] = (top | sign) ^ 0x8000
        rows += row
    _assert_same_as_oracle(_bf16(rows, len(tops), 64, device), impl, widen)


def test_implementation_follows_the_target():
    on_gfx950 = device_info().arch == "gfx950" and not interpret_mode()
    expected = QuantPath.GFX950_CVT if on_gfx950 else QuantPath.PORTABLE
    assert quant_impl() is expected
    assert check_impl(QuantPath.PORTABLE) is QuantPath.PORTABLE  # runs everywhere
    assert check_impl(QuantPath.GFX950_EMULATED) is QuantPath.GFX950_EMULATED  # plain tl
    if not on_gfx950:
        with pytest.raises(ValueError, match="impl=GFX950_CVT cannot run on this device"):
            check_impl(QuantPath.GFX950_CVT)
    with pytest.raises(ValueError, match=r"impl must be a kernels\.targets\.QuantPath"):
        check_impl("fast")


def test_the_quantizer_rule_is_the_registry_s():
    # the interpreter cannot run inline asm, whatever the architecture
    assert quant_path_for("gfx950", interpreted=True) is QuantPath.PORTABLE
    assert quant_path_for("gfx950", interpreted=False) is QuantPath.GFX950_CVT
    assert quant_path_for("sm90", interpreted=False) is QuantPath.PORTABLE
    assert quant_path_for("gfx1100", interpreted=False) is QuantPath.PORTABLE  # unregistered


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (torch.zeros(2, 64), TypeError, "2-D bfloat16"),
        (torch.zeros(2, 96, dtype=torch.bfloat16), ValueError, "multiple of 64"),
        (torch.zeros(64, 2, dtype=torch.bfloat16).T, ValueError, "unit column stride"),
    ],
)
def test_bad_input_is_named(x, error, match):
    with pytest.raises(error, match=match):
        quantize_mxfp4_triton(x)
