"""A case made ready to time: its inputs, reference outputs, output checks and launch.

The pytest plugin (every stored-baseline benchmark) and the A/B worker (``perfgate ab``, the
experiment) prepare a case through :func:`prepare` and :func:`batched_launch`, so both gates time
the same calls on the same inputs (seeds ``SEED_BASE``..), checked the same way, before any timing:
a wrong kernel can never make a sample.

The GEMM under test is the package's by default; given a loaded submission file
(:class:`perfgate.submission.load.Submission`), it is that file's ``custom_kernel``: leaderboard
and host mode call it as for the package, and device mode captures one ``custom_kernel(data)``
per input copy (a submission has no ``gemm_a16wfp4`` entry), each allocating its own output. The
inputs, references and checks stay this checkout's (``kernels.reference``), whatever is timed.
A submission has no reducer entry point: a reducer case with a submission is a ValueError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from perfgate.catalog import GemmShape, ReducerCase
from perfgate.measure.launch import Launch, build_launch

SEED_BASE = 20250


# -- inputs, references, checks -----------------------------------------------------------------
def bind(fn: Callable, args: tuple, kwargs: dict) -> Callable[[], Any]:
    """``fn(*args, **kwargs)`` as a call without arguments (one graph node per input copy)."""

    def call() -> Any:
        return fn(*args, **kwargs)

    return call


def gemm_inputs(shape: Sequence[int], copies: int, device: Any) -> tuple[list, list]:
    """``copies`` task inputs of (M, N, K), seeds SEED_BASE.., and their reference outputs."""
    from kernels.reference import generate_input, reference_gemm

    sets = [generate_input(*shape, seed=SEED_BASE + i, device=device) for i in range(copies)]
    return sets, [reference_gemm(d[0], d[3], d[4]) for d in sets]


def gemm_device_calls(sets: list, refs: list) -> list[Callable[[], Any]]:
    """One ``gemm_a16wfp4`` call per input set, each into an output of its own (a graph node)."""
    import torch

    from kernels.gemm import gemm_a16wfp4

    return [
        bind(gemm_a16wfp4, (d[0], d[3], d[4]), {"out": torch.empty_like(ref)})
        for d, ref in zip(sets, refs, strict=True)
    ]


def reducer_inputs(case: ReducerCase, copies: int, device: Any) -> tuple[list, list]:
    """``copies`` seeded fp32 partials (S, M, N) of ``case`` and their reference sums."""
    import torch

    partials = []
    for i in range(copies):
        gen = torch.Generator(device=device).manual_seed(SEED_BASE + i)
        partials.append(torch.randn((case.splits, case.m, case.n), generator=gen, device=device))
    return partials, [reducer_oracle(p) for p in partials]


def reducer_arg_sets(partials: list, refs: list) -> list[tuple]:
    """``reduce_partials`` arguments per copy: the partials and an output of its own."""
    import torch

    return [(p, torch.empty_like(r)) for p, r in zip(partials, refs, strict=True)]


def reducer_oracle(partials: Any) -> Any:
    """The reducer's contract (fp32 sum in split order, bf16 RNE), from kernels.splitk's twin."""
    from kernels.splitk import reduce_partials_reference

    return reduce_partials_reference(partials)


def check_gemm(out: Any, ref: Any, what: str) -> None:
    from kernels.reference import check_leaderboard

    report = check_leaderboard(out, ref)
    if not report:
        raise AssertionError(f"wrong GEMM output ({what}); refusing to time it: {report}")


def check_exact(out: Any, ref: Any, what: str) -> None:
    """Bit-exact, NaN matched by position (``torch.equal`` would call equal NaNs different)."""
    from kernels.reducer.cases import bf16_mismatch

    mismatch = bf16_mismatch(out, ref)
    if mismatch is not None:
        raise AssertionError(
            f"wrong reducer output ({what}); refusing to time it: {mismatch} "
            "(against the in-order fp32 sum)"
        )


def check_all(outs: Sequence[Any], refs: Sequence[Any], check: Callable, what: str) -> None:
    for i, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        check(out, ref, f"{what} on input copy {i}")


@dataclass
class Work:
    """One case's calls, ready to time: per input copy, a bound call (a graph node in device
    mode) and the arguments of ``fn`` (one direct call per round in leaderboard mode)."""

    fn: Callable[..., Any]  # custom_kernel or reduce_partials
    arg_sets: list[tuple]
    calls: list[Callable[[], Any]]
    refs: list[Any]
    check: Callable[[Any, Any, str], None]


def prepare(
    case: GemmShape | ReducerCase, copies: int, device: Any, submission: Any = None
) -> Work:
    """``copies`` seeded input sets of ``case`` with their references and calls; the GEMM is
    ``submission``'s ``custom_kernel`` when one is given (a loaded submission file)."""
    if isinstance(case, ReducerCase):
        if submission is not None:
            raise ValueError(
                f"reducer case {case.id}: a submission file has no reducer entry point "
                "(only custom_kernel); the reducer group times the package"
            )
        from kernels.splitk import reduce_partials

        partials, refs = reducer_inputs(case, copies, device)
        arg_sets = reducer_arg_sets(partials, refs)
        calls = [bind(reduce_partials, args, {}) for args in arg_sets]
        return Work(reduce_partials, arg_sets, calls, refs, check_exact)
    sets, refs = gemm_inputs(case, copies, device)
    if submission is not None:
        calls = submission.device_calls(sets)
        return Work(submission.custom_kernel, [(d,) for d in sets], calls, refs, check_gemm)
    from kernels.gemm import custom_kernel

    calls = gemm_device_calls(sets, refs)
    return Work(custom_kernel, [(d,) for d in sets], calls, refs, check_gemm)


def batched_launch(
    work: Work, *, graph: bool = True, extra: Callable[[], None] | None = None, what: str = ""
) -> Launch:
    """The calls run eagerly once (JIT, autotune and module load happen here), checked, then
    launched together (a graph over the copies, ``extra`` captured after them), run and checked
    again. Raises AssertionError naming the copy for a wrong output."""
    import torch

    eager = [call() for call in work.calls]
    torch.cuda.synchronize()
    check_all(eager, work.refs, work.check, "eager call")
    launch = build_launch(work.calls, extra, graph=graph)
    launch.run()
    torch.cuda.synchronize()
    check_all(launch.outputs, work.refs, work.check, f"{launch.kind} launch{what}")
    return launch
