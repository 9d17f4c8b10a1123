"""A measuring worker: one process, one revision's ``kernels``, perfgate's timer, driven over pipes.

``perfgate ab`` (and the lab's ``python -m lab experiment``) start one worker per side (``python -m
perfgate.measure.worker --kernels-root ROOT``, with this checkout as working directory): perfgate (the
timer, the flush, the harness's input and output checks) is always this checkout's, so both
sides are timed by the same code, while ``kernels`` is imported from ROOT, the revision under
test (a git worktree of the base). Both workers sit on the same GPU; the orchestrator asks one
at a time for a block of rounds, so they never run at once and alternate in ABBA order.

Protocol: one JSON object per line. Requests on stdin, answers on the process's original stdout
(anything the code under test prints goes to stderr instead). The first line comes unasked,
``{"ok": true, "ready": true}``, once the worker has warmed up (imports, the GPU context, the
flush buffer, the Triton runtime's first launch): a look's workers are started together and pay
that side by side instead of in their first prepare, one after another.

- ``{"op": "prepare", "cases": [CASE...], "levels": [0.05, ...], "cycles": {"0.05": N}}``:
  drop what was prepared
  before, build every case's inputs (the same seeds as the pytest harness), check every output
  against the reference and capture the graph over the rotated copies. ``levels`` (the lab's
  experiment only) asks for one more variant per level, the same calls with an extra pass after
  them, from the provider that ``PERFGATE_VARIANTS`` names (:mod:`perfgate.variants`; the lab's
  calibrated device sleep); ``cycles`` (optional) hands the provider an earlier worker's
  calibration. Answer: ``{"ok": true, "cases": {id: INFO}}``, INFO holding what the provider
  reports of each level. The orchestrators prepare one case at a time, as the pytest harness
  does.
- ``--mode leaderboard``: each round is one whole call (``custom_kernel(data)``) after the
  leaderboard flush, rotating over the input copies (:mod:`perfgate.measure.ab_worker`); the
  default ``device`` replays the graph over the copies.
- ``{"op": "run", "case": ID, "variant": "plain" | "0.05", "rounds": N}``: N rounds, each after
  the cache flush; answer ``{"ok": true, "samples": [seconds per call, ...]}``.
- ``{"op": "describe"}``: what this worker times, without touching the GPU: ``{"ok": true,
  "source": {"source": "kernels", "kernels_root": ROOT}}`` or the submission's record
  (``{"source": "submission", "path", "sha256", "leaderboard", "gpu"}``).
- ``{"op": "quit"}``. Any failure answers ``{"ok": false, "error": "one line"}``.

``--submission FILE`` instead of ``--kernels-root ROOT`` (``perfgate ab --base-submission A.py
--head-submission B.py``): the worker loads FILE (:func:`perfgate.submission.load.load`) and times
its ``custom_kernel``, one call per input copy captured in the graph (a submission has no
``gemm_a16wfp4`` entry), while ``kernels`` (the inputs, the reference, the checks) is this
checkout's. A reducer case is refused: a submission has no reducer entry point. A FILE that does
not load ends the worker at start, exit 2 and one line on stderr.

CASE: ``{"name": fullname, "kind": "gemm", "m", "n", "k", "set_bytes"}`` or
``{"name", "kind": "reducer", "splits", "m", "n", "set_bytes"}``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
from pathlib import Path
from typing import Any

from perfgate import variants
from perfgate.measure import ab_worker
from perfgate.measure.clock import flushed_rounds
from perfgate.measure.flush import for_mode, rotation_count
from perfgate.measure.launch import build_launch
from perfgate.modes import AB_MODE_NAMES, WHOLE_CALL_MODE_NAMES, get
from perfgate.submission.export import NAME_PREFIX
from perfgate.submission.load import SubmissionError, load

# perfgate.catalog and perfgate.measure.harness import kernels: they load after the worker has
# chosen its revision (use_kernels_from), inside the methods that need them.

PLAIN = "plain"


def variant_name(level: float) -> str:
    """The name of an injected variant: the fraction as written (``0.05``)."""
    return f"{level:g}"


def has_kernels(root: Path) -> bool:
    """Whether ``root`` holds a ``kernels`` package (what :func:`use_kernels_from` needs)."""
    return (Path(root) / "kernels" / "__init__.py").is_file()


def use_kernels_from(root: Path) -> None:
    """Make ``import kernels`` find ROOT's package while ``perfgate`` stays this checkout's: a
    finder for that one name goes first on ``sys.meta_path`` (nothing is written: a worker the
    A/B kills leaves no file behind)."""
    if not has_kernels(root):
        raise FileNotFoundError(f"--kernels-root: {root} has no kernels package")
    if "kernels" in sys.modules:
        raise RuntimeError("kernels was imported before the worker chose its revision")
    sys.meta_path.insert(0, _KernelsFrom(str(Path(root).resolve())))


class _KernelsFrom(importlib.abc.MetaPathFinder):
    """Finds the package ``kernels`` in one directory; its modules then come from that package's
    own path, and every other name from ``sys.path`` as before."""

    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(self, name, path=None, target=None):
        if name != "kernels":
            return None
        return importlib.machinery.PathFinder.find_spec(name, [self.root])


class Bench:
    """One case ready to time: its plain launch (a graph over the copies) and, per variant (the
    lab's, perfgate.variants), a launch of the same calls with the extra pass captured after them."""

    def __init__(self, launch: Any, calls: int, injected: dict[str, Any] | None = None) -> None:
        self.launch = launch
        self.calls = calls
        self.injected = injected or {}

    def work(self, variant: str):
        if variant == PLAIN:
            return self.launch.run
        return self.injected[variant].run  # KeyError names an unknown variant


class Worker:
    """The GPU side of the protocol (imports torch and the revision's kernels)."""

    def __init__(self, submission: Any = None, mode: str = "device") -> None:
        import torch

        from kernels.device import device_info

        self.submission = submission
        self.device = torch.device("cuda")
        self.info = device_info()
        self.mode = mode
        self.flush = for_mode(get(mode), self.info.last_level_cache_bytes, self.device)
        self.benches: dict[str, Any] = {}

    def warm(self) -> None:
        """What every worker pays once, paid at start-up, while the other workers of its wave
        start too: the modules a prepare imports and the Triton runtime's first launch."""
        import torch

        import kernels.gemm  # noqa: F401  (the revision's kernels, or the file's environment)
        import perfgate.catalog
        import perfgate.measure.harness  # noqa: F401
        from perfgate.measure import _triton_warm

        flag = torch.zeros(1, dtype=torch.int32, device=self.device)
        _triton_warm.touch[(1,)](flag)
        # what every prepare's first use would load: the generator's randn, the fp64 matmul of
        # the reference (cuBLAS's handle), the comparisons of the checks, a graph capture
        gen = torch.Generator(device=self.device).manual_seed(0)
        x = torch.randn((64, 64), dtype=torch.bfloat16, device=self.device, generator=gen)
        y = x.to(torch.float64)
        ok = bool(((y @ y.T - y @ y.T).abs() <= 1e-2).all())
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            flag.add_(1)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            flag.add_(1)
        graph.replay()
        torch.cuda.synchronize()
        if not ok:
            raise RuntimeError("the warm-up's own arithmetic is wrong on this GPU")

    def prepare(
        self, cases: list[dict[str, Any]], levels: list[float], cycles: dict | None = None
    ) -> dict[str, Any]:
        """Replaces the cases prepared before: like the pytest harness, a worker holds one
        benchmark's graph at a time (graphs of other shapes kept alive across later captures
        faulted on the H200: an illegal memory access at the first replay)."""
        from perfgate.catalog import case_of
        from perfgate.measure.harness import prepare

        self.release()
        out = {}
        for case in cases:
            copies = rotation_count(case["set_bytes"], self.info.last_level_cache_bytes)
            work = prepare(case_of(case), copies, self.device, self.submission)
            out[case["name"]] = self._prepare_one(case["name"], work, levels, cycles or {})
        return {"cases": out, "reducer_backend": _reducer_backend(self.submission)}

    def _prepare_one(self, name: str, work: Any, levels: list[float], cycles: dict) -> dict:
        from perfgate.measure.harness import batched_launch

        named = {variant_name(lv): lv for lv in levels}
        if self.mode in WHOLE_CALL_MODE_NAMES:
            self.benches[name], info = ab_worker.prepare_whole_call(
                work, named, self.flush, cycles, PLAIN
            )
            return info
        plain = batched_launch(work)  # the plugin's device mode: the same calls and checks
        calls = work.calls
        info: dict[str, Any] = {"calls": len(calls), "launch": plain.kind, "note": plain.note}
        injected = {}
        if named:  # the lab's injected levels (perfgate.variants)
            unit = variants.Unit("graph", plain, work, self.flush,
                                 lambda extra: build_launch(calls, extra))  # fmt: skip
            injected, more = variants.prepare(unit, named, cycles)
            info.update(more)
        self.benches[name] = Bench(plain, len(calls), injected)
        return info

    def release(self) -> None:
        import torch

        self.benches.clear()
        gc.collect()
        torch.cuda.synchronize()

    def run(self, name: str, variant: str, rounds: int) -> list[float]:
        bench = self.benches[name]
        samples = flushed_rounds(bench.work(variant), self.flush, rounds, calls=bench.calls)
        if hasattr(bench, "check"):  # a whole-call bench checks its last timed output
            bench.check()
        return samples


def _reducer_backend(submission: Any = None) -> str | None:
    """The split-K reducer the timed code uses: the revision's, or an exported submission's
    (its embedded package's); None for an older revision without it or any other file."""
    try:
        if submission is None:
            from kernels.splitk import reducer_backend
        else:
            package = submission.custom_kernel.__module__.partition(".")[0]
            if not package.startswith(NAME_PREFIX):
                return None
            reducer_backend = importlib.import_module(f"{package}.splitk").reducer_backend
        return str(reducer_backend())
    except Exception:  # the record just lacks the field
        return None


def serve(worker_factory, requests, answer, source: dict[str, Any] | None = None) -> None:
    """Answer each request line until ``quit`` or the end of input (no GPU needed to test);
    ``describe`` answers ``source`` without making the worker."""
    worker = None
    for line in requests:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "quit":
                answer({"ok": True})
                return
            if op == "describe":
                answer({"ok": True, "source": source})
                continue
            if worker is None:
                worker = worker_factory()
            if op == "prepare":
                reused = {"cycles": req["cycles"]} if req.get("cycles") else {}
                answer(
                    {"ok": True, **worker.prepare(req["cases"], req.get("levels", []), **reused)}
                )
            elif op == "run":
                samples = worker.run(req["case"], req["variant"], int(req["rounds"]))
                answer({"ok": True, "samples": samples})
            else:
                answer({"ok": False, "error": f"unknown op {op!r}"})
        except Exception as exc:  # the orchestrator reports it as that side's failure
            answer({"ok": False, "error": " ".join(f"{type(exc).__name__}: {exc}".split())})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfgate.measure.worker")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--kernels-root", type=Path, help="time ROOT/kernels (a revision)")
    what.add_argument("--submission", type=Path, metavar="FILE", help="time FILE's custom_kernel")
    parser.add_argument("--mode", choices=AB_MODE_NAMES, default="device")
    args = parser.parse_args(argv)
    # Answers go on the original stdout; whatever the code under test prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if args.submission is not None:
        try:
            submission = load(args.submission)
        except SubmissionError as exc:
            print(f"perfgate worker: error: --submission: {exc}", file=sys.stderr)
            return 2
        source = {"source": "submission", **submission.describe()}
        factory = lambda: Worker(submission, args.mode)  # noqa: E731
    else:
        use_kernels_from(args.kernels_root)
        source = {"source": "kernels", "kernels_root": str(Path(args.kernels_root).resolve())}
        factory = lambda: Worker(mode=args.mode)  # noqa: E731

    def answer(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    # Start-up work at once, not at the first request: a look's workers start together and
    # warm up side by side, then prepare one after another. Where the GPU worker cannot be
    # made (no GPU), every GPU request answers that error; describe still answers.
    factory = _warmed(factory)
    answer({"ok": True, "ready": True})
    serve(factory, sys.stdin, answer, source)
    return 0


def _warmed(factory):
    """``factory``'s worker, made and warmed now; the returned factory gives it (or raises
    what making it raised)."""
    try:
        worker = factory()
        worker.warm()
    except Exception as exc:  # the first GPU request reports it, in one line
        failure = exc

        def failed():
            raise failure

        return failed
    return lambda: worker


if __name__ == "__main__":
    sys.exit(main())
