"""The two tiers a submission is judged in: what the leaderboard checks, and what the suite adds.

**leaderboard**: what GPU MODE's harness checks (``problems/amd_202602/eval.py`` and
``mxfp4-mm/task.yml`` of gpu-mode/reference-kernels at :data:`HARNESS_COMMIT`; facts, not code):

- its cases: the four test cases and the six benchmark cases of task.yml, with their seeds
  (:data:`TEST_CASES`, :data:`BENCHMARK_CASES`). In leaderboard mode the harness calls each
  benchmark once at its seed and then up to :data:`RECHECKED_CALLS` times more, adding
  :data:`SEED_STEP` to the seed before each, and checks every output; a ranked run also mixes a
  secret ``POPCORN_SEED`` into every seed, which no one outside can reproduce;
- its generator: A (M, K) then B (N, K) bf16 ``randn`` from one generator seeded on the device,
  B quantized and shuffled (:func:`kernels.reference.generate_input`), the packed operands as
  ``float4_e2m1fn_x2`` / ``float8_e8m0fnu`` views where torch has those dtypes, as upstream
  passes them. On a CPU torch's generator is not the GPU's: the values differ, the rule does not;
- the call: ``custom_kernel`` gets a copy of the inputs, the check uses the untouched originals
  (a file that writes its inputs is not caught there);
- its rule (``utils.verbose_allclose`` with ``rtol = atol = 1e-2``): an element fails when
  ``|out - ref|``, in float32, exceeds ``1e-2 + 1e-2 |ref|`` computed in the reference's dtype
  (bf16), or when NaN, +inf or -inf is in one and not the other; an output of another shape
  fails. No mismatch allowance. The reference here is :func:`kernels.reference.reference_gemm`
  (upstream's is aiter's FP4 GEMM, which needs an AMD GPU).

**strict**: the suite's exact semantics (tests/submission/test_strict.py): NaN/inf/subnormal
classes bit for bit, the one-ulp bound, odd shapes, scale padding never read, inputs never
written, outputs never aliased, determinism. A failure there is a :class:`Departure`, named by its
class, the first differing element and the got/want bits.

``python -m perfgate.submission.tiers FILE``: loads FILE and runs the leaderboard tier on this
machine's device (every check, every seed); exit 0 with one line, 1 naming the failing check, 2
when FILE cannot be used. ``bench --submission`` and the ``ab`` sides run it (:func:`check_file`)
before timing anything: a file failing the leaderboard tier is never timed; one departing in the
strict tier is.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernels.shapes import LEADERBOARD, TEST_SHAPES
from perfgate.submission.load import SubmissionError, fresh_process, load_argument

# gpu-mode/reference-kernels: the newest commit that changed problems/amd_202602/eval.py,
# utils.py or mxfp4-mm/ (lab/scripts/gpumode_harness.py pins the files of the same commit)
HARNESS_COMMIT = "1f85fe4e781a97a467405270efb9de6ff1dc0c0f"

# task.yml's cases, (M, N, K, seed): the shapes are kernels.shapes' (written down once there),
# the seeds task.yml's, in the same order
TEST_SEEDS = (124, 6635, 45, 78)
BENCHMARK_SEEDS = (4565, 15, 457, 54, 687, 7856)
TEST_CASES = tuple((*s, seed) for s, seed in zip(TEST_SHAPES, TEST_SEEDS, strict=True))
BENCHMARK_CASES = tuple((*s, seed) for s, seed in zip(LEADERBOARD, BENCHMARK_SEEDS, strict=True))
SEED_STEP = 13  # leaderboard mode: seed += 13 before every timed call
RECHECKED_CALLS = 100  # leaderboard mode: at most 100 timed calls a benchmark, each checked
ATOL = RTOL = 1e-2
PROG = "perfgate submission tiers"


@dataclass(frozen=True)
class Check:
    """One case of the harness: a test case (one checked call) or a benchmark case (one checked
    call at its seed, then the re-seeded timed calls of leaderboard mode)."""

    kind: str  # "test" or "benchmark"
    m: int
    n: int
    k: int
    seed: int

    @property
    def id(self) -> str:
        return f"{self.kind}-m{self.m}-n{self.n}-k{self.k}"

    def seeds(self, device: Any) -> tuple[int, ...]:
        """The seeds whose outputs the harness checks. On a CPU, a benchmark's first only: its
        100 re-seeded calls cost the interpreter minutes (the first seed of all ten cases takes
        about 75 s there, for the exported file)."""
        import torch

        if self.kind == "test" or torch.device(device).type == "cpu":
            return (self.seed,)
        return tuple(self.seed + SEED_STEP * i for i in range(RECHECKED_CALLS + 1))


CHECKS: tuple[Check, ...] = tuple(Check("test", *c) for c in TEST_CASES) + tuple(
    Check("benchmark", *c) for c in BENCHMARK_CASES
)


def upstream_dtypes(data: tuple) -> tuple:
    """The tuple with B_q and B_shuffle viewed as ``float4_e2m1fn_x2`` and B_scale_sh as
    ``float8_e8m0fnu`` (what the harness passes), where this torch has them."""
    import torch

    fp4, e8m0 = getattr(torch, "float4_e2m1fn_x2", None), getattr(torch, "float8_e8m0fnu", None)
    if fp4 is None or e8m0 is None:
        return data
    a, b, b_q, b_shuffle, b_scale_sh = data
    return a, b, b_q.view(fp4), b_shuffle.view(fp4), b_scale_sh.view(e8m0)


def leaderboard_input(m: int, n: int, k: int, seed: int, device: Any) -> tuple:
    """The harness's ``generate_input(m, n, k, seed)``, on ``device``."""
    from kernels.reference import generate_input

    return upstream_dtypes(generate_input(m, n, k, seed, device=device))


def rule_mismatches(out: Any, ref: Any) -> Any:
    """The elements the leaderboard's rule rejects (a bool tensor on ``ref``'s device): out of
    tolerance, or NaN, +inf or -inf in one of ``out`` and ``ref`` only."""
    import torch

    out = out.detach().to(ref.device)
    diff = (out.to(torch.float32) - ref.to(torch.float32)).abs()
    tolerance = ATOL + RTOL * ref.abs()  # in the reference's dtype, as upstream
    bad = diff > tolerance
    for test in (torch.isnan, torch.isposinf, torch.isneginf):
        bad |= test(out) ^ test(ref)
    return bad


def rule_failure(out: Any, ref: Any) -> str | None:
    """None when ``out`` passes the leaderboard's rule against ``ref``; else one line saying how
    many elements fail and the first ones, as the harness does."""
    import torch

    if not isinstance(out, torch.Tensor):
        return f"the output is a {type(out).__name__}, not a tensor"
    if out.shape != ref.shape:
        return f"SIZE MISMATCH: output {tuple(out.shape)}, reference {tuple(ref.shape)}"
    bad = rule_mismatches(out, ref)
    count = int(bad.sum())
    if not count:
        return None
    out = out.detach().to(ref.device)
    first = [tuple(i) for i in bad.nonzero()[:3].tolist()]
    shown = ", ".join(f"{i}: got {float(out[i])!r} want {float(ref[i])!r}" for i in first)
    return f"{count} of {bad.numel()} elements mismatched; first {shown}"


def _clone(data: tuple) -> tuple:
    return tuple(t.clone() for t in data)


def _synchronize(device: Any) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


@dataclass(frozen=True)
class Outcome:
    calls: int  # outputs checked
    failure: str | None  # one line: the seed and what failed, or None


def run_check(custom_kernel: Callable[[Any], Any], check: Check, device: Any) -> Outcome:
    """The harness's calls of one case on ``device``, each output judged by its rule; stops at
    the first failing seed."""
    from kernels.reference import reference_gemm

    seeds = check.seeds(device)
    for i, seed in enumerate(seeds):
        data = leaderboard_input(check.m, check.n, check.k, seed, device)
        _synchronize(device)
        out = custom_kernel(_clone(data))
        _synchronize(device)
        failure = rule_failure(out, reference_gemm(data[0], data[3], data[4]))
        if failure is not None:
            return Outcome(i + 1, f"seed {seed}: {failure}")
    return Outcome(len(seeds), None)


# -- the strict tier's departures ---------------------------------------------------------------
class Departure(AssertionError):
    """Where a submission departs from the suite's exact semantics: the class of input, the
    first differing element (or input byte), its bits and the reference's, how many differ."""

    def __init__(
        self,
        cls: str,
        *,
        element: tuple[int, ...] | None = None,
        got: int | None = None,
        want: int | None = None,
        count: int | None = None,
        total: int | None = None,
        detail: str = "",
    ) -> None:
        self.cls, self.element, self.got, self.want = cls, element, got, want
        self.count, self.total, self.detail = count, total, detail
        super().__init__(self.line())

    def __reduce__(self) -> Any:  # keyword-only fields: pickled by them, not by the message
        fields = {k: getattr(self, k) for k in ("element", "got", "want", "count", "total",
                                                  "detail")}  # fmt: skip
        return _departure, (self.cls, fields)

    def line(self) -> str:
        parts = [f"departs in {self.cls}"]
        if self.element is not None:
            parts.append(f"first at {self.element}: got {_hex(self.got)} want {_hex(self.want)}")
        if self.count is not None:
            parts.append(f"{self.count} of {self.total} differ")
        if self.detail:
            parts.append(self.detail)
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "class": self.cls,
            "element": None if self.element is None else list(self.element),
            "got": _hex(self.got) if self.got is not None else None,
            "want": _hex(self.want) if self.want is not None else None,
            "count": self.count,
            "total": self.total,
            "detail": self.detail,
        }


def _departure(cls: str, fields: dict[str, Any]) -> Departure:
    return Departure(cls, **fields)


def _hex(v: int | None) -> str:
    return "-" if v is None else f"0x{v:04X}"


def bf16_bits(t: Any) -> Any:
    """The 16 bits of a bf16 tensor as int32 values 0..0xFFFF, on the CPU."""
    import torch

    return t.detach().contiguous().cpu().view(torch.int16).to(torch.int32) & 0xFFFF


def bit_departure(cls: str, out: Any, want: Any, detail: str = "") -> Departure | None:
    """None when ``out`` has ``want``'s bits (NaN matched by position: the NaN bits of a GEMM are
    its device's conversion's); else the :class:`Departure` at the first differing element."""
    import torch

    if not isinstance(out, torch.Tensor) or out.dtype != torch.bfloat16 or out.shape != want.shape:
        got = (
            f"{out.dtype} {tuple(out.shape)}"
            if isinstance(out, torch.Tensor)
            else type(out).__name__
        )
        return Departure(cls, detail=f"output is {got}, want bfloat16 {tuple(want.shape)}")
    out_bits, want_bits = bf16_bits(out), bf16_bits(want)
    out_nan, want_nan = torch.isnan(out.detach().cpu()), torch.isnan(want.detach().cpu())
    bad = (out_nan != want_nan) | (~want_nan & (out_bits != want_bits))
    if not bool(bad.any()):
        return None
    first = tuple(bad.nonzero()[0].tolist())
    return Departure(cls, element=first, got=int(out_bits[first]), want=int(want_bits[first]),
                     count=int(bad.sum()), total=bad.numel(), detail=detail)  # fmt: skip


def require_same_bits(cls: str, out: Any, want: Any, detail: str = "") -> None:
    """Raise :func:`bit_departure`'s departure, if there is one."""
    departure = bit_departure(cls, out, want, detail)
    if departure is not None:
        raise departure


# -- a file checked in a fresh process (bench --submission, the ab sides) -------------------------
class TierFailure(Exception):
    """The file fails the leaderboard tier; the message names the check (one line)."""


def check_file(path: str | Path, *, timeout_s: float = 1800.0) -> str:
    """The leaderboard tier on ``path`` in a fresh process on this machine's device: its one-line
    verdict; TierFailure naming the failing check, SubmissionError for an unusable file."""
    done = fresh_process("perfgate.submission.tiers", path, timeout_s=timeout_s)
    lines = [ln for ln in (done.stderr or "").splitlines() if ln.strip()]
    last = lines[-1] if lines else f"the check exited {done.returncode}"
    if done.returncode == 1:
        raise TierFailure(last.removeprefix(f"{PROG}: "))
    if done.returncode != 0:
        raise SubmissionError(last.removeprefix(f"{PROG}: error: "))
    return done.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    """``python -m perfgate.submission.tiers FILE``: the leaderboard tier on this device."""
    import torch

    sub = load_argument(argv, "perfgate.submission.tiers", PROG)
    if sub is None:
        return 2
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    calls = 0
    for check in CHECKS:
        try:
            outcome = run_check(sub.custom_kernel, check, device)
        except Exception as exc:  # the file's own error, on the harness's input
            outcome = Outcome(1, " ".join(f"raised {type(exc).__name__}: {exc}".split()))
        calls += outcome.calls
        if outcome.failure is not None:
            print(
                f"{PROG}: {sub.path} fails the leaderboard tier: {check.id} {outcome.failure}",
                file=sys.stderr,
            )
            return 1
    print(
        f"perfgate: {sub.path} passes the leaderboard tier on {device.type} "
        f"({len(CHECKS)} checks, {calls} calls checked)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
