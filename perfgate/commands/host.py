"""``python -m perfgate host``: the host path of ``custom_kernel``, counted and gated exactly.

Per call after warm-up, per ranked shape, five counts, each broken down by the call path that
made it (``custom_kernel > gemm_a16wfp4 > _Bound.__call__ > torch.empty``):

- ``launches``: Triton launches (the JIT path, the compiled kernel's launcher, the interpreter),
  native reducer launches, and torch ops that run a kernel (anything but views, bare allocations
  and cross-device copies);
- ``allocations``: torch ops whose output owns storage that none of their inputs owned;
- ``copies``: torch ops whose tensors span two device types (host <-> device);
- ``syncs``: ``torch.cuda.synchronize``, stream and event waits, and ops that read a device
  value on the host (``.item()``);
- ``python_calls``: every call (Python or C) made from a frame of the launcher (``kernels/``,
  the modules of ``@triton.jit`` code excluded).

How: ``sys.setprofile`` for the calls and launches, a ``TorchDispatchMode`` for the ops. Both are
deterministic, so the gate is exact: any count above the baseline fails naming the count and the
path; a count below it is an improvement. Times are gated separately (timing mode ``host``).

On the CPU (Triton interpreter) the launch entry is replaced by a stub that only counts, so the
ranked shapes count in seconds; everything a launch does inside Triton is excluded on every device
(the interpreter copies tensors to numpy, a GPU does not). Launches, allocations, copies and syncs
then mean the same on the CPU as on a GPU; ``python_calls`` does not (the interpreter takes
Triton's JIT path and the Triton reducer, a GPU the compiled launcher and the native reducer), so
each device key has its own baseline: ``perf_baselines/<device-key>/host_counts.json``
(``interpreter`` for the CPU). The ``host.json`` beside it is the ``host`` timing mode's.

Exit codes as ``compare``: 0 no count grew; 1 a count grew (or a shape is missing); 2 unusable
input (missing or corrupt baseline, another device key or schema), with a one-line reason.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfgate import atomic
from perfgate.commands import base
from perfgate.gate import host_counts, verdict
from perfgate.gate.compare import check_outputs
from perfgate.gate.paths import DEFAULT_BASELINES, HOST_COUNTS_NAME
from perfgate.interpreter import drop_discarded_work, interpret_without_gpu
from perfgate.measure import host_census
from perfgate.refusal import Refusal


def _run(args: argparse.Namespace) -> int:
    # before the counting: a path that cannot be written is refused at once
    check_outputs({"--json": args.json_out}, {"--check": args.check})
    interpret_without_gpu(base.gpu_available())  # before triton loads: the CPU counts
    base.require_runnable_interpreter()
    drop_discarded_work()
    if args.update and (args.gate or args.check is not None):
        raise Refusal(
            "--update records a baseline; it cannot also compare with one (drop --gate/--check)"
        )
    # an unusable baseline or output is a Refusal: one line, exit 2
    baseline = None
    if args.check is not None:
        baseline = host_counts.load(args.check)
    current = host_census.collect()
    if args.gate:
        path = Path(args.baselines_dir) / current["device_key"] / HOST_COUNTS_NAME
        if not path.is_file():
            raise host_counts.CountError(
                f"no host count baseline for device {current['device_key']!r} ({path}); "
                "record one with `python -m perfgate host --update` and commit it"
            )
        baseline = host_counts.load(path)
    host_counts.print_totals(current)
    own = Path(args.baselines_dir) / current["device_key"] / HOST_COUNTS_NAME
    check_outputs(
        {"--update": own if args.update else None, "--json": args.json_out},
        {"--gate": own if args.gate else None, "--check": args.check},
        baselines=args.update,  # --update writes this device's count baseline
    )
    if args.json_out:
        atomic.write_json(args.json_out, current)
    if args.update:
        atomic.write_json(own, current)
        print(f"perfgate host: wrote {own}; commit it")
    if baseline is None:
        return 0
    failures, improvements = host_counts.compare(baseline, current)
    for line in improvements:
        print(f"{verdict.HOST_LABELS[verdict.IMPROVEMENT]}: {line}")
    for line in failures:
        print(f"{verdict.HOST_LABELS[verdict.REGRESSION]}: {line}", file=sys.stderr)
    print(f"perfgate host: {len(failures)} count(s) grew, {len(improvements)} shrank")
    return 1 if failures else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "host",
        help="count custom_kernel's launches, allocations, copies, syncs and calls; gate exactly",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check",
        metavar="BASELINE",
        help=f"compare with a count file (perf_baselines/<device-key>/{HOST_COUNTS_NAME})",
    )
    parser.add_argument(
        "--gate",
        action="store_true",
        help=f"compare with this device's <baselines-dir>/<device-key>/{HOST_COUNTS_NAME}",
    )
    parser.add_argument(
        "--baselines-dir",
        default=str(DEFAULT_BASELINES),
        help="root of the per-device baselines (default: perf_baselines in the repository)",
    )
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="write the counts as JSON")
    parser.add_argument(
        "--update",
        action="store_true",
        help=f"record this device's <baselines-dir>/<device-key>/{HOST_COUNTS_NAME} (commit it)",
    )
    parser.set_defaults(func=_run)
