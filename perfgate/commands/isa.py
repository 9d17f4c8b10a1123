"""``python -m perfgate isa``: the static gfx950 / sm90 gate (compile, parse, compare; no GPU).

Modules: :mod:`.metrics` parses compiler output, :mod:`.collect` compiles every spec of a target
into a report, :mod:`.gate` compares a report with a baseline. docs/isa.md is the user guide.

Exit codes: 0 pass (or report written), 1 regression or a spec that no longer compiles,
2 unusable input (missing/corrupt/mismatched baseline, a missing spec provider or ziglang).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kernels.interpreter import interpret_mode
from perfgate.gate import settings
from perfgate.gate.compare import check_outputs
from perfgate.gate.settings import Key
from perfgate.refusal import Refusal


def register(subparsers: Any) -> None:
    from perfgate.isa.collect import TARGETS

    parser = subparsers.add_parser(
        "isa",
        help="static ISA gate: compile every shipped config for one target and compare",
        description=__doc__.splitlines()[0],
    )

    parser.add_argument(
        "--target", required=True, choices=TARGETS, help="the compile target: " + ", ".join(TARGETS)
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the current report here")
    parser.add_argument("--check", type=Path, metavar="BASELINE", help="compare with this baseline")
    parser.add_argument(
        "--jobs",
        type=settings.argument(JOBS, "--jobs"),
        default=None,
        metavar="N",
        help=f"compile processes ({JOBS.expected}; default: one per CPU)",
    )
    parser.add_argument(
        "--skip-native",
        action="store_true",
        help="do not compile the native HIP reducer; its baseline entries go unchecked",
    )
    parser.add_argument(
        "--providers",
        type=lambda s: tuple(p for p in s.split(",") if p),
        default=None,
        metavar="MOD[,MOD]",
        help="spec provider modules (default: kernels.gemm,kernels.splitk)",
    )
    settings.add_options(parser, settings.ISA)
    parser.set_defaults(func=run)


def _jobs_key():
    return Key("isa.jobs", int, 1, 256, "compile processes", "isa")


JOBS = _jobs_key()


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from perfgate.isa import collect, gate

    # before minutes of compiling: a path that cannot be written is refused at once; --json
    # writes the ISA baselines too (update-baselines --isa runs this command)
    check_outputs({"--json": args.json}, {"--check": args.check}, baselines=True)
    console = Console()
    if not console.is_terminal:
        # CI logs: rich would assume 80 columns and fold the long kernel[config] keys unreadably.
        console = Console(width=240)
    err = Console(stderr=True, soft_wrap=True)
    if interpret_mode():
        # Under the interpreter @triton.jit gives functions that triton.compile cannot build.
        raise Refusal("TRITON_INTERPRET is set; this command compiles for real targets: unset it")

    # before compiling: a bad --isa-* value, settings table or baseline is known at once
    tolerances = settings.from_args(args).isa
    baseline = None if args.check is None else gate.load(args.check, target=args.target)
    providers = args.providers or collect.PROVIDERS
    jobs = args.jobs or collect.default_jobs()
    try:
        report = collect.collect(
            args.target, providers=providers, native=not args.skip_native, jobs=jobs
        )
    except collect.ProviderError as exc:  # no compiler here: the environment's, exit 2
        err.print(f"[bold red]isa: {type(exc).__name__}: {escape(str(exc))}[/]")
        return 2
    except collect.CompileError as exc:  # the code under test no longer compiles: exit 1
        err.print(f"[bold red]isa: {escape(str(exc))}[/]")
        return 1
    if args.json is not None:
        collect.write_report(args.json, report)
        console.print(
            f"isa {args.target}: wrote {len(report['entries'])} entries to {escape(str(args.json))}"
        )
    if baseline is None:
        if args.json is None:
            json.dump(report, sys.stdout, indent=1)
            sys.stdout.write("\n")
        return 0
    skipped = ("native",) if args.skip_native else ()
    comparison = gate.compare(baseline, report, skipped_sources=skipped, tolerances=tolerances)
    gate.render(comparison, target=args.target, n_entries=len(report["entries"]), console=console)
    return 1 if comparison.regressions else 0
