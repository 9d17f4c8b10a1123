"""The suite's stand-in for GPU MODE's ``mxfp4-mm/reference.py``, which imports AMD's aiter (absent
on NVIDIA). ``lab.scripts.gpumode_harness`` copies this file as ``reference.py`` beside the harness's
own, unchanged ``eval.py`` and ``utils.py``; it is the suite's code, not theirs.

The interface and semantics eval.py relies on:

- ``generate_input(m, n, k, seed)``: on cuda, one generator seeded with ``seed``, A (M, K) then
  B (N, K) bf16 ``randn``, B quantized and shuffled; B_q and B_shuffle as ``float4_e2m1fn_x2``,
  B_scale_sh as ``float8_e8m0fnu`` (:func:`perfgate.submission.tiers.leaderboard_input`);
- ``check_implementation(data, output) -> (bool, str)``: their ``utils.make_match_reference``
  with ``rtol = atol = 1e-2``, as their reference.py builds it, around the suite's reference
  GEMM (:func:`kernels.reference.reference_gemm`) in place of aiter's ``gemm_a4w4``.

The checkout must be importable (lab.scripts.gpumode_harness puts it on PYTHONPATH).
"""

from utils import make_match_reference  # the harness's utils.py, beside this file

from kernels.reference import reference_gemm
from perfgate.submission.tiers import ATOL, RTOL, leaderboard_input

DEVICE = "cuda"  # upstream's generator runs there


def generate_input(m: int, n: int, k: int, seed: int):
    return leaderboard_input(m, n, k, seed, DEVICE)


def ref_kernel(data):
    a, _, _, b_shuffle, b_scale_sh = data
    return reference_gemm(a, b_shuffle, b_scale_sh)


check_implementation = make_match_reference(ref_kernel, rtol=RTOL, atol=ATOL)
