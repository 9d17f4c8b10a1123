"""Split-K reduction: sum fp32 partials (S, M, N) over S into a bf16 (M, N) output.

:func:`reduce_partials` is what the GEMM launcher calls. It runs the native reducer
(``kernels/reducer/splitk_reduce.cu``, built ahead of time by ``nox -s build``) when a build for
this device's architecture exists, and the Triton twin (:mod:`kernels._reduce_kernel`)
otherwise. Both sum in split order 0..S-1 in fp32 and round to bf16 RNE with the same integer
formula, so they give the same bits, NaN included (every NaN is
:data:`CANONICAL_NAN_BITS`, 0x7FC0).

The choice is made once per device, logged once (logger ``kernels.splitk``) and queryable with
:func:`reducer_backend`. ``MXFP4_REQUIRE_NATIVE_REDUCER=1`` (set on GPU CI runners) turns a
missing native reducer into a RuntimeError instead of a fallback. Importing this module never
compiles anything.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from kernels.device import check_kernel_device, device_info, gpu_available

log = logging.getLogger(__name__)

REQUIRE_NATIVE_ENV = "MXFP4_REQUIRE_NATIVE_REDUCER"
BACKENDS = ("native", "triton")
# Tile of the Triton reducer: 4 rows x 512 columns = 2048 outputs per program (8 KiB of fp32 per
# partial plane), enough bytes in flight per program for a memory-bound sum at M as small as 4.
BLOCK_M = 4
BLOCK_N = 512
NUM_WARPS = 4
# The reducers' NaN contract: every NaN output is this positive quiet NaN. An fp32 sum that meets
# a NaN has the hardware's sign and payload (an NVIDIA add returns 0x7FFFFFFF, x86 and AMD keep a
# quieted operand), so no other choice gives the same bits on every backend.
CANONICAL_NAN_BITS = 0x7FC0


@dataclass(frozen=True)
class _Choice:
    backend: str  # "native" or "triton"
    reason: str  # why (the library path, or why native is unavailable)
    native: object | None = None  # kernels.reducer.native.NativeReducer


_choices: dict[str, _Choice] = {}


def _require_native() -> bool:
    """MXFP4_REQUIRE_NATIVE_REDUCER read as perfgate reads every on/off variable (its
    perfgate.flags rule, written again here: kernels imports nothing of the suite): 1/true/yes/on,
    0/false/no/off or empty, any case; anything else is an error, never a guess."""
    raw = os.environ.get(REQUIRE_NATIVE_ENV)
    value = "" if raw is None else raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise RuntimeError(
        f"{REQUIRE_NATIVE_ENV} must be one of 1, true, yes, on (on) or 0, false, no, off or "
        f"empty (off), got {raw!r}"
    )


def _device_key(device: torch.device | None) -> tuple[str, int | None]:
    if device is None:
        if not gpu_available():
            return "cpu", None
        return "cuda", torch.cuda.current_device()
    device = torch.device(device)
    if device.type == "cuda":
        return "cuda", device.index if device.index is not None else torch.cuda.current_device()
    return device.type, None


def _decide(kind: str, index: int | None) -> _Choice:
    from kernels.reducer import native

    if kind != "cuda":
        reason = f"no native reducer for {kind} tensors (it runs on a CUDA or ROCm GPU)"
    else:
        arch = device_info(index).arch
        try:
            lib = native.load(arch)
            return _Choice("native", f"{lib.path} ({arch})", lib)
        except native.NativeUnavailable as exc:
            reason = str(exc)
    if _require_native():
        raise RuntimeError(
            f"{REQUIRE_NATIVE_ENV} is set but the native split-K reducer is unavailable: {reason}. "
            "Build it with `nox -s build` (or `python -m kernels.reducer.build`)."
        )
    return _Choice("triton", reason)


def _choice(device: torch.device | None) -> _Choice:
    kind, index = _device_key(device)
    key = f"{kind}:{index}" if index is not None else kind
    choice = _choices.get(key)
    if choice is None:
        choice = _decide(kind, index)
        _choices[key] = choice
        log.info("split-K reducer on %s: %s (%s)", key, choice.backend, choice.reason)
    return choice


def reducer_backend(device: torch.device | str | None = None) -> str:
    """``"native"`` or ``"triton"``: the reducer :func:`reduce_partials` uses on ``device``
    (default: the current GPU, or the CPU under the interpreter). Raises RuntimeError when
    ``MXFP4_REQUIRE_NATIVE_REDUCER=1`` and no native reducer is built for it."""
    return _choice(device).backend


def reducer_backend_reason(device: torch.device | str | None = None) -> str:
    """Why :func:`reducer_backend` chose what it chose (library path, or what is missing)."""
    return _choice(device).reason


def reset_backend_choice() -> None:
    """Forget the per-device choices (tests; after building while the process runs)."""
    _choices.clear()


# ---- validation --------------------------------------------------------------------------------


def _check_args(partials: torch.Tensor, out: torch.Tensor) -> tuple[int, int, int]:
    if not isinstance(partials, torch.Tensor):
        raise TypeError(f"partials must be a torch.Tensor, got {type(partials).__name__}")
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if partials.dtype != torch.float32:
        raise TypeError(f"partials must be float32, got {partials.dtype}")
    if out.dtype != torch.bfloat16:
        raise TypeError(f"out must be bfloat16, got {out.dtype}")
    if partials.dim() != 3:
        raise ValueError(f"partials must be 3-D (S, M, N), got shape {tuple(partials.shape)}")
    s, m, n = partials.shape
    if s < 1:
        raise ValueError(
            f"partials must hold at least one split (S >= 1), got shape {tuple(partials.shape)}"
        )
    if not partials.is_contiguous():
        raise ValueError(f"partials must be contiguous, got strides {partials.stride()}")
    if tuple(out.shape) != (m, n):
        raise ValueError(
            f"out must have shape (M, N) = {(m, n)} to match partials, got {tuple(out.shape)}"
        )
    if n > 1 and out.stride(1) != 1:
        raise ValueError(f"out must have unit column stride, got strides {out.stride()}")
    if m > 1 and out.stride(0) < n:
        raise ValueError(f"out rows overlap: row stride {out.stride(0)} < N = {n}")
    if out.device != partials.device:
        raise ValueError(f"out is on {out.device} but partials is on {partials.device}")
    if (
        out.numel()
        and partials.numel()
        and out.untyped_storage().data_ptr() == partials.untyped_storage().data_ptr()
    ):
        raise ValueError("out shares storage with partials; the reduction cannot run in place")
    check_kernel_device(partials, "partials")
    return s, m, n


# ---- the reduction -----------------------------------------------------------------------------


def _current_stream(index: int) -> int:
    # The raw-stream getter is what Triton's own launcher uses: a plain int, no Stream object.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


def _reduce_triton(partials: torch.Tensor, out: torch.Tensor, s: int, m: int, n: int) -> None:
    import triton

    from kernels._reduce_kernel import splitk_reduce_kernel

    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    splitk_reduce_kernel[grid](
        partials, out, m, n, out.stride(0), m * n, s,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS,
    )  # fmt: skip


def reduce_partials(
    partials: torch.Tensor, out: torch.Tensor, *, backend: str | None = None
) -> torch.Tensor:
    """``out[m, n] = bf16_rne(sum over s in 0..S-1 of partials[s, m, n])``, summed in fp32 in
    split order; returns ``out``. ``partials``: fp32 (S, M, N) contiguous; ``out``: bf16 (M, N)
    with unit column stride and any row stride >= N.

    ``backend`` (one of :data:`BACKENDS`) forces a reducer instead of :func:`reducer_backend`'s
    choice, for tools that compare them; ``"native"`` raises RuntimeError when none is built."""
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)} or None, got {backend!r}")
    s, m, n = _check_args(partials, out)
    if m == 0 or n == 0:
        return out
    choice = _choice(partials.device)
    if backend == "native" and choice.native is None:
        raise RuntimeError(f"no native split-K reducer for {partials.device}: {choice.reason}")
    if (backend or choice.backend) == "native":
        index = partials.device.index
        ldo = out.stride(0) if m > 1 else n  # a lone row's stride is meaningless
        if index == torch.cuda.current_device():
            choice.native(partials.data_ptr(), out.data_ptr(), s, m, n, ldo, _current_stream(index))
        else:  # the C launcher launches on the current device
            with torch.cuda.device(index):
                choice.native(
                    partials.data_ptr(), out.data_ptr(), s, m, n, ldo, _current_stream(index)
                )
    else:
        _reduce_triton(partials, out, s, m, n)
    return out


class BoundReduction(NamedTuple):
    """A reduction of one workspace on one stream, checked and chosen once (:func:`bind_reducer`).

    Exactly one of ``launch`` and ``fallback`` is set. ``launch(out_ptr) -> code`` is the native
    reducer's planned launch (pass a nonzero code to ``check``); ``fallback(out)`` runs the
    Triton twin where no native build exists (Triton's JIT path: the slow path anyway)."""

    launch: Callable[[int], int] | None
    check: Callable[[int], None] | None
    fallback: Callable[[torch.Tensor], None] | None


def bind_reducer(
    partials: torch.Tensor, out: torch.Tensor, ldo: int, stream: int
) -> BoundReduction:
    """The reduction of ``partials`` into outputs like ``out`` (its dtype, shape, strides and
    device) on ``stream``, checked and chosen once. For a caller that reuses ``partials`` on one
    stream (the GEMM launcher's per-stream workspace) and has checked that each output has
    ``out``'s layout; ``ldo`` is that layout's row stride. The caller keeps ``partials`` alive."""
    s, m, n = _check_args(partials, out)
    choice = _choice(partials.device)
    if m == 0 or n == 0:
        return BoundReduction(None, None, lambda out: None)
    if choice.backend == "native":
        native = choice.native
        ldo = ldo if m > 1 else n  # a lone row's stride is meaningless
        return BoundReduction(
            native.plan(partials.data_ptr(), s, m, n, ldo, stream), native.check, None
        )
    return BoundReduction(None, None, lambda out: _reduce_triton(partials, out, s, m, n))


def reduce_partials_reference(partials: torch.Tensor) -> torch.Tensor:
    """The torch oracle: fp32 sum in split order 0..S-1 (starting from partial 0 itself, so -0
    survives S == 1), then ``.to(torch.bfloat16)``, which rounds to nearest even, and every NaN
    written as :data:`CANONICAL_NAN_BITS`, as both reducers write it."""
    if (
        not isinstance(partials, torch.Tensor)
        or partials.dtype != torch.float32
        or partials.dim() != 3
    ):
        raise TypeError("partials must be a float32 torch.Tensor of shape (S, M, N)")
    if partials.shape[0] < 1:
        raise ValueError("partials must hold at least one split (S >= 1)")
    acc = partials[0].clone()
    for s in range(1, partials.shape[0]):
        acc = acc + partials[s]
    out = acc.to(torch.bfloat16)
    out.view(torch.int16)[torch.isnan(out)] = CANONICAL_NAN_BITS
    return out


# ---- static ISA gate -----------------------------------------------------------------------------


def compile_specs(target: str) -> list:
    """The Triton reducer specialisation that :func:`reduce_partials` launches, for the static
    ISA gate (``target``: a name in :data:`kernels.targets.TARGETS`). The native reducer's assembly comes from
    :func:`kernels.reducer.build.device_asm`."""
    from kernels.compile import CompileSpec
    from kernels.targets import get_target

    get_target(target)  # a clear error for an unknown target
    from kernels._reduce_kernel import splitk_reduce_kernel

    signature = {
        "partials_ptr": "*fp32",
        "out_ptr": "*bf16",
        "M": "i32",
        "N": "i32",
        "stride_om": "i32",
        "stride_ps": "i32",
        "S": "i32",
        "BLOCK_M": "constexpr",
        "BLOCK_N": "constexpr",
    }
    return [
        CompileSpec(
            name="splitk_reduce",
            fn=splitk_reduce_kernel,
            signature=signature,
            constexprs={"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N},
            num_warps=NUM_WARPS,
            num_stages=1,
            config={"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "num_warps": NUM_WARPS},
        )
    ]
