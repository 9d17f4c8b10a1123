"""GPU MODE's harness loop beside perfgate's leaderboard mode, on one submission (a GPU tool).

``python -m tools.harness_loop [--submission FILE] [--shapes ranked|test] [--rounds 100]
[--flush-gib 62.5] [--json OUT] [--markdown OUT]`` times each shape twice in one process, one after the other:

1. **the harness's loop**, with the semantics of GPU MODE's ``problems/amd_202602/eval.py``
   (reference-kernels; its facts, reimplemented here):

   - leaderboard mode first runs a warm-up benchmark of the first shape without re-checking
     (at most 100 repeats, a 10 ms time cap), then each shape with re-checking (at most 100
     repeats, a 30 s time cap);
   - a benchmark generates its inputs once, calls ``custom_kernel`` once and checks the output;
     then each repeat, when re-checking, adds 13 to the seed and generates new inputs, then
     synchronizes, flushes by allocating ``torch.randn((16000, 1024, 1024))`` fp32 on the GPU
     (62.5 GiB) and freeing it, records events around the whole call, synchronizes, and checks
     the output when re-checking; a sample is the events' elapsed time;
   - the stopping rule, from the third sample on: stop when the standard error over the mean
     drops below 0.001, when mean x samples exceeds the time cap, or after 120 s of wall time
     (std with n - 1, error = std / sqrt(n)); it may stop after 3 samples (identical event
     readings give a zero error);
   - reported per shape: samples, mean, std, error, best, worst; the score is the geometric
     mean of the means;

2. **leaderboard mode** as ``perfgate bench --mode leaderboard`` times it: the 2 GiB flush of
   :func:`perfgate.measure.leaderboard_flush`, events around one call, rotating
   :func:`perfgate.measure.rotation_count` input sets (each output checked first), ``--rounds``
   samples after 5 untimed ones.

It prints, per shape, both means, leaderboard mode's median and the harness mean's difference
from leaderboard mode's mean, and both scores (docs/submission.md has the H200 table). Exit 0;
1 when an output is wrong (the harness would fail the submission); 2 for unusable input (no
GPU, too little free memory for the flush, a submission file that cannot be loaded).
Not the code under test: a measuring tool.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# eval.py's constants (problems/amd_202602/eval.py)
SEED_STEP = 13
MIN_SAMPLES_BEFORE_STOP = 3  # the rule is first checked after the third sample (i > 1)
REL_ERROR_STOP = 0.001
WALL_LIMIT_NS = 120e9
WARMUP = {"recheck": False, "max_repeats": 100, "max_time_ns": 1e7}
LEADERBOARD = {"recheck": True, "max_repeats": 100, "max_time_ns": 30e9}
HARNESS_FLUSH_GIB = 62.5  # torch.randn((16000, 1024, 1024)) fp32
LEADERBOARD_WARMUP_ROUNDS = 5  # perfgate.plugin.DEFAULT_WARMUP


class WrongOutput(Exception):
    """The submission's output failed the check; the message says where."""


@dataclass(frozen=True)
class Stats:
    """eval.py's statistics of one benchmark, in nanoseconds."""

    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float


def stats(durations: Sequence[float]) -> Stats:
    """Mean, sample standard deviation (n - 1), standard error of the mean, best, worst."""
    runs = len(durations)
    if runs < 2:
        raise ValueError(f"need >= 2 durations for a standard deviation, got {runs}")
    mean = sum(durations) / runs
    std = math.sqrt(sum((x - mean) ** 2 for x in durations) / (runs - 1))
    return Stats(
        runs, mean, std, std / math.sqrt(runs), float(min(durations)), float(max(durations))
    )


def stop_reason(s: Stats, elapsed_ns: float, max_time_ns: float) -> str | None:
    """Why the harness stops after these samples (None: it goes on)."""
    if s.runs < MIN_SAMPLES_BEFORE_STOP:
        return None
    if s.err / s.mean < REL_ERROR_STOP:
        return "error"
    if s.mean * s.runs > max_time_ns:
        return "time cap"
    if elapsed_ns > WALL_LIMIT_NS:
        return "wall time"
    return None


@dataclass(frozen=True)
class Outcome:
    stats: Stats
    stopped: str  # "error", "time cap", "wall time" or "repeats"
    seeds: tuple[int, ...]  # the seed of every timed call's inputs


def harness_benchmark(
    make_data: Callable[[int], Any],
    call: Callable[[Any], Any],
    check: Callable[[Any, Any], None],
    time_call: Callable[[Callable[[], Any]], tuple[Any, float]],
    prepare: Callable[[], None],
    *,
    seed: int,
    recheck: bool,
    max_repeats: int,
    max_time_ns: float,
    now_ns: Callable[[], int] = time.perf_counter_ns,
) -> Outcome:
    """One benchmark as eval.py runs it.

    ``make_data(seed)`` returns ``(data, check_copy)``; ``check(check_copy, out)`` raises
    :class:`WrongOutput`; ``prepare()`` is what precedes each timed call (synchronize, flush);
    ``time_call(fn)`` returns ``(fn(), nanoseconds)`` measured around the call."""
    data, check_copy = make_data(seed)
    check(check_copy, call(data))  # the one obligatory check
    durations: list[float] = []
    seeds = []
    start = now_ns()
    stopped = "repeats"
    for _ in range(max_repeats):
        if recheck:
            seed += SEED_STEP
            data, check_copy = make_data(seed)
        seeds.append(seed)
        prepare()
        out, ns = time_call(lambda data=data: call(data))
        if recheck:
            check(check_copy, out)
        del out
        durations.append(ns)
        if len(durations) >= MIN_SAMPLES_BEFORE_STOP:
            reason = stop_reason(stats(durations), now_ns() - start, max_time_ns)
            if reason is not None:
                stopped = reason
                break
    return Outcome(stats(durations), stopped, tuple(seeds))


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def row(shape_id: str, harness: Outcome, leaderboard_ns: Sequence[float]) -> dict[str, Any]:
    """One line of the comparison: the harness's statistics, leaderboard mode's, their ratio."""
    lb_mean = statistics.fmean(leaderboard_ns)
    return {
        "shape": shape_id,
        "harness": asdict(harness.stats),
        "harness_stopped": harness.stopped,
        "leaderboard_mean_ns": lb_mean,
        "leaderboard_median_ns": statistics.median(leaderboard_ns),
        "leaderboard_rounds": len(leaderboard_ns),
        "harness_vs_leaderboard": harness.stats.mean / lb_mean - 1,
    }


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    harness = geomean([r["harness"]["mean"] for r in rows])
    lb = geomean([r["leaderboard_mean_ns"] for r in rows])
    return {"harness_score_ns": harness, "leaderboard_score_ns": lb, "ratio": harness / lb - 1}


def format_table(rows: Sequence[dict[str, Any]], device: str) -> str:
    out = [
        f"GPU MODE harness loop vs perfgate leaderboard mode ({device}; us)",
        "| shape | harness mean | samples | stopped by | err/mean | leaderboard mean | "
        "leaderboard median | harness vs leaderboard |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        h = r["harness"]
        out.append(
            f"| {r['shape']} | {h['mean'] / 1e3:.3f} | {h['runs']} | {r['harness_stopped']} | "
            f"{100 * h['err'] / h['mean']:.2f}% | {r['leaderboard_mean_ns'] / 1e3:.3f} | "
            f"{r['leaderboard_median_ns'] / 1e3:.3f} | {100 * r['harness_vs_leaderboard']:+.1f}% |"
        )
    s = summary(rows)
    out.append(
        f"| score (geometric mean) | {s['harness_score_ns'] / 1e3:.3f} | | | | "
        f"{s['leaderboard_score_ns'] / 1e3:.3f} | | {100 * s['ratio']:+.1f}% |"
    )
    return "\n".join(out)


# -- the GPU side ---------------------------------------------------------------------------------
def _event_timer(fn: Callable[[], Any]) -> tuple[Any, float]:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    torch.cuda.synchronize()
    return out, start.elapsed_time(end) * 1e6


def _harness_flush(gib: float) -> Callable[[], None]:
    import torch

    planes = round(gib * 256)  # planes of 1024 x 1024 fp32 (4 MiB each)

    def prepare() -> None:
        torch.cuda.synchronize()
        dummy = torch.randn((planes, 1024, 1024), device="cuda")
        del dummy

    return prepare


def _check(check_copy: Any, out: Any) -> None:
    from kernels.reference import check_leaderboard, reference_gemm

    report = check_leaderboard(out, reference_gemm(check_copy[0], check_copy[3], check_copy[4]))
    if not report:
        raise WrongOutput(str(report))


def _make_data(shape) -> Callable[[int], tuple]:
    from kernels.reference import generate_input

    def make(seed: int) -> tuple:
        data = generate_input(*shape, seed=seed, device="cuda")
        return data, tuple(t.clone() for t in data)

    return make


def _leaderboard_mode(kernel, shape, rounds: int) -> list[float]:
    """perfgate's leaderboard mode on one shape: samples in ns."""
    import itertools

    from kernels.device import device_info
    from perfgate.catalog import gemm_set_bytes
    from perfgate.measure.clock import DeviceClock, Timed
    from perfgate.measure.flush import leaderboard_flush, rotation_count
    from perfgate.measure.harness import check_gemm, gemm_inputs

    info = device_info()
    copies = rotation_count(gemm_set_bytes(shape), info.last_level_cache_bytes)
    sets, refs = gemm_inputs(shape, copies, "cuda")
    for i, (data, ref) in enumerate(zip(sets, refs, strict=True)):
        check_gemm(kernel(data), ref, f"{shape.id} input set {i}")
    flush = leaderboard_flush(info.last_level_cache_bytes, "cuda")
    order = itertools.cycle(sets)
    clock = DeviceClock()
    timed = Timed(lambda: kernel(next(order)), clock=clock)
    samples = []
    for i in range(LEADERBOARD_WARMUP_ROUNDS + rounds):
        flush()
        before = clock.read()
        timed()
        if i >= LEADERBOARD_WARMUP_ROUNDS:
            samples.append((clock.read() - before) * 1e9)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.harness_loop",
        description=__doc__.splitlines()[0],
        epilog="docs/submission.md: the H200 table and how to read it",
    )
    parser.add_argument("--submission", metavar="FILE", help="a submission file (default: kernels)")
    parser.add_argument("--shapes", choices=("ranked", "test"), default="ranked")
    parser.add_argument("--rounds", type=int, default=100, help="leaderboard-mode samples a shape")
    parser.add_argument(
        "--flush-gib", type=float, default=HARNESS_FLUSH_GIB, help="the harness's fill, GiB"
    )
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="write the rows as JSON")
    parser.add_argument(
        "--markdown", dest="markdown_out", metavar="OUT", help="write the table as markdown"
    )
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.flush_gib <= 0:
        parser.error("--rounds must be >= 2 and --flush-gib > 0")
    outputs = {f"--{k}": v for k, v in (("json", args.json_out), ("markdown", args.markdown_out))}
    if args.submission and Path(args.submission).resolve() in {
        Path(v).resolve() for v in outputs.values() if v
    }:
        parser.error("--json/--markdown must not name the --submission file")
    import torch

    if not torch.cuda.is_available():
        print("tools.harness_loop: needs a GPU", file=sys.stderr)
        return 2
    free, _ = torch.cuda.mem_get_info()
    if free < args.flush_gib * 2**30 * 1.05:
        print(
            f"tools.harness_loop: --flush-gib {args.flush_gib:g} needs that much free GPU memory, "
            f"{free / 2**30:.1f} GiB are free; pass a smaller --flush-gib",
            file=sys.stderr,
        )
        return 2
    from kernels.shapes import LEADERBOARD as RANKED
    from kernels.shapes import TEST_SHAPES
    from perfgate.submission.load import SubmissionError, kernel_for

    try:
        kernel, what = kernel_for(args.submission)
    except SubmissionError as exc:
        print(f"tools.harness_loop: error: {exc}", file=sys.stderr)
        return 2
    shapes = RANKED if args.shapes == "ranked" else TEST_SHAPES
    prepare = _harness_flush(args.flush_gib)
    rows = []
    try:
        first = shapes[0]
        harness_benchmark(
            _make_data(first), kernel, _check, _event_timer, prepare, seed=1, **WARMUP
        )
        for i, shape in enumerate(shapes):
            outcome = harness_benchmark(
                _make_data(shape), kernel, _check, _event_timer, prepare, seed=1000 * i + 7,
                **LEADERBOARD,
            )  # fmt: skip
            rows.append(row(shape.id, outcome, _leaderboard_mode(kernel, shape, args.rounds)))
    except (WrongOutput, AssertionError) as exc:
        print(f"tools.harness_loop: wrong output: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    table = format_table(rows, torch.cuda.get_device_name())
    print(f"custom_kernel: {what}")
    print(table)
    from perfgate import atomic

    if args.json_out:
        atomic.write_json(args.json_out, {"submission": what, "rows": rows, **summary(rows)})
    if args.markdown_out:
        atomic.write_text(args.markdown_out, markdown(table, what, args))
    return 0


def markdown(table: str, what: dict[str, Any], args: argparse.Namespace) -> str:
    """The table as a markdown document: what was timed and how, then the table."""
    title, _, body = table.partition("\n")
    timed = (
        f"`{what.get('path')}` (sha256 `{str(what.get('sha256'))[:16]}`)"
        if what.get("source") == "submission"
        else "the package `kernels`"
    )
    return (
        f"### {title}\n\n"
        f"custom_kernel of {timed}; harness flush {args.flush_gib:g} GiB, leaderboard mode "
        f"{args.rounds} rounds after {LEADERBOARD_WARMUP_ROUNDS} untimed, shapes {args.shapes}.\n\n"
        f"{body}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
