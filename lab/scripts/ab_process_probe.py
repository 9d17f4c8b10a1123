"""``python -m lab.scripts.ab_process_probe``: the constants of the process-level A/B on the GPU at hand.

Measure (GPU): ``--workers N`` worker processes of this checkout (``perfgate.measure.worker``) are
started at once; every benchmark of the default A/B selection is prepared in worker 0 alone,
then in the others all at once (to see whether prepares may overlap), then ``--rounds`` rounds
of every worker are measured interleaved in ABBA blocks after 20 discarded ones. Two workers
started alone first give the start-to-first-prepare time. Writes ``probe.json`` (timings) and
``probe.npz`` (every worker's rounds) under ``--out``.

Summarise (anywhere): ``--summarise DIR`` prints, per benchmark, the median, the round noise,
the spread of the workers' levels and how much of it their rounds' noise explains, and each
worker's factor common to all benchmarks: what docs/ab-process-level.md quotes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from perfgate.commands import base
from perfgate.gate.paths import REPO
from perfgate.measure import interleave
from perfgate.measure.interleave import WorkerError
from perfgate.measure.worker import PLAIN

WARMUP_ROUNDS = 20


def _prepare(workers, case: dict) -> None:
    """Send the prepare to every worker, then read every answer (they prepare at once)."""
    request = json.dumps({"op": "prepare", "cases": [case], "levels": []}) + "\n"
    for w in workers:
        w.proc.stdin.write(request)
        w.proc.stdin.flush()
    for w in workers:
        answer = json.loads(w.proc.stdout.readline() or "{}")
        if not answer.get("ok"):
            raise WorkerError(f"{w.label}: prepare {case['name']}: {answer.get('error')}")


def measure(workers: int, rounds: int, out: Path) -> dict:
    from perfgate import catalog

    cases = catalog.cases(("leaderboard", "reducer"), None)
    timings: dict = {"prepare_alone": {}, "prepare_together": {}, "rounds": {}}
    for k in range(2):
        t = time.monotonic()
        solo = interleave.SideProcess(f"solo{k}", REPO)
        _prepare([solo], cases[0])
        timings[f"start_and_first_prepare_{k}"] = time.monotonic() - t
        solo.close()
    t0 = time.monotonic()
    pool = [interleave.SideProcess(f"w{i}", REPO) for i in range(workers)]
    samples = {}
    try:
        for case in cases:
            name = case["name"]
            t = time.monotonic()
            _prepare(pool[:1], case)
            timings["prepare_alone"][name] = time.monotonic() - t
            t = time.monotonic()
            _prepare(pool[1:], case)
            timings["prepare_together"][name] = time.monotonic() - t
            streams = [interleave.Stream(w, name, PLAIN) for w in pool]
            interleave.measure(streams, WARMUP_ROUNDS, {})
            got: dict = {}
            t = time.monotonic()
            interleave.measure(streams, rounds, got)
            timings["rounds"][name] = (time.monotonic() - t) / (rounds * workers)
            samples.update({f"{name}|{key[0]}": np.asarray(v) for key, v in got.items()})
            print(name, {k: round(v[name], 4) for k, v in timings.items() if isinstance(v, dict)})
        timings["total"] = time.monotonic() - t0
    finally:
        t = time.monotonic()
        for w in pool:
            w.close()
        timings["close_all"] = time.monotonic() - t
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "probe.npz", **samples)
    (out / "probe.json").write_text(json.dumps(timings, indent=1) + "\n")
    return timings


def summarise(directory: Path, trim: float = 0.2) -> str:
    from perfgate.gate.process_ab import process_levels

    timings = json.loads((directory / "probe.json").read_text())
    with np.load(directory / "probe.npz") as data:
        by_case: dict[str, dict[str, np.ndarray]] = {}
        for key in data.files:
            case, worker = key.rsplit("|", 1)
            by_case.setdefault(case, {})[worker] = data[key]
    names = list(timings["prepare_alone"])
    workers = sorted(by_case[names[0]], key=lambda w: int(w[1:]))
    levels = np.array(
        [[float(process_levels(by_case[c][w], trim)) for c in names] for w in workers]
    )
    centred = levels - levels.mean(axis=0)
    factors = np.median(centred, axis=1)
    lines = [
        "| benchmark | median, us | round noise | workers' levels: SD | of which rounds | beyond "
        "rounds | prepare alone, s | prepared together, s | ms a round |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for j, c in enumerate(names):
        xs = [by_case[c][w] for w in workers]
        noise = np.median([1.4826 * np.median(abs(x - np.median(x))) / np.median(x) for x in xs])
        round_se = np.sqrt(np.mean([_trimmed_se(np.log(x), trim) ** 2 for x in xs]))
        spread = centred[:, j].std(ddof=1)
        beyond = np.sqrt(max(spread**2 - round_se**2, 0.0))
        lines.append(
            f"| {c.split('[')[-1].rstrip(']')} | {np.median(np.concatenate(xs)) * 1e6:.3f} | "
            f"{noise:.2%} | {spread:.3%} | {round_se:.3%} | {beyond:.3%} | "
            f"{timings['prepare_alone'][c]:.2f} | {timings['prepare_together'][c]:.1f} | "
            f"{timings['rounds'][c] * 1e3:.2f} |"
        )
    lines.append("")
    lines.append(
        f"{len(workers)} workers; factors common to all benchmarks: SD {factors.std(ddof=1):.3%}, "
        f"largest {np.abs(factors).max():.3%}; start and first prepare alone: "
        f"{timings['start_and_first_prepare_0']:.1f} s, {timings['start_and_first_prepare_1']:.1f}"
        f" s; closing all: {timings['close_all']:.1f} s"
    )
    return "\n".join(lines)


def _trimmed_se(x: np.ndarray, trim: float) -> float:
    """Standard error of a trimmed mean (winsorised standard deviation)."""
    s = np.sort(x)
    cut = int(trim * s.size)
    kept = s[cut : s.size - cut]
    wins = np.clip(s, kept[0], kept[-1])
    return float(wins.std(ddof=1) / ((1 - 2 * trim) * np.sqrt(s.size)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.scripts.ab_process_probe",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path(".perfgate/ab-probe"))
    parser.add_argument("--summarise", type=Path, metavar="DIR", help="print the tables of DIR")
    args = parser.parse_args(argv)
    if args.summarise:
        try:
            print(summarise(args.summarise))
        except (OSError, KeyError, ValueError) as exc:
            print(f"ab_process_probe: error: {args.summarise}: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.workers < 2 or args.rounds < 10:
        print("ab_process_probe: error: need --workers >= 2 and --rounds >= 10", file=sys.stderr)
        return 2

    if not base.gpu_available():
        return base.no_gpu("ab_process_probe")
    measure(args.workers, args.rounds, args.out)
    print(summarise(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
