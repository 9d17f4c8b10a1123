"""The pre-shuffled weight and scale layouts the kernel reads (task-facts sections 4 and 5).

- Weights, layout (16,16): the (N, K/2) byte matrix is cut into 16-row x 32-byte blocks; each
  becomes one 512-byte tile ordered [half (2)][row (16)][16 bytes]. Byte (n, kb) lands at
  ``(n//16)*16*Kb + (kb//32)*512 + ((kb%32)//16)*256 + (n%16)*16 + kb%16``.
- Scales: the (N, K/32) E8M0 matrix is padded to (ceil(N/256)*256, ceil(K/32/8)*8), then
  permuted so byte (r, c) lands at
  ``(r//32)*32*Sp + (c//8)*256 + (c%4)*64 + (r%16)*4 + ((c%8)//4)*2 + (r%32)//16``.

Padding: upstream leaves it uninitialised. Here it is filled with ``SCALE_PAD`` = 0xFF, the E8M0
NaN, so that a kernel that ever reads padding for a valid row produces NaN and fails loudly
instead of passing by luck with zeros. Tests poison it again to be sure.

Every function takes uint8 tensors or torch's ``float4_e2m1fn_x2`` / ``float8_e8m0fnu`` views and
returns the dtype it was given.
"""

from __future__ import annotations

import torch

from kernels.mxfp4 import as_uint8

SCALE_PAD = 0xFF
SCALE_ROW_PAD = 256
SCALE_COL_PAD = 8
TILE_ROWS = 16  # weight tile: 16 rows ...
TILE_BYTES = 32  # ... x 32 bytes (64 fp4 values)


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def _check_2d(t: torch.Tensor, name: str) -> None:
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")


def _weight_bytes(w: torch.Tensor, name: str) -> tuple[torch.Tensor, int, int]:
    """``w`` as a uint8 (N, K/2) matrix that whole 16-row x 32-byte tiles cover, and N, K/2."""
    b = as_uint8(w, name)
    _check_2d(b, name)
    n, kb = b.shape
    if n % TILE_ROWS or kb % TILE_BYTES:
        raise ValueError(
            f"{name} must have N % {TILE_ROWS} == 0 and K/2 % {TILE_BYTES} == 0 (K % 64 == 0); "
            f"got shape {tuple(b.shape)}"
        )
    return b, n, kb


def shuffle_weight(w: torch.Tensor) -> torch.Tensor:
    """(N, K/2) packed fp4 bytes -> the (16,16) shuffled layout, same shape and dtype."""
    b, n, kb = _weight_bytes(w, "w")
    out = b.reshape(n // 16, 16, kb // 32, 2, 16).permute(0, 2, 3, 1, 4).contiguous()
    return out.view(n, kb).view(w.dtype)


def unshuffle_weight(w_sh: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`shuffle_weight`."""
    b, n, kb = _weight_bytes(w_sh, "w_sh")
    out = b.reshape(n // 16, kb // 32, 2, 16, 16).permute(0, 3, 1, 2, 4).contiguous()
    return out.view(n, kb).view(w_sh.dtype)


def padded_scale_shape(n: int, k: int) -> tuple[int, int]:
    """Shape of the shuffled scales for an (N, K) weight: rows to 256, K/32 columns to 8."""
    return _ceil_to(n, SCALE_ROW_PAD), _ceil_to(k // 32, SCALE_COL_PAD)


def shuffle_scales(scales: torch.Tensor, *, pad_value: int = SCALE_PAD) -> torch.Tensor:
    """(N, K/32) E8M0 bytes -> padded and shuffled (ceil(N/256)*256, ceil(K/32/8)*8)."""
    s = as_uint8(scales, "scales")
    _check_2d(s, "scales")
    if not 0 <= pad_value <= 255:
        raise ValueError(f"pad_value must be a byte (0..255), got {pad_value}")
    n, c = s.shape
    np_, sp = _ceil_to(n, SCALE_ROW_PAD), _ceil_to(c, SCALE_COL_PAD)
    padded = torch.full((np_, sp), pad_value, dtype=torch.uint8, device=s.device)
    padded[:n, :c] = s
    out = padded.view(np_ // 32, 2, 16, sp // 8, 2, 4).permute(0, 3, 5, 2, 4, 1).contiguous()
    return out.view(np_, sp).view(scales.dtype)


def unshuffle_scales(scales_sh: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """Inverse of :func:`shuffle_scales`, cropped to the (N, K/32) scales of an (N, K) weight."""
    s = as_uint8(scales_sh, "scales_sh")
    _check_2d(s, "scales_sh")
    if n < 0 or k < 0 or k % 32:
        raise ValueError(f"n must be >= 0 and k a non-negative multiple of 32; got n={n}, k={k}")
    expected = padded_scale_shape(n, k)
    if tuple(s.shape) != expected:
        raise ValueError(
            f"scales_sh must have the padded shape {expected} for n={n}, k={k}; got {tuple(s.shape)}"
        )
    np_, sp = expected
    out = s.reshape(np_ // 32, sp // 8, 4, 16, 2, 2).permute(0, 5, 3, 1, 4, 2).contiguous()
    return out.view(np_, sp)[:n, : k // 32].contiguous().view(scales_sh.dtype)
