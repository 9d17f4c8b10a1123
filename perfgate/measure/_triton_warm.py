"""A trivial Triton kernel a measuring worker launches once at start-up: the first Triton launch
of a process loads the driver's utilities and the launcher (0.7 s on the H200, 2026-12-01), work
that would otherwise land in its first prepare, one worker after another."""

import triton
import triton.language as tl


@triton.jit
def touch(ptr):
    tl.store(ptr, 1)
