"""``python -m lab experiment --inject 0.01,0.03 --runs N``: power and false alarms of the gate.

How often does ``perfgate ab`` flag a true slowdown of each injected level, and how often an
unchanged build? One command answers on the GPU at hand and writes the table the docs quote.

**Design: every verdict is the gate's own.** A *verdict* is what ``perfgate ab`` does once, with
both sides this checkout: fresh worker processes a side at every look, the looks, processes and
thresholds of ``[tool.perfgate.ab_<mode>]``, every benchmark judged by
:func:`perfgate.gate.process_ab.judge`. Side A measures the plain kernels; side B the plain
kernels and, per level, the same calls slowed down (``--injection``):

- ``sleep``: a device sleep after the calls, calibrated in a closed loop until its measured size
  is the level (:mod:`lab.inject`); each judgement's *measured size* is B's
  injected processes against B's plain ones, and the report gives detection by measured size
  (below, within, above ±15% of the level) so that a rate is never read against a level the
  injection missed;
- ``factor``: B's plain rounds x (1 + level), an exact size on real noise.

Level 0 (B plain against A plain: two sides, same code) counts the false alarms. Counts come
with Clopper-Pearson 95% intervals. Writes ``summary.md``, ``summary.json`` (every judgement)
and, when measuring, ``samples.npz`` and ``meta.json`` (every process's rounds, for
``--reanalyse`` on any machine) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab import process_experiment as pe
from lab.process_experiment import DEFAULT_LEVELS, INJECTIONS, ExperimentError, parse_levels
from perfgate import atomic, catalog
from perfgate.commands import base
from perfgate.gate import settings
from perfgate.gate.compare import check_outputs
from perfgate.gate.settings import Key
from perfgate.measure import fingerprint
from perfgate.measure.ab import PrepareError, check_mode_options, default_groups
from perfgate.measure.interleave import WorkerError
from perfgate.modes import AB_MODE_NAMES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "experiment",
        help="measure the gate's power and false-alarm rate with injected slowdowns (GPU)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _options(parser)
    parser.set_defaults(func=_run)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--inject",
        default=",".join(f"{x:g}" for x in DEFAULT_LEVELS),
        help="slowdowns to inject, distinct fractions in (0, 1) (default: %(default)s)",
    )
    parser.add_argument(
        "--runs",
        type=settings.argument(RUNS, "--runs"),
        default=3,
        metavar="N",
        help=f"verdicts: each one perfgate ab of this checkout against itself, fresh workers a "
        f"side at every look ({RUNS.expected}; default: %(default)s)",
    )
    parser.add_argument(
        "--mode",
        choices=AB_MODE_NAMES,
        default="device",
        help="the timing mode of the workers, and the [tool.perfgate.ab_<mode>] design they are "
        "judged with (default: %(default)s)",
    )
    parser.add_argument(
        "--injection",
        choices=INJECTIONS,
        default="sleep",
        help="sleep, a device sleep after the calls calibrated in a closed "
        "loop (the measured size is reported); factor, B's plain rounds x (1 + level), an exact "
        "size that tests the statistics alone (default: %(default)s)",
    )
    parser.add_argument(
        "--groups",
        help="comma-separated benchmark groups of leaderboard, reducer, grid (default: "
        "leaderboard,reducer; leaderboard alone with --mode leaderboard)",
    )
    parser.add_argument("-k", dest="keyword", metavar="TEXT", help="only names containing TEXT")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".perfgate/experiment"),
        metavar="DIR",
        help="directory for summary.md, summary.json and, when measuring, samples.npz and "
        "meta.json (default: %(default)s)",
    )
    parser.add_argument(
        "--budget-s",
        type=settings.argument(BUDGET, "--budget-s"),
        default=None,
        metavar="S",
        help=f"start no session that would end after this many seconds ({BUDGET.expected}; "
        "default: no limit)",
    )
    parser.add_argument(
        "--measure-only",
        action="store_true",
        help="write samples.npz and meta.json, and leave the judging to --reanalyse elsewhere "
        "(its bootstrap takes minutes of CPU that a GPU lease need not pay for)",
    )
    parser.add_argument(
        "--reanalyse",
        type=Path,
        nargs="+",
        metavar="NPZ",
        help="judge the samples of earlier runs' samples.npz (and read the meta.json beside "
        "each); several files are judged as one experiment; no GPU needed",
    )
    # a verdict is judged at alpha with the ab_<mode> sections' thresholds, nothing else
    settings.add_options(parser, settings.AB, only=("alpha",))


def _keys():
    return (
        Key("experiment.runs", int, 2, 100, "verdicts", "experiment"),
        # a week: the longest lease anyone measures for
        Key("experiment.budget_s", float, 0, 7 * 86400, "seconds", "experiment", lo_open=True),
    )


RUNS, BUDGET = _keys()


def _meta_path(samples: Path) -> Path:
    return samples.with_name("meta.json")


def _run(args: argparse.Namespace) -> int:
    """Measure verdicts, or judge the samples of earlier runs. Unusable input rises as a
    Refusal, answered by main (one line, exit 2)."""
    from perfgate.gate import process_ab, settings

    out = args.out
    gate = settings.from_args(args)
    levels = parse_levels(args.inject)
    names = ["summary.json", "summary.md"]
    inputs = {}
    for i, path in enumerate(args.reanalyse or []):
        inputs[f"--reanalyse {i + 1}"] = path
        inputs[f"meta.json {i + 1}"] = _meta_path(path)
    if not args.reanalyse:
        names += ["samples.npz", "meta.json"]
    _library_input(atomic.check_output_dirs, {"--out": out})
    _library_input(check_outputs, [("--out", out / name) for name in names], inputs)
    if args.reanalyse:
        trials, metas = pe.load(args.reanalyse)
        recorded = _one_design(metas, args.reanalyse)
        mode = recorded.get("mode", args.mode)
        injection = recorded.get("injection", args.injection)
        design = _recorded_design(gate, mode, recorded)
    else:
        mode, injection = args.mode, args.injection
        design = process_ab.design_for(gate, mode)
    # after the files are checked: selecting the cases loads torch (the reducer cases' configs),
    # which a file that cannot be used should not wait for
    groups = args.groups or default_groups(args.mode)
    selected = _library_input(catalog.cases, tuple(groups.split(",")), args.keyword, mode=args.mode)
    _library_input(check_mode_options, settings.overrides_from(args), mode)
    meta = {
        "command": " ".join(["python -m lab experiment", *sys.argv[2:]]),
        "levels": list(levels),
        "design": {
            "unit": "process",
            "mode": mode,
            "injection": injection,
            "processes": list(design.processes),
            "rounds": design.rounds,
            "min_effect": design.min_effect,
            "floor": design.floor,
            "alpha": design.alpha,
        },
        "settings": gate.values(),
    }
    if args.reanalyse:
        for m in metas:  # the measuring runs' devices, calibrations and times
            meta.setdefault("device", m.get("device", "(re-analysed)"))
            meta.setdefault("calibration", {}).update(m.get("calibration") or {})
            meta.setdefault("verdict_seconds", []).extend(m.get("verdict_seconds") or [])
    else:
        if not base.gpu_available():
            return base.no_gpu("experiment", prog="lab")

        meta["device"] = _device()
        try:
            trials = pe.measure(args, selected, levels, design, injection, meta, out, mode)
        except (WorkerError, PrepareError) as exc:
            # a side that cannot be measured leaves nothing to judge: one line, exit 2
            raise ExperimentError(str(exc)) from None
        if args.measure_only:
            got = pe.counts(trials)
            print(f"experiment: {got['verdicts']} verdicts x {got['benchmarks']} benchmarks in "
                  f"{out}/samples.npz; judge them with --reanalyse {out}/samples.npz")  # fmt: skip
            return 0
    meta.update(pe.counts(trials))
    summary = pe.summarise(trials, design, levels, injection, meta)
    atomic.write_text(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    text = pe.render(summary)
    atomic.write_text(out / "summary.md", text)
    print(text)
    return 0


def _library_input(check, *args, **kwargs):
    """``check(*args, **kwargs)``, its ValueError (perfgate's library says so of an unusable
    option: a group, an output path, another mode's A/B option) raised as a Refusal."""
    try:
        return check(*args, **kwargs)
    except ValueError as exc:
        if isinstance(exc, ExperimentError):
            raise
        raise ExperimentError(str(exc)) from None


def _device() -> str:
    fp = fingerprint.collect()
    return f"{fp['gpu_name']} ({fp['device_key']}), torch {fp['torch']}, triton {fp['triton']}"


def _one_design(metas: list[dict], paths: list[Path]) -> dict:
    """The design the files were measured with: one for all of them (ExperimentError otherwise)."""
    designs = [m.get("design") or {} for m in metas]
    keys = ("mode", "injection", "processes", "rounds")
    first = {k: designs[0].get(k) for k in keys}
    for path, d in zip(paths, designs, strict=True):
        if {k: d.get(k) for k in keys} != first:
            raise ExperimentError(f"--reanalyse {path}: measured with {d or 'no recorded design'}, "
                             f"the first file with {first}; judge like with like")  # fmt: skip
    return designs[0]


def _recorded_design(gate, mode: str, recorded: dict):
    """Today's thresholds (the settings, with their overrides) on the recorded looks."""
    from perfgate.gate import process_ab

    design = process_ab.design_for(gate, mode)
    if recorded.get("processes"):
        design = process_ab.Design(
            min_effect=design.min_effect, floor=design.floor, alpha=design.alpha,
            processes=tuple(recorded["processes"]), rounds=int(recorded["rounds"]),
        )  # fmt: skip
    return design
