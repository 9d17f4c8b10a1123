"""On a GPU: each kernel's share of one call's device time (which kernel of the call got
slower: the GEMM, with the quantizer fused in it, or the split-K reducer).

The child (:mod:`perfgate.explain.child`, part ``device``) runs ``custom_kernel`` on the
benchmark's inputs under ``torch.profiler`` (device activity), each call after a cache flush,
and reads every kernel's device time from the trace. The flush is this module's own launch, so
the trace is cut into rounds exactly: a calibration trace of the flush alone says how many
kernels one flush launches (``nf``); the measured trace, in device start order, is then
``rounds`` blocks of ``nf`` flush kernels followed by the call's kernels, the same number in
every round (a call whose kernel count varies is refused: the split would be guesswork). Per
kernel of the call: the median over rounds; the call: the median of first-start to last-end
(the gaps between its kernels included). The parent alternates the two sides' children
(:func:`perfgate.explain.revision.device_facts`), so both are measured side by side in one run.
"""

from __future__ import annotations

import statistics
from typing import Any

FLUSH_BYTES = 512 << 20  # larger than the H200's 60 MB L2 and MI355X's 256 MB Infinity Cache
WARMUP_CALLS = 5


class SplitError(RuntimeError):
    """The trace cannot be cut into rounds (one line)."""


def kernel_role(name: str) -> str:
    """Which part of the call a kernel is, by its name."""
    low = name.lower()
    if "gemm" in low:
        return "GEMM kernel (quantizer fused)"
    if "reduce" in low or "splitk" in low:
        return "split-K reducer"
    if "quant" in low:
        return "quantizer"
    return f"other kernel {name}"


def split_rounds(
    kernels: list[tuple[str, float, float]], rounds: int, per_flush: int
) -> dict[str, Any]:
    """Per-kernel and per-call device times from ``kernels`` ((name, start, end) in device start
    order, microseconds) of ``rounds`` rounds, each ``per_flush`` flush kernels then the call's."""
    if rounds < 1 or per_flush < 0 or len(kernels) % rounds:
        raise SplitError(
            f"{len(kernels)} kernels in the trace do not split into {rounds} equal rounds"
        )
    size = len(kernels) // rounds
    calls = size - per_flush
    if calls < 1:
        raise SplitError("the trace holds no kernel of the call besides the flush")
    names = None
    per_kernel: list[list[float]] = [[] for _ in range(calls)]
    call_times = []
    for r in range(rounds):
        block = kernels[r * size + per_flush : (r + 1) * size]
        these = [name for name, _, _ in block]
        if names is None:
            names = these
        elif these != names:
            raise SplitError(f"round {r} launched {these}, round 0 {names}: not the same call")
        for i, (_, start, end) in enumerate(block):
            per_kernel[i].append(end - start)
        call_times.append(block[-1][2] - block[0][1])
    assert names is not None
    rows = []
    for i, name in enumerate(names):
        rows.append(
            {
                "name": name,
                "role": kernel_role(name),
                "median_us": statistics.median(per_kernel[i]),
                "samples_us": per_kernel[i],
            }
        )
    return {
        "kernels": rows,
        "call_median_us": statistics.median(call_times),
        "call_samples_us": call_times,
        "rounds": rounds,
    }


def _device_kernels(prof: Any) -> list[tuple[str, float, float]]:
    import torch

    out = []
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            out.append((e.name, float(e.time_range.start), float(e.time_range.end)))
    return sorted(out, key=lambda k: k[1])


def device_split(shape: tuple[int, int, int], rounds: int) -> dict[str, Any]:
    """The split of ``shape``'s call on this GPU, ``rounds`` flushed calls (the child)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kernels.gemm import custom_kernel
    from kernels.reference import generate_input

    if not torch.cuda.is_available():
        raise SplitError("no GPU: the device split is measured on one")
    data = generate_input(*shape, seed=0, device="cuda")
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for _ in range(WARMUP_CALLS):
        flush.zero_()
        custom_kernel(data)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as alone:
        flush.zero_()
        torch.cuda.synchronize()
    per_flush = len(_device_kernels(alone))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(rounds):
            flush.zero_()
            custom_kernel(data)
        torch.cuda.synchronize()
    return split_rounds(_device_kernels(prof), rounds, per_flush)
