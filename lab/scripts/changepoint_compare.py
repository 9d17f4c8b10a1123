"""Change-point detectors on synthetic GPU-like histories: detection rate, false alarms, runtime.

``python -m lab.scripts.changepoint_compare [--trials N] [--length N] [--seed S]``

Each series is the per-run medians of one benchmark: a level with 0.5% log-normal run-to-run
noise, and in 5% of the runs a slow episode of +2.4..4.2% (the H200's, README "Performance
gate"). Planted series get one step of 2, 3, 5 or 10% (slower or faster, at a random run in the
middle half); noise series get none. A planted step is found when a step of its sign is reported
within one run of it; any other reported step is a false alarm. Every detector goes through the
same filters (:func:`perfgate.history.steps.find_steps`: minimum effect, minimum segment, Welch
test), so only the segmentation differs. ruptures is required; MongoDB's E-Divisive
(``signal-processing-algorithms``, which pins numpy < 2) is measured where it is installed.
docs/history.md holds the figures.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from perfgate.history import steps as st
from tests.perfgate.histories import series  # the tests' GPU-like run histories

SIZES = (0.02, 0.03, 0.05, 0.10)


def pelt(x, sigma, settings):
    import ruptures

    algo = ruptures.Pelt(model="l2", min_size=settings.min_size, jump=1)
    bkps = algo.fit(x.reshape(-1, 1)).predict(pen=settings.penalty * sigma**2 * math.log(len(x)))
    return [int(b) for b in bkps[:-1]]


def e_divisive(x, sigma, settings):
    from signal_processing_algorithms.determinism import deterministic_numpy_random
    from signal_processing_algorithms.energy_statistics.energy_statistics import (
        e_divisive as edm,
    )

    with deterministic_numpy_random(0):
        return [int(c) for c in edm(x, pvalue=0.05, permutations=100) if 0 < c < len(x)]


def detectors():
    out = {"ruptures PELT l2": pelt, "ruptures Binseg l2": st.binseg}
    try:
        import signal_processing_algorithms  # noqa: F401
    except ImportError:
        print("signal-processing-algorithms is not installed: E-Divisive not measured")
    else:
        out["E-Divisive (MongoDB)"] = e_divisive
    return out


def measure(segmenter, settings, trials: int, n: int, seed: int, *, filters: bool = True):
    rng = np.random.default_rng(seed)
    found = dict.fromkeys(SIZES, 0)
    extra = 0
    noisy = 0
    seconds = 0.0
    for _ in range(trials):
        for size in SIZES:
            sign = 1 if rng.random() < 0.5 else -1
            at = int(rng.integers(n // 4, 3 * n // 4))
            y = series(rng, n, sign * size, at)
            t0 = time.perf_counter()
            got = _steps(y, segmenter, settings, filters)
            seconds += time.perf_counter() - t0
            hit = [s for s in got if abs(s[0] - at) <= 1 and s[1] * sign > 0]
            found[size] += bool(hit)
            extra += len(got) - min(len(hit), 1)
        y = series(rng, n, 0.0, 0)
        t0 = time.perf_counter()
        noisy += bool(_steps(y, segmenter, settings, filters))
        seconds += time.perf_counter() - t0
    calls = trials * (len(SIZES) + 1)
    return found, extra, noisy, 1e3 * seconds / calls


def _steps(y, segmenter, settings, filters):
    if filters:
        return [(s.index, s.change) for s in st.find_steps(y, settings, segmenter=segmenter)]
    x = np.log(y)
    cuts = sorted(segmenter(x, st.robust_noise(x), settings))
    bounds = [0, *cuts, len(y)]
    return [
        (c, np.median(y[c : bounds[i + 2]]) / np.median(y[bounds[i] : c]) - 1)
        for i, c in enumerate(cuts)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="series per step size")
    parser.add_argument("--length", type=int, default=40, help="runs per series")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-effect", type=float, default=0.015)
    parser.add_argument("--min-size", type=int, default=3)
    parser.add_argument("--penalty", type=float, default=5.0)
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="measure only detectors containing NAME"
    )
    args = parser.parse_args(argv)
    settings = st.StepSettings(args.min_effect, args.min_size, args.penalty, args.alpha)
    t, n = args.trials, args.length
    print(f"{t} series per row and size, {n} runs each, {settings}")
    head = " | ".join(f"{s:.0%} found" for s in SIZES)
    print(f"| detector | filters | {head} | extra steps | noise series flagged | ms per series |")
    print("| --- | --- |" + " ---: |" * (len(SIZES) + 3))
    for name, segmenter in detectors().items():
        if args.only and not any(o.lower() in name.lower() for o in args.only):
            continue
        for filters in (False, True):
            found, extra, noisy, ms = measure(segmenter, settings, t, n, args.seed, filters=filters)
            cells = " | ".join(f"{found[s]}/{t}" for s in SIZES)
            print(
                f"| {name} | {'yes' if filters else 'no'} | {cells} | {extra} | {noisy}/{t} "
                f"| {ms:.1f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
