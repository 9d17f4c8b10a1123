"""Why leaderboard mode reads the small ranked shapes faster than GPU MODE's eval.py (a GPU tool).

``python -m lab.scripts.leaderboard_drift FILE [--harness-dir DIR] [--samples 150] [--block 25]
[--shapes ID,...] [--no-eval] [--json OUT]`` times FILE's ``custom_kernel`` on each ranked shape
in one process, with variants of perfgate's leaderboard loop that each change one thing of what
precedes the timed call, interleaved in blocks (a block of ``--block`` samples of one variant,
then the next variant; the first :data:`SETTLE` samples of a block are reported apart, as
"first": they carry the previous variant's state):

- ``a`` perfgate's leaderboard mode: the 2 GiB ``fill_`` flush (perfgate.measure.flush), fixed
  input copies in rotation (perfgate.measure.harness.prepare, as ``bench`` builds them);
- ``b`` the harness's fill instead (``torch.randn((16000, 1024, 1024), device="cuda")``, then
  ``del``: 62.5 GiB), fixed copies;
- ``c`` the 2 GiB flush, inputs regenerated before every call as the harness does (a new seed,
  +13 each call; new tensors), then a synchronize;
- ``d`` both: the harness's loop;
- ``f`` the 2 GiB flush, then one 4-byte write per 2 MiB page of the harness's 62.5 GiB range
  (the allocator hands back the block the fill used): every TLB entry evicted, little power
  drawn, fixed copies. ``f`` near ``b``: the translation misses of cold inputs; ``f`` near ``a``
  while ``b`` is slower: what the long fill does to clocks or power;

every output checked with the leaderboard's rule. Per shape and variant: the median, the mean
(eval.py reports the mean, perfgate the median: a right-skewed distribution puts them apart), a
10% trimmed mean, p90, the maximum, the first samples' median, and each against ``a``'s median;
the SM clock and power read after each block. Then, unless ``--no-eval``, eval.py itself
(``lab.scripts.gpumode_harness``, the harness's files from ``--harness-dir`` or the cache) on the same
file, its mean per shape against ``a``'s median.

Exit 0; 1 for a wrong output; 2 for unusable input. Not the code under test: a measuring tool.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate import atomic
from perfgate.measure import fingerprint
from perfgate.measure.clock import DeviceClock, Timed
from perfgate.measure.flush import leaderboard_flush, rotation_count
from perfgate.submission.load import SubmissionError, load

PROG = "lab.scripts.leaderboard_drift"
SETTLE = 3  # samples at the start of a block, reported apart
HARNESS_FILL = (16000, 1024, 1024)  # fp32: eval.py's clear_l2_cache_large
PAGE_WORDS = (2 << 20) // 4  # fp32 words in a 2 MiB page
VARIANTS = {
    "a": "2 GiB flush, fixed copies (perfgate)",
    "b": "62.5 GiB randn fill, fixed copies",
    "c": "2 GiB flush, regenerated inputs",
    "d": "62.5 GiB randn fill, regenerated inputs (the harness)",
    "f": "2 GiB flush + a write per 2 MiB page of 62.5 GiB, fixed",
}


@dataclass(frozen=True)
class Variant:
    name: str
    before: Callable[[], tuple[Any, Callable[[Any], None]]]  # untimed: (data, check of the out)


def block_order(names: Sequence[str], samples: int, block: int) -> list[str]:
    """The variant of each block: round after round over ``names``, until every variant has
    ``samples`` kept samples (each block keeps ``block - SETTLE``)."""
    if block <= SETTLE:
        raise ValueError(f"--block must exceed {SETTLE} (the settling samples), got {block}")
    rounds = -(-samples // (block - SETTLE))
    return [n for _ in range(rounds) for n in names]


def run_blocks(
    variants: Sequence[Variant],
    call: Callable[[Any], Any],
    time_call: Callable[[Callable[[], Any]], tuple[Any, float]],
    *,
    samples: int,
    block: int,
    after_block: Callable[[str], dict] = lambda name: {},
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, dict[str, list]]:
    """Per variant: ``kept`` samples (ns, at most ``samples``), the ``first`` of each block and
    what ``after_block`` read after each of its blocks."""
    by_name = {v.name: v for v in variants}
    out = {v.name: {"kept": [], "first": [], "after": []} for v in variants}
    order = block_order(list(by_name), samples, block)
    for i, name in enumerate(order):
        variant, record = by_name[name], out[name]
        for j in range(block):
            data, check = variant.before()
            result, ns = time_call(lambda data=data: call(data))
            check(result)
            del result
            if j < SETTLE:
                record["first"].append(ns)
            elif len(record["kept"]) < samples:
                record["kept"].append(ns)
        record["after"].append(after_block(name))
        progress(f"block {i + 1}/{len(order)} ({name})")
    return out


def summary(kept: Sequence[float], first: Sequence[float], reference_ns: float) -> dict:
    """The statistics of one variant's samples; ``vs_a`` against ``reference_ns`` (a's median)."""
    s = sorted(kept)
    cut = len(s) // 10
    trimmed = s[cut : len(s) - cut] or s
    row = {
        "n": len(s),
        "median": statistics.median(s),
        "mean": statistics.fmean(s),
        "trimmed_mean": statistics.fmean(trimmed),
        "p90": s[min(len(s) - 1, int(0.9 * len(s)))],
        "max": s[-1],
        "first_median": statistics.median(first) if first else float("nan"),
    }
    row["median_vs_a"] = row["median"] / reference_ns - 1
    row["mean_vs_a"] = row["mean"] / reference_ns - 1
    return row


def shape_table(shape_id: str, stats: dict[str, dict], afters: dict[str, list]) -> str:
    lines = [
        f"{shape_id} (µs; vs a = against a's median)",
        f"  {'variant':<60} {'median':>8} {'mean':>8} {'trim10':>8} {'p90':>8} {'max':>8} "
        f"{'first':>8} {'med vs a':>9} {'mean vs a':>9}  sm MHz / W after",
    ]
    for name, row in stats.items():
        clocks = {(a.get("sm_mhz"), a.get("power_w")) for a in afters.get(name, [])}
        lines.append(
            f"  {name} {VARIANTS[name]:<58} {row['median'] / 1e3:8.3f} {row['mean'] / 1e3:8.3f} "
            f"{row['trimmed_mean'] / 1e3:8.3f} {row['p90'] / 1e3:8.3f} {row['max'] / 1e3:8.3f} "
            f"{row['first_median'] / 1e3:8.3f} {100 * row['median_vs_a']:+8.1f}% "
            f"{100 * row['mean_vs_a']:+8.1f}%  {sorted(clocks, key=str)}"
        )
    return "\n".join(lines)


# -- the GPU side ---------------------------------------------------------------------------------
def _time_call(fn: Callable[[], Any]) -> tuple[Any, float]:
    """perfgate's Timed: events around the call, then a synchronize; (result, ns)."""
    clock = DeviceClock()
    timed = Timed(fn, clock=clock)
    out = timed()
    return out, clock.read() * 1e9


def _variants(shape, submission) -> list[Variant]:
    import torch

    from kernels.device import device_info
    from kernels.reference import generate_input, reference_gemm
    from perfgate.catalog import gemm_set_bytes
    from perfgate.measure.harness import check_gemm, prepare

    info = device_info()
    copies = rotation_count(gemm_set_bytes(shape), info.last_level_cache_bytes)
    work = prepare(shape, copies, "cuda", submission)
    for i, (args, ref) in enumerate(zip(work.arg_sets, work.refs, strict=True)):
        check_gemm(work.fn(*args), ref, f"{shape.id} input set {i}")
    flush = leaderboard_flush(info.last_level_cache_bytes, "cuda")
    rotation = itertools.cycle(range(copies))
    seeds = itertools.count(4565, 13)

    def fill() -> None:
        torch.cuda.synchronize()
        dummy = torch.randn(HARNESS_FILL, device="cuda")
        del dummy

    def sweep() -> None:
        flush()
        pages = torch.empty(HARNESS_FILL, device="cuda").view(-1, PAGE_WORDS)
        pages[:, 0].fill_(1.0)
        del pages

    def fixed(prepare_call: Callable[[], None]) -> Callable[[], tuple]:
        def before() -> tuple:
            i = next(rotation)
            prepare_call()
            return work.arg_sets[i][0], lambda out: check_gemm(out, work.refs[i], "fixed copy")

        return before

    def regenerated(prepare_call: Callable[[], None]) -> Callable[[], tuple]:
        def before() -> tuple:
            data = generate_input(*shape, seed=next(seeds), device="cuda")
            copy = tuple(t.clone() for t in data)
            torch.cuda.synchronize()
            prepare_call()

            def check(out: Any) -> None:
                check_gemm(out, reference_gemm(copy[0], copy[3], copy[4]), "regenerated input")

            return data, check

        return before

    return [
        Variant("a", fixed(flush)),
        Variant("b", fixed(fill)),
        Variant("c", regenerated(flush)),
        Variant("d", regenerated(fill)),
        Variant("f", fixed(sweep)),
    ]


def _eval_means(file: Path, harness_dir: Path | None) -> dict[str, float]:
    from lab.scripts import gpumode_harness as gh

    harness = gh.verify(harness_dir if harness_dir else gh.DEFAULT_CACHE / gh.COMMIT)
    with tempfile.TemporaryDirectory(prefix="leaderboard-drift-eval-") as tmp:
        popcorn = gh.run_eval(gh.stage(harness, file, Path(tmp)))
    if popcorn["check"] != "pass":
        raise AssertionError(f"eval.py rejected the file: {popcorn}")
    rows = gh.rows(gh.benchmarks(popcorn), None)
    return {r["shape"]: r["eval"]["mean"] for r in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, metavar="FILE", help="the submission file")
    parser.add_argument("--samples", type=int, default=150, help="kept samples a variant a shape")
    parser.add_argument("--block", type=int, default=25, help="samples a block (first 3 apart)")
    parser.add_argument("--shapes", help="ranked shape ids, comma-separated (default: all six)")
    parser.add_argument("--harness-dir", type=Path, help="eval.py, utils.py, task.py (checked)")
    parser.add_argument("--no-eval", action="store_true", help="skip eval.py itself")
    parser.add_argument("--json", dest="json_out", type=Path, metavar="OUT", help="all samples")
    args = parser.parse_args(argv)
    if args.samples < 10:
        parser.error("--samples must be >= 10")
    import torch

    from kernels.shapes import LEADERBOARD

    if args.block <= SETTLE:
        parser.error(f"--block must exceed {SETTLE}")
    shapes = [s for s in LEADERBOARD if not args.shapes or s.id in args.shapes.split(",")]
    if not shapes:
        parser.error(f"--shapes names none of {', '.join(s.id for s in LEADERBOARD)}")
    try:
        atomic.check_outputs({"--json": args.json_out}, {"FILE": args.file})
    except atomic.OutputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"{PROG}: error: needs a GPU", file=sys.stderr)
        return 2
    try:
        submission = load(args.file)
    except SubmissionError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    start = time.monotonic()

    def progress(line: str) -> None:
        print(f"{PROG}: [{time.monotonic() - start:6.1f} s] {line}", flush=True)

    report: dict[str, Any] = {"device": torch.cuda.get_device_name(), "shapes": {}}
    try:
        for shape in shapes:
            progress(f"{shape.id}: preparing (inputs, references, first calls)")
            samples = run_blocks(
                _variants(shape, submission), submission.custom_kernel, _time_call,
                samples=args.samples, block=args.block,
                after_block=lambda name: fingerprint.clock_readings(),
                progress=lambda line, sid=shape.id: progress(f"{sid}: {line}"),
            )  # fmt: skip
            a_median = statistics.median(samples["a"]["kept"])
            stats = {n: summary(s["kept"], s["first"], a_median) for n, s in samples.items()}
            print(shape_table(shape.id, stats, {n: s["after"] for n, s in samples.items()}))
            report["shapes"][shape.id] = {"stats": stats, "samples": samples}
        if not args.no_eval:
            progress("eval.py leaderboard on the same file (lab.scripts.gpumode_harness)")
            means = _eval_means(args.file, args.harness_dir)
            print("eval.py's mean against variant a's median (perfgate) and d's mean (its loop)")
            for sid, entry in report["shapes"].items():
                a, d = entry["stats"]["a"]["median"], entry["stats"]["d"]["mean"]
                entry["eval_mean"] = means[sid]
                print(f"  {sid:<18} eval.py {means[sid] / 1e3:8.3f} µs  vs a median "
                      f"{100 * (means[sid] / a - 1):+6.1f}%  vs d mean "
                      f"{100 * (means[sid] / d - 1):+6.1f}%")  # fmt: skip
    except AssertionError as exc:
        print(f"{PROG}: wrong output: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    progress("done")
    if args.json_out:
        atomic.write_json(args.json_out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
