"""Bit-for-bit comparison of tensors, for the tests that the README says are bit for bit.

``torch.equal`` and ``assert_close(rtol=0, atol=0)`` compare values: ``-0.0 == +0.0`` passes and
a NaN never equals a NaN (``assert_close`` then matches NaN by position only). These helpers
compare the bit patterns instead, so a sign lost on a zero or a different NaN fails.
"""

from __future__ import annotations

import torch

# a float dtype -> the integer dtype of its width, for .view()
_INT_OF_WIDTH = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` (on the CPU, contiguous) as the integers of its bit patterns."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bool or not (t.dtype.is_floating_point or t.dtype.is_complex):
        return t
    return t.view(_INT_OF_WIDTH[t.element_size()])


def bit_mismatch(got: torch.Tensor, want: torch.Tensor, *, nan_by_position: bool = False):
    """None when ``got`` and ``want`` have the same dtype, shape and bits; else a description of
    the first differences. ``nan_by_position``: a NaN matches any NaN (for outputs whose NaN bits
    are not specified); every other element, zeros' signs included, still bit for bit."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape differ: {got.dtype} {tuple(got.shape)} vs {want.dtype} {tuple(want.shape)}"
    g, w = bits(got), bits(want)
    bad = g != w
    if nan_by_position and got.dtype.is_floating_point:
        g_nan, w_nan = torch.isnan(got.cpu()), torch.isnan(want.cpu())
        bad = (g_nan != w_nan) | (bad & ~w_nan)
    if not bool(bad.any()):
        return None
    width = 2 * got.element_size()
    mask = (1 << (8 * got.element_size())) - 1
    first = bad.nonzero()[:5].tolist()
    details = ", ".join(
        f"{tuple(i)}: got 0x{int(g[tuple(i)]) & mask:0{width}X} "
        f"want 0x{int(w[tuple(i)]) & mask:0{width}X}"
        for i in first
    )
    return f"{int(bad.sum())} of {bad.numel()} elements differ; first: {details}"


def assert_bits_equal(got: torch.Tensor, want: torch.Tensor, *, nan_by_position=False, what=""):
    """Assert ``got`` equals ``want`` bit for bit (see :func:`bit_mismatch`)."""
    mismatch = bit_mismatch(got, want, nan_by_position=nan_by_position)
    assert mismatch is None, f"{what}: {mismatch}" if what else mismatch
