"""``python -m perfgate experiment --inject 0.03,0.05,0.10 --runs N``: power and false alarms.

How often does the gate flag a true slowdown of 3, 5 and 10%, and how often an unchanged build,
in both of its modes: same-job A/B (``perfgate ab``) and against a stored baseline
(``perfgate bench``)? One command answers on the GPU at hand and writes the table the README
quotes.

**Design: samples are reused, never invented.** A *session* is two fresh worker processes of
this checkout on the GPU, A and B, exactly as ``perfgate ab`` runs a base and a head. A measures
the plain kernels; B measures the plain kernels and, for each level, the same calls captured with
a device sleep after them, calibrated in a closed loop until its measured size is the level
(:mod:`perfgate.measure.inject`). For every benchmark, after ``WARMUP_ROUNDS`` discarded rounds of every
stream (production's warm-up pass and pytest warm-up rounds), ``--trials`` times, all these
streams are measured interleaved (ABBA blocks) with the adaptive looks of the gate, continuing
while any A/B verdict of the trial is undecided.

- **A/B mode**: B's stream at each level against A's plain stream of the same trial, with the
  gate's A/B settings (``ab_min_effect``, ``looks``). Level 0 (B plain vs A plain: two
  processes, same code) counts the false alarms.
- **Stored-baseline mode**: the same streams of B against a baseline pooled as
  ``update-baselines`` pools its runs: ``baseline_runs`` (3) independent runs, here the first
  trial's plain A samples of as many *other* sessions (the next ones, cyclically), with the
  robust run-to-run drift of their medians (:func:`perfgate.gate.baseline.run_drift`, what
  ``baseline.drifts`` gives ``perfgate bench``) setting the threshold, judged by the same
  ``compare_samples`` call as ``bench``. A trial whose stored verdict would need more rounds than
  the A/B loop measured stays ``inconclusive``: it counts against the stored mode.
- **True size**: per trial, B's injected stream against B's plain stream, interleaved in the same
  process: ``median(injected) / median(plain) - 1``. The table gives its min / median / max beside
  the rates, and a second table gives detection by measured size (below, within, above
  ``SIZE_BAND`` of the level), so that a rate is never read against a nominal level the
  injection missed. Nothing is dropped: every trial is judged and counted.

Trials of one session share its processes, so they are not independent of each other as
sessions are; the report gives the counts with Clopper-Pearson 95% intervals over all trials
and says how many sessions they came from. Writes ``summary.md``, ``summary.json`` (with every
trial's verdicts and sizes, and each level's calibration) and ``samples.npz`` (every stream, for
re-analysis) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from perfgate import catalog
from perfgate.commands import base
from perfgate.experiment import (
    DEFAULT_LEVELS,
    SamplesError,
    Trial,
    counts,
    load_meta,
    load_samples,
    parse_levels,
    render,
    run_session,
    save_samples,
    summarise,
)
from perfgate.process_experiment import INJECTIONS


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
    from perfgate.gate import settings

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
        help=f"sessions: independent pairs of worker processes; a stored baseline is made of "
        f"other sessions ({RUNS.expected}; default: %(default)s)",
    )
    parser.add_argument(
        "--trials",
        type=settings.argument(TRIALS, "--trials"),
        default=None,
        metavar="N",
        help=f"--design rounds: trials per benchmark and session ({TRIALS.expected}; default: "
        f"{DEFAULT_TRIALS})",
    )
    parser.add_argument(
        "--design",
        choices=("processes", "rounds"),
        default="processes",
        help="processes: each of --runs is one verdict of perfgate ab's process-level A/B, fresh "
        "workers a side at every look (what the gate ships); rounds: the one-worker-a-side "
        "design judged at the round level, with the stored-baseline mode beside it; a "
        "re-analysis reads the design from its file (default: %(default)s)",
    )
    parser.add_argument(
        "--mode",
        choices=("device", "leaderboard"),
        default="device",
        help="--design processes: the timing mode of the workers and the ab_<mode> settings "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--injection",
        choices=INJECTIONS,
        default="sleep",
        help="--design processes: sleep, a device sleep after the calls calibrated in a closed "
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
        "each); several files of the process design are judged as one experiment; no GPU needed",
    )
    # --design rounds judges both ways (A/B and stored baseline): every stats key, device-mode
    # rounds; --design processes: the process-level A/B's sections
    settings.add_options(parser, settings.STATS, settings.AB, only=("rounds.device",))


def _keys():
    from perfgate.gate.settings import Key

    return (
        Key("experiment.runs", int, 2, 100, "sessions", "experiment"),
        Key("experiment.trials", int, 1, 100, "trials per benchmark and session", "experiment"),
        # a week: the longest lease anyone measures for
        Key("experiment.budget_s", float, 0, 7 * 86400, "seconds", "experiment", lo_open=True),
    )


RUNS, TRIALS, BUDGET = _keys()
DEFAULT_TRIALS = 5


def _run(args: argparse.Namespace) -> int:
    from perfgate import atomic
    from perfgate.gate import settings
    from perfgate.gate.compare import check_outputs
    from perfgate.measure import adaptive

    prog = "perfgate experiment"
    out = args.out
    design = args.design
    if args.reanalyse:
        from perfgate.process_experiment import file_design

        design = file_design(args.reanalyse[0])
    if design == "processes":
        return _run_processes(args)
    if args.reanalyse and len(args.reanalyse) > 1:
        print(f"{prog}: error: --reanalyse {args.reanalyse[0]}: holds round-design samples; "
              "re-analyse one such file at a time", file=sys.stderr)  # fmt: skip
        return 2
    if args.mode != "device" or args.injection != "sleep":
        flag = "--mode" if args.mode != "device" else "--injection"
        print(f"{prog}: error: {flag} applies to --design processes; --design rounds measures "
              "device mode with the calibrated sleep", file=sys.stderr)  # fmt: skip
        return 2
    given = [settings.key(k).flag for k in settings.overrides_from(args)
             if settings.key(k).group == settings.AB]  # fmt: skip
    if given:
        print(f"{prog}: error: {given[0]} applies to --design processes", file=sys.stderr)
        return 2
    if args.trials is None:
        args.trials = DEFAULT_TRIALS
    args.groups = args.groups or "leaderboard,reducer"
    if args.reanalyse:
        args.reanalyse = args.reanalyse[0]
    try:
        gate = settings.from_args(args)
        levels = parse_levels(args.inject)
        selected = catalog.cases(tuple(args.groups.split(",")), args.keyword)
        names = ["summary.json", "summary.md"]
        inputs = {}
        if args.reanalyse:
            inputs = {"--reanalyse": args.reanalyse, "meta.json": _meta_path(args.reanalyse)}
        else:
            names += ["samples.npz", "meta.json"]
        atomic.check_output_dirs({"--out": out})
        check_outputs([("--out", out / name) for name in names], inputs)
        if args.reanalyse:
            trials = load_samples(args.reanalyse)
            recorded = load_meta(_meta_path(args.reanalyse))
    except (settings.SettingsError, SamplesError, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    totals = adaptive.schedule(gate.rounds["device"], gate.stats.looks)
    meta = {
        "command": " ".join(["python -m perfgate experiment", *sys.argv[2:]]),
        "totals": totals,
        "levels": list(levels),
        "baseline_runs": gate.baseline_runs,
        "settings": {
            k: v for k, v in gate.values().items() if settings.key(k).group != settings.AB
        },
    }
    if args.reanalyse:
        # the measuring run's device and calibration
        meta.update({k: recorded[k] for k in ("device", "calibration") if k in recorded})
        meta.setdefault("device", "(re-analysed)")
    else:
        if not base.gpu_available():
            return base.no_gpu("experiment")
        from perfgate.measure.interleave import WorkerError

        try:
            trials = _measure(args, selected, levels, gate, totals, meta)
        except WorkerError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return 2
        if args.measure_only:
            print(f"experiment: {len(trials)} trials in {out}/samples.npz; judge them with "
                  f"--reanalyse {out}/samples.npz")  # fmt: skip
            return 0
    meta.update(counts(trials))
    summary = summarise(trials, gate.stats, totals, levels, meta, gate.baseline_runs)
    atomic.write_text(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    text = render(summary)
    atomic.write_text(out / "summary.md", text)
    print(text)
    return 0


def _meta_path(samples: Path) -> Path:
    return samples.with_name("meta.json")


def _measure(args, selected, levels, gate, totals, meta) -> list[Trial]:
    """Sessions until ``--runs`` or the budget; the samples and meta are written after every
    session, so that a run cut short still leaves what it measured."""
    from perfgate import atomic
    from perfgate.measure import fingerprint

    fp = fingerprint.collect()
    meta["device"] = (
        f"{fp['gpu_name']} ({fp['device_key']}), torch {fp['torch']}, triton {fp['triton']}"
    )
    meta["calibration"] = {}
    trials: list[Trial] = []
    start, longest = time.monotonic(), 0.0
    for session in range(args.runs):
        budget = args.budget_s
        if session and budget is not None and time.monotonic() - start + longest > budget:
            print(f"experiment: budget reached after {session} sessions", flush=True)
            break
        t0 = time.monotonic()
        trials += run_session(
            session, selected, levels, gate.stats, totals, args.trials, meta["calibration"]
        )
        longest = max(longest, time.monotonic() - t0)
        meta.update(counts(trials))  # what ran so far, should the run be cut short
        save_samples(args.out / "samples.npz", trials)
        atomic.write_text(args.out / "meta.json", json.dumps(meta, indent=1) + "\n")
        print(f"experiment: session {session} done in {time.monotonic() - t0:.0f} s", flush=True)
    return trials


# Stats keys the process design reads; the rest would be ignored, and are refused.
_PROCESS_STATS = ("alpha",)


def _run_processes(args: argparse.Namespace) -> int:
    """The process-level design (perfgate.process_experiment): measure verdicts, or judge the
    samples of earlier runs."""
    from perfgate import atomic
    from perfgate import process_experiment as pe
    from perfgate.gate import process_ab, settings
    from perfgate.gate.compare import check_outputs

    prog = "perfgate experiment"
    out = args.out
    try:
        gate = settings.from_args(args)
        for name in settings.overrides_from(args):
            k = settings.key(name)
            if k.group not in (settings.AB,) and name not in _PROCESS_STATS:
                raise ValueError(f"{k.flag} applies to --design rounds (the process design "
                                 "judges with alpha and [tool.perfgate.ab_<mode>])")  # fmt: skip
        if args.trials is not None:
            raise ValueError("--trials applies to --design rounds (each verdict is one trial "
                             "of every benchmark)")  # fmt: skip
        from perfgate.measure.ab import default_groups

        levels = parse_levels(args.inject)
        groups = args.groups or default_groups(args.mode)
        selected = catalog.cases(tuple(groups.split(",")), args.keyword, mode=args.mode)
        names = ["summary.json", "summary.md"]
        inputs = {}
        for i, path in enumerate(args.reanalyse or []):
            inputs[f"--reanalyse {i + 1}"] = path
            inputs[f"meta.json {i + 1}"] = _meta_path(path)
        if not args.reanalyse:
            names += ["samples.npz", "meta.json"]
        atomic.check_output_dirs({"--out": out})
        check_outputs([("--out", out / name) for name in names], inputs)
        if args.reanalyse:
            trials, metas = pe.load(args.reanalyse)
            recorded = _one_design(metas, args.reanalyse)
            mode = recorded.get("mode", args.mode)
            injection = recorded.get("injection", args.injection)
            design = _recorded_design(gate, mode, recorded)
        else:
            mode, injection = args.mode, args.injection
            design = process_ab.design_for(gate, mode)
        from perfgate.measure.ab import check_mode_options

        check_mode_options(settings.overrides_from(args), mode)
    except (settings.SettingsError, SamplesError, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    meta = {
        "command": " ".join(["python -m perfgate experiment", *sys.argv[2:]]),
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
            return base.no_gpu("experiment")
        from perfgate.measure.ab import PrepareError
        from perfgate.measure.interleave import WorkerError

        meta["device"] = _device()
        try:
            trials = pe.measure(args, selected, levels, design, injection, meta, out, mode)
        except (WorkerError, PrepareError) as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return 2
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


def _device() -> str:
    from perfgate.measure import fingerprint

    fp = fingerprint.collect()
    return f"{fp['gpu_name']} ({fp['device_key']}), torch {fp['torch']}, triton {fp['triton']}"


def _one_design(metas: list[dict], paths: list[Path]) -> dict:
    """The design the files were measured with: one for all of them (ValueError otherwise)."""
    designs = [m.get("design") or {} for m in metas]
    keys = ("mode", "injection", "processes", "rounds")
    first = {k: designs[0].get(k) for k in keys}
    for path, d in zip(paths, designs, strict=True):
        if {k: d.get(k) for k in keys} != first:
            raise ValueError(f"--reanalyse {path}: measured with {d or 'no recorded design'}, "
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
