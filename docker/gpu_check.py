#!/usr/bin/env python3
"""Refuse to run the suite in this container unless torch sees the expected AMD GPU.

Run by the image's entrypoint before every command, so a job on a runner whose GPU is not
visible fails at once with a reason instead of skipping every GPU test. Exit status 0 when every
visible GPU is ``$PERFGATE_EXPECT_ARCH`` (default gfx950), 3 otherwise.
"""

from __future__ import annotations

import os
import sys

EXIT_NO_GPU = 3


class GpuCheckError(Exception):
    """The container cannot run GPU work; the message says why and what to change."""


def check(torch, expected_arch: str, kfd_present: bool) -> str:
    """One-line summary of the visible GPUs; GpuCheckError if any is missing or wrong."""
    if not kfd_present:
        raise GpuCheckError(
            "/dev/kfd is missing in the container: start it with --device /dev/kfd "
            "--device /dev/dri (`python -m perfgate container` does) on a host with the amdgpu driver"
        )
    if torch.version.hip is None:
        raise GpuCheckError(
            f"torch {torch.__version__} is not a ROCm build (torch.version.hip is None)"
        )
    if not torch.cuda.is_available():
        raise GpuCheckError(
            "torch sees no GPU although /dev/kfd exists: the container needs the host's video and "
            "render group ids (--group-add, numeric) and --security-opt seccomp=unconfined; check "
            f"HIP_VISIBLE_DEVICES={os.environ.get('HIP_VISIBLE_DEVICES', '<unset>')!s} and "
            f"ROCR_VISIBLE_DEVICES={os.environ.get('ROCR_VISIBLE_DEVICES', '<unset>')!s}"
        )
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found.append((props.name, props.gcnArchName.split(":")[0]))
    wrong = [
        f"GPU {i}: {name} is {arch}"
        for i, (name, arch) in enumerate(found)
        if arch != expected_arch
    ]
    if wrong:
        raise GpuCheckError(
            f"expected every visible GPU to be {expected_arch} but {'; '.join(wrong)} "
            "(set PERFGATE_EXPECT_ARCH to test another architecture on purpose)"
        )
    names = sorted({name for name, _ in found})
    return (
        f"GPU check passed: {len(found)} x {', '.join(names)} ({expected_arch}); "
        f"torch {torch.__version__}, HIP {torch.version.hip}"
    )


def main() -> int:
    expected = os.environ.get("PERFGATE_EXPECT_ARCH", "gfx950")
    try:
        import torch

        print(check(torch, expected, os.path.exists("/dev/kfd")), flush=True)
    except GpuCheckError as exc:
        print(f"perfgate GPU check FAILED: {exc}", file=sys.stderr, flush=True)
        return EXIT_NO_GPU
    return 0


if __name__ == "__main__":
    sys.exit(main())
