"""Weight and scale shuffles against the byte-offset formulas of task-facts sections 4 and 5."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.layout import (
    padded_scale_shape,
    shuffle_scales,
    shuffle_weight,
    unshuffle_scales,
    unshuffle_weight,
)
from tests.bits import assert_bits_equal


def _weight_offset(n: int, kb: int, big_kb: int) -> int:
    return (
        (n // 16) * 16 * big_kb
        + (kb // 32) * 512
        + ((kb % 32) // 16) * 256
        + (n % 16) * 16
        + kb % 16
    )


def _scale_offset(r: int, c: int, sp: int) -> int:
    return (
        (r // 32) * 32 * sp
        + (c // 8) * 256
        + (c % 4) * 64
        + (r % 16) * 4
        + ((c % 8) // 4) * 2
        + (r % 32) // 16
    )


def _distinct_bytes(rows: int, cols: int) -> torch.Tensor:
    # int32 "bytes" would hide nothing, but the functions take uint8: use two planes so that
    # every source position is identifiable (value = row*cols + col split into hi/lo bytes).
    idx = torch.arange(rows * cols).reshape(rows, cols)
    return idx


@given(st.integers(1, 4), st.integers(1, 4))
def test_weight_shuffle_matches_the_offset_formula(n_tiles, k_tiles):
    n, kb = 16 * n_tiles, 32 * k_tiles
    idx = _distinct_bytes(n, kb)
    lo = shuffle_weight((idx % 256).to(torch.uint8)).flatten().long()
    hi = shuffle_weight((idx // 256).to(torch.uint8)).flatten().long()
    got = hi * 256 + lo  # got[offset] = source index that landed there
    expected = torch.empty(n * kb, dtype=torch.long)
    for r in range(n):
        for c in range(kb):
            expected[_weight_offset(r, c, kb)] = r * kb + c
    assert_bits_equal(got, expected)


@given(st.integers(1, 300), st.integers(1, 20))
def test_scale_shuffle_matches_the_offset_formula_and_pads(n, cols):
    idx = _distinct_bytes(n, cols)
    np_, sp = padded_scale_shape(n, 32 * cols)
    lo = shuffle_scales((idx % 256).to(torch.uint8)).flatten()
    hi = shuffle_scales((idx // 256).to(torch.uint8)).flatten()
    assert lo.numel() == np_ * sp and np_ % 256 == 0 and sp % 8 == 0
    is_data = torch.zeros(np_ * sp, dtype=torch.bool)
    for r in range(n):
        for c in range(cols):
            off = _scale_offset(r, c, sp)
            assert int(hi[off]) * 256 + int(lo[off]) == r * cols + c
            is_data[off] = True
    # every other byte is padding, and padding holds the fill of the spec: 0xFF, the E8M0 NaN
    assert bool((lo[~is_data] == 0xFF).all()) and bool((hi[~is_data] == 0xFF).all())
    assert int(is_data.sum()) == n * cols


@given(st.integers(1, 8), st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_weight_round_trip(n_tiles, k_tiles, seed):
    w = torch.randint(
        0,
        256,
        (16 * n_tiles, 32 * k_tiles),
        dtype=torch.uint8,
        generator=torch.Generator().manual_seed(seed),
    )
    assert_bits_equal(unshuffle_weight(shuffle_weight(w)), w)


@given(st.integers(1, 600), st.integers(1, 40), st.integers(0, 255))
def test_scale_round_trip_never_returns_padding(n, cols, pad):
    # Data values avoid the pad byte so that a padding byte leaking back would be visible.
    s = torch.full((n, cols), (pad + 1) % 256, dtype=torch.uint8)
    s[::3] = (pad + 2) % 256
    back = unshuffle_scales(shuffle_scales(s, pad_value=pad), n, 32 * cols)
    assert back.shape == (n, cols)
    assert_bits_equal(back, s)


def test_torch_fp4_and_e8m0_views_keep_their_dtype():
    w = torch.randint(0, 256, (32, 64), dtype=torch.uint8)
    ws = shuffle_weight(w.view(torch.float4_e2m1fn_x2))
    assert ws.dtype == torch.float4_e2m1fn_x2
    assert_bits_equal(ws.view(torch.uint8), shuffle_weight(w))
    assert_bits_equal(unshuffle_weight(ws).view(torch.uint8), w)
    s = torch.randint(0, 255, (32, 4), dtype=torch.uint8)
    ss = shuffle_scales(s.view(torch.float8_e8m0fnu))
    assert ss.dtype == torch.float8_e8m0fnu
    assert_bits_equal(unshuffle_scales(ss, 32, 128).view(torch.uint8), s)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: shuffle_weight(torch.zeros(24, 32, dtype=torch.uint8)),
            ValueError,
            r"N % 16 == 0",
        ),
        (
            lambda: shuffle_weight(torch.zeros(16, 48, dtype=torch.uint8)),
            ValueError,
            r"K/2 % 32 == 0",
        ),
        (
            lambda: shuffle_weight(torch.zeros(16, 32, dtype=torch.int32)),
            TypeError,
            "w must have dtype",
        ),
        (
            lambda: shuffle_weight(torch.zeros(2, 16, 32, dtype=torch.uint8)),
            ValueError,
            "w must be 2-D",
        ),
        (
            lambda: unshuffle_weight(torch.zeros(16, 40, dtype=torch.uint8)),
            ValueError,
            "w_sh must have",
        ),
        (
            lambda: shuffle_scales(torch.zeros(4, 4, dtype=torch.uint8), pad_value=256),
            ValueError,
            "pad_value",
        ),
        (
            lambda: unshuffle_scales(torch.zeros(256, 8, dtype=torch.uint8), 4, 512),
            ValueError,
            r"padded shape \(256, 16\)",
        ),
        (
            lambda: unshuffle_scales(torch.zeros(256, 8, dtype=torch.uint8), 4, 40),
            ValueError,
            "multiple of 32",
        ),
    ],
)
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
