"""``python -m lab.scripts.ab_power``: false alarms, power and GPU cost of process-level A/B designs
on synthetic samples (:mod:`lab.synthetic`), the tables of docs/ab-process-level.md.

Each cell judges ``--trials`` independent synthetic benchmarks with the adaptive looks of
:mod:`perfgate.gate.process_ab` and counts the verdicts; rates come with Clopper-Pearson 95%
intervals. The GPU cost of one verdict on the selection is the expected time of the looks under
:class:`CostModel` (the H200 figures; docs/ab-process-level.md#cost-model), with the benchmarks
still pending at each look taken from the simulation.

    python -m lab.scripts.ab_power designs --model brief-device --processes 2,3,4,6,8 --rounds 100
    python -m lab.scripts.ab_power methods --model brief-device --processes 4,8 --trials 1000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from lab import synthetic
from perfgate.gate import process_ab as pa

EFFECTS = (0.0, 0.01, 0.02, 0.03)
INCONCLUSIVE = pa.VERDICTS.index(pa.INCONCLUSIVE)
REGRESSION = pa.VERDICTS.index(pa.REGRESSION)
IMPROVEMENT = pa.VERDICTS.index(pa.IMPROVEMENT)
# Trials judged per batch: bounds the memory of the (trials, processes, rounds) arrays.
_BATCH_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class CostModel:
    """GPU seconds of one A/B verdict on a selection, from the figures measured on the H200
    (docs/ab-process-level.md#cost-model). Prepares run one worker at a time (in parallel they
    took 3-7x longer), so they add up; the workers a look starts start together (one wave).

    ``prepare_s`` holds each benchmark's prepare in one worker, in the order of the benchmarks'
    medians (shortest first), so that a simulated benchmark is charged the prepare of the
    measured one of the same rank."""

    name: str
    fixed_s: float  # worktree + both sides' reducer builds
    start_s: float  # one wave of worker starts (python, torch, CUDA context)
    prepare_s: tuple[float, ...]  # inputs, output checks, graph capture: per benchmark
    round_s: float  # one round of one stream, its share of the block's pipe round trip
    warmup_rounds: int  # discarded rounds per stream after each prepare
    close_s: float  # closing one worker
    parallel_close: bool  # workers closed together (one close_s) or one after another

    @property
    def benchmarks(self) -> int:
        return len(self.prepare_s)

    def today(self, rounds: int = 200) -> float:
        """One worker a side, one look of ``rounds`` rounds: today's ``perfgate ab``."""
        return self.verdict_cost([(1, rounds)], np.ones((1, self.benchmarks)))

    def verdict_cost(self, plan, pending: np.ndarray) -> float:
        """Expected seconds for the looks of ``plan`` ((processes a side, rounds a process) per
        look): ``pending[k, b]`` is the probability that benchmark ``b`` (by rank of median) is
        still measured at look ``k`` (1 at the first). A look starts its new workers only if any
        benchmark is pending; old workers are topped up only when the rounds grow."""
        pending = np.asarray(pending, dtype=np.float64)
        if pending.shape != (len(plan), self.benchmarks):
            raise ValueError(
                f"pending must have shape ({len(plan)}, {self.benchmarks}), got {pending.shape}"
            )
        prepare = np.asarray(self.prepare_s)
        total, have_p, have_r, workers = self.fixed_s, 0, 0, 0.0
        for k, (processes, rounds) in enumerate(plan):
            pend = pending[k]
            new = 2 * (processes - have_p)
            started = 1 - float(np.prod(1 - pend))  # the chance that this look runs at all
            if new:
                total += started * self.start_s
                workers += started * new
            measured = new * (rounds + self.warmup_rounds) + 2 * have_p * (rounds - have_r)
            total += float(pend @ (new * prepare)) + float(pend.sum()) * measured * self.round_s
            have_p, have_r = processes, rounds
        return total + (self.close_s if self.parallel_close else workers * self.close_s)


# Measured on the H200 (docs/ab-process-level.md#cost-model): a reducer build 9 s (two, one
# after the other, and the worktree), a worker start 4.7-5.6 s, each benchmark's prepare (the
# reducers' three, then the GEMMs' six by median; m4-n2880-k512's is taken as m16's, its
# measurement held the worker's start), 0.39-0.90 ms a round, 0.6 s to close a worker.
DEVICE_PREPARE_S = (0.17, 0.17, 0.10, 0.93, 0.33, 0.94, 0.93, 1.42, 1.69)
DEVICE_COST = CostModel("device", 19.0, 5.0, DEVICE_PREPARE_S, 0.0005, 10, 0.6, False)
# The same with the two savings the wiring gets for free: both builds at once (own caches, own
# locks) and the workers closed together.
DEVICE_LEAN_COST = CostModel("device-lean", 10.0, 5.0, DEVICE_PREPARE_S, 0.0005, 10, 1.0, True)
# Leaderboard mode: the 6 GEMM shapes by median; a round is the 2 GiB flush (0.5 ms of GPU),
# the call and a synchronisation: 1 ms, an estimate (not measured in a worker).
LEADERBOARD_PREPARE_S = (0.93, 0.33, 0.94, 0.93, 1.42, 1.69)
LEADERBOARD_COST = CostModel("leaderboard", 19.0, 5.0, LEADERBOARD_PREPARE_S, 0.001, 10, 0.6, False)
LEADERBOARD_LEAN_COST = CostModel(
    "leaderboard-lean", 10.0, 5.0, LEADERBOARD_PREPARE_S, 0.001, 10, 1.0, True
)
COSTS = {
    c.name: c for c in (DEVICE_COST, DEVICE_LEAN_COST, LEADERBOARD_COST, LEADERBOARD_LEAN_COST)
}


@dataclass
class Cell:
    """The verdicts of ``n`` trials at one effect, and who was pending at each look."""

    effect: float
    n: int
    counts: np.ndarray  # per verdict code
    pending: np.ndarray  # (looks, benchmarks): fraction of each benchmark's trials measured
    looks: np.ndarray = field(default_factory=lambda: np.zeros(0))  # decided at look k

    def rate(self, codes) -> tuple[int, float, float, float]:
        k = int(sum(self.counts[c] for c in codes))
        lo, hi = clopper_pearson(k, self.n)
        return k, k / self.n, lo, hi


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    if n == 0:
        return 0.0, 1.0
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


# -- the methods compared ------------------------------------------------------------------------
def student_bounds(b, h, design):
    la, lb = pa.process_levels(b, design.trim), pa.process_levels(h, design.trim)
    _, lo, hi, *_ = pa.bounds(la, lb, design.look_alpha, "student")
    return lo, hi


def welch_bounds(b, h, design):
    la, lb = pa.process_levels(b, design.trim), pa.process_levels(h, design.trim)
    _, lo, hi, *_ = pa.bounds(la, lb, design.look_alpha, "welch")
    return lo, hi


def rank_bounds(b, h, design):
    """Exact Mann-Whitney (Hodges-Lehmann) bounds of the shift of per-process log levels: the
    k-th pairwise difference, k from the exact null distribution of U (no normal
    approximation: with a few processes a side it is coarse, 1 / C(2P, P) at best)."""
    la, lb = pa.process_levels(b, design.trim), pa.process_levels(h, design.trim)
    m, n = la.shape[-1], lb.shape[-1]
    diffs = np.sort((lb[..., :, None] - la[..., None, :]).reshape(*la.shape[:-1], m * n), axis=-1)
    cdf = np.cumsum(_mann_whitney_counts(m, n)) / math.comb(m + n, m)
    k = int(np.searchsorted(cdf, design.look_alpha, side="right"))  # P(U <= k - 1) <= alpha
    if k < 1:
        inf = np.full(diffs.shape[:-1], np.inf)
        return -inf, inf
    return diffs[..., k - 1], diffs[..., m * n - k]


def _mann_whitney_counts(m: int, n: int) -> np.ndarray:
    """Number of orderings of m + n values with U = u, u = 0 .. m n (dynamic programming)."""
    table = {(0, j): np.ones(1) for j in range(n + 1)} | {(i, 0): np.ones(1) for i in range(m + 1)}
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            out = np.zeros(i * j + 1)
            a, c = table[(i - 1, j)], table[(i, j - 1)]
            out[j : j + a.size] += a  # the largest value is an x: it beats all j of y
            out[: c.size] += c
            table[(i, j)] = out
    return table[(m, n)]


def cluster_bootstrap_bounds(b, h, design, resamples: int = 400, seed: int = 1):
    """Two-stage percentile bootstrap: processes resampled within each side, then each chosen
    process's rounds; bounds are the alpha and 1 - alpha quantiles of the difference."""
    rng = np.random.default_rng(seed)
    lows, highs = [], []
    for bt, ht in zip(b, h, strict=True):
        stats = []
        for side in (bt, ht):
            p, r = side.shape
            who = rng.integers(0, p, (resamples, p))
            which = rng.integers(0, r, (resamples, p, r))
            picked = side[who[..., None], which]
            stats.append(pa.process_levels(picked, design.trim).mean(axis=-1))
        d = stats[1] - stats[0]
        lows.append(np.quantile(d, design.look_alpha))
        highs.append(np.quantile(d, 1 - design.look_alpha))
    return np.array(lows), np.array(highs)


def rounds_bounds(b, h, design):
    """Rounds as the unit (today's assumption): the pooled rounds of each side, their log
    trimmed means, and a t interval whose standard error treats every round as independent."""
    from scipy.stats import t as student

    out = []
    for side in (b, h):
        x = np.log(side.reshape(side.shape[0], -1))
        x = np.sort(x, axis=-1)
        n = x.shape[-1]
        cut = int(design.trim * n)
        kept = x[:, cut : n - cut]
        wins = np.clip(x, kept[:, :1], kept[:, -1:])  # winsorised variance of a trimmed mean
        se = wins.std(axis=-1, ddof=1) / ((1 - 2 * design.trim) * math.sqrt(n))
        out.append((np.log(np.exp(x[:, cut : n - cut]).mean(axis=-1)), se, n))
    (ma, sa, na), (mb, sb, nb) = out
    d, se = mb - ma, np.sqrt(sa**2 + sb**2)
    q = student.ppf(1 - design.look_alpha, na + nb - 2)
    return d - q * se, d + q * se


METHODS = {
    "student": student_bounds,
    "welch": welch_bounds,
    "rank": rank_bounds,
    "cluster-bootstrap": cluster_bootstrap_bounds,
    "rounds": rounds_bounds,
}


# -- simulation ----------------------------------------------------------------------------------
def simulate(
    model: synthetic.NoiseModel,
    design: pa.Design,
    effect: float,
    n: int,
    seed: int,
    method: str = "student",
) -> Cell:
    """``n`` trials through the looks of ``design``, judged by ``method``."""
    plan = design.schedule()
    top_p, top_r = plan[-1]
    k = len(model.medians)
    batch = max(1, _BATCH_ELEMENTS // (2 * top_p * top_r))
    counts = np.zeros(len(pa.VERDICTS), int)
    pending = np.zeros((len(plan), k))
    by_look = np.zeros(len(plan), int)
    per_bench = np.zeros(k)
    rng = np.random.default_rng(seed)
    for start in range(0, n, batch):
        m = min(batch, n - start)
        b, h = synthetic.trials(model, m, top_p, top_r, effect, rng, first=start)
        bench = (start + np.arange(m)) % k
        np.add.at(per_bench, bench, 1)
        final = np.full(m, -1)
        for look, (p, r) in enumerate(plan):
            undecided = final < 0
            np.add.at(pending[look], bench[undecided], 1)
            idx = np.flatnonzero(undecided)
            if idx.size == 0:
                continue
            lo, hi = METHODS[method](b[idx, :p, :r], h[idx, :p, :r], design)
            codes = pa.verdict_codes(lo, hi, design.min_effect, design.floor)
            last = look == len(plan) - 1
            take = (codes != INCONCLUSIVE) | last
            final[idx[take]] = codes[take]
            by_look[look] += int(take.sum())
        counts += np.bincount(final, minlength=len(pa.VERDICTS))
    return Cell(effect, n, counts, pending / np.maximum(per_bench, 1), by_look)


def false_alarm_codes(effect: float) -> tuple[int, ...]:
    """A regression; with no change an improvement too (as ``lab experiment`` counts)."""
    return (REGRESSION, IMPROVEMENT) if effect == 0 else (REGRESSION,)


def design_row(model, design, costs, n: int, seed: int, method: str = "student") -> dict:
    """One row: the design, false alarms and power with intervals, and its cost under each of
    ``costs`` with no change and at 1%."""
    cells = [simulate(model, design, e, n, seed + i, method) for i, e in enumerate(EFFECTS)]
    null, one = cells[0], cells[1]
    plan = design.schedule()
    return {
        "design": design,
        "method": method,
        "false_alarms": null.rate(false_alarm_codes(0.0)),
        "null_inconclusive": null.rate((INCONCLUSIVE,)),
        "power": {c.effect: c.rate((REGRESSION,)) for c in cells[1:]},
        "cost": {
            c.name: (
                c.verdict_cost(plan, _per_selection(null.pending, model, c)),
                c.verdict_cost(plan, _per_selection(one.pending, model, c)),
            )
            for c in costs
        },
    }


def today_row(model, threshold: float, n: int, seed: int, rounds: int = 200, looks: int = 3):
    """The retired round-level A/B on the same model, for comparison: one worker a side, every
    round a sample, :func:`perfgate.gate.stats.compare_samples` (rank test and bootstrap) at the
    fixed ``threshold`` (a pooled baseline whose runs agree: ``drift=0``, ``min_effect_drift``)
    through the adaptive looks at ``rounds x 1, 2, 4`` (1000 resamples instead of 5000)."""
    from perfgate.gate.stats import Settings, compare_samples

    settings = Settings(min_effect_drift=threshold, n_resamples=1000, looks=looks)
    totals = [rounds * 2**k for k in range(looks)]
    out = {}
    for i, effect in enumerate(EFFECTS):
        rng = np.random.default_rng(seed + i)
        counts = np.zeros(len(pa.VERDICTS), int)
        b, h = synthetic.trials(model, n, 1, totals[-1], effect, rng)
        for t in range(n):
            for total in totals:
                res = compare_samples(b[t, 0, :total], h[t, 0, :total], settings, drift=0.0,
                                      looks=looks)  # fmt: skip
                if res.verdict != pa.INCONCLUSIVE:
                    break
            counts[pa.VERDICTS.index(res.verdict)] += 1
        out[effect] = Cell(effect, n, counts, np.ones((1, 1)))
    return {
        "threshold": threshold,
        "false_alarms": out[0.0].rate(false_alarm_codes(0.0)),
        "null_inconclusive": out[0.0].rate((INCONCLUSIVE,)),
        "power": {e: out[e].rate((REGRESSION,)) for e in EFFECTS[1:]},
    }


def _per_selection(pending: np.ndarray, model, cost: CostModel) -> np.ndarray:
    """The simulated benchmarks' pending fractions in the cost model's order (by median)."""
    if len(model.medians) != cost.benchmarks:
        raise ValueError(
            f"the {model.name} model has {len(model.medians)} benchmarks, the {cost.name} cost "
            f"model {cost.benchmarks}"
        )
    return pending[:, np.argsort(model.medians, kind="stable")]


def _rate(r) -> str:
    k, _, lo, hi = r
    return f"{k} ({lo:.1%}-{hi:.1%})"


def render_designs(rows, n: int) -> str:
    names = list(rows[0]["cost"])
    cost_heads = " | ".join(f"GPU s, {c}: 0 / 1%" for c in names)
    lines = [
        f"| P a side per look | rounds a process | floor | false alarms /{n} | inconclusive "
        f"at 0 /{n} | 1% /{n} | 2% /{n} | 3% /{n} | {cost_heads} |",
        "| --- | ---: | ---: | --- | --- | --- | --- | --- |" + " ---: |" * len(names),
    ]
    for r in rows:
        d = r["design"]
        plan = d.schedule()
        ps = "/".join(str(p) for p, _ in plan)
        rs = "/".join(dict.fromkeys(str(x) for _, x in plan))
        power = " | ".join(_rate(r["power"][e]) for e in EFFECTS[1:])
        costs = " | ".join(f"{a:.0f} / {b:.0f}" for a, b in r["cost"].values())
        lines.append(
            f"| {ps} | {rs} | {d.floor:.2%} | {_rate(r['false_alarms'])} | "
            f"{_rate(r['null_inconclusive'])} | {power} | {costs} |"
        )
    return "\n".join(lines)


def render_methods(rows, n: int) -> str:
    lines = [
        f"| method | P a side per look | rounds | false alarms /{n} | inconclusive at 0 /{n} "
        f"| 1% /{n} | 2% /{n} | 3% /{n} |",
        "| --- | --- | ---: | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        d = r["design"]
        ps = "/".join(str(p) for p, _ in d.schedule())
        power = " | ".join(_rate(r["power"][e]) for e in EFFECTS[1:])
        lines.append(
            f"| {r['method']} | {ps} | {d.rounds} | {_rate(r['false_alarms'])} | "
            f"{_rate(r['null_inconclusive'])} | {power} |"
        )
    return "\n".join(lines)


def render_today(rows, n: int) -> str:
    lines = [
        f"| today's gate, threshold | false alarms /{n} | inconclusive at 0 /{n} | 1% /{n} | "
        f"2% /{n} | 3% /{n} |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        power = " | ".join(_rate(r["power"][e]) for e in EFFECTS[1:])
        lines.append(
            f"| {r['threshold']:.1%} | {_rate(r['false_alarms'])} | "
            f"{_rate(r['null_inconclusive'])} | {power} |"
        )
    return "\n".join(lines)


CANDIDATES = (
    ((2, 3, 4), 100),
    ((2, 4, 8), 100),
    ((3,), 100),
    ((3, 4, 6), 100),
    ((3, 6, 12), 100),
    ((3, 6, 12, 24), 100),
    ((4, 8, 16), 100),
    ((6, 9, 12), 100),
    ((6, 12, 24), 100),
    ((8, 12, 16), 100),
    ((8, 16, 32), 100),
    ((12, 18, 24), 100),
    ((16, 24, 32), 100),
    ((24, 36, 48), 100),
)


def tradeoff_row(model, sensitivity: float, cost: CostModel, n: int, seed: int, alpha: float):
    """The cheapest candidate design (by its expected cost with no change) that sees a true
    ``sensitivity`` at >= 95% with <= 1% false alarms and <= 1% still inconclusive at no change,
    with ``min_effect = sensitivity`` and ``floor = sensitivity / 4``; None if none does."""
    options = []
    for processes, rounds in CANDIDATES:
        design = pa.Design(
            min_effect=sensitivity,
            floor=sensitivity / 4,
            processes=processes,
            rounds=rounds,
            alpha=alpha,
        )
        first = cost.verdict_cost(design.schedule()[:1], np.ones((1, cost.benchmarks)))
        options.append((first, design))
    best = None
    for first, design in sorted(options, key=lambda o: o[0]):
        if best is not None and first >= best["cost"][0]:
            break  # a design's expected cost is at least its first look's
        null = simulate(model, design, 0.0, n, seed)
        fa, stuck = null.rate(false_alarm_codes(0.0)), null.rate((INCONCLUSIVE,))
        if fa[1] > 0.01 or stuck[1] > 0.01:
            continue
        hit = simulate(model, design, sensitivity, n, seed + 1)
        power = hit.rate((REGRESSION,))
        plan = design.schedule()
        costs = (
            cost.verdict_cost(plan, _per_selection(null.pending, model, cost)),
            cost.verdict_cost(plan, _per_selection(hit.pending, model, cost)),
        )
        if power[1] < 0.95 or (best is not None and costs[0] >= best["cost"][0]):
            continue
        best = {
            "sensitivity": sensitivity,
            "design": design,
            "false_alarms": fa,
            "null_inconclusive": stuck,
            "power": power,
            "cost": costs,
        }
    if best is not None:
        return best
    return {"sensitivity": sensitivity, "design": None}


def render_tradeoff(rows, n: int, cost: CostModel) -> str:
    lines = [
        f"| sees (95%) | P a side per look | rounds | floor | false alarms /{n} | inconclusive "
        f"at 0 /{n} | power /{n} | GPU s ({cost.name}): 0 / at the size |",
        "| ---: | --- | ---: | ---: | --- | --- | --- | ---: |",
    ]
    for r in rows:
        d = r["design"]
        if d is None:
            lines.append(f"| {r['sensitivity']:.1%} | none of the candidates | | | | | | |")
            continue
        ps = "/".join(str(p) for p in d.processes)
        a, b = r["cost"]
        lines.append(
            f"| {r['sensitivity']:.1%} | {ps} | {d.rounds} | {d.floor:.2%} | "
            f"{_rate(r['false_alarms'])} | {_rate(r['null_inconclusive'])} | "
            f"{_rate(r['power'])} | {a:.0f} / {b:.0f} |"
        )
    return "\n".join(lines)


# -- command line --------------------------------------------------------------------------------
def _ints(text: str, name: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--{name} must be comma-separated integers, got {text!r}") from None
    if not values:
        raise ValueError(f"--{name} must list at least one integer, got {text!r}")
    return values


def _floats(text: str, name: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--{name} must be comma-separated fractions, got {text!r}") from None
    if not values:
        raise ValueError(f"--{name} must list at least one fraction, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.scripts.ab_power",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "table",
        choices=("designs", "methods", "today", "tradeoff"),
        help="designs: the adaptive process-level gate; methods: the statistics compared on "
        "one design; today: the current gate (one worker a side, rounds as samples); "
        "tradeoff: the cheapest candidate design for each sensitivity (--sensitivities)",
    )
    parser.add_argument("--model", choices=sorted(synthetic.MODELS), default="brief-device")
    parser.add_argument(
        "--costs",
        help="comma-separated cost models (default: the model's mode, as today and lean)",
    )
    parser.add_argument(
        "--processes",
        default="3-4-6",
        help="comma-separated designs, each the processes a side at each look joined by '-' "
        "(default: %(default)s)",
    )
    parser.add_argument("--rounds", default="100", help="a process at the first look")
    parser.add_argument("--floors", default="0.0025", help="ab_floor values to try")
    parser.add_argument("--min-effect", type=float, default=0.01)
    parser.add_argument("--thresholds", default="0.01,0.015", help="today: round-level thresholds")
    parser.add_argument("--sensitivities", default="0.01,0.015,0.02,0.03", help="tradeoff: sizes")
    parser.add_argument("--round-growth", type=int, default=1)
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    mode = "leaderboard" if args.model == "leaderboard" else "device"
    try:
        processes = [
            tuple(_ints(x.replace("-", ","), "processes")) for x in args.processes.split(",")
        ]
        rounds = _ints(args.rounds, "rounds")
        floors = _floats(args.floors, "floors")
        thresholds = _floats(args.thresholds, "thresholds")
        sensitivities = _floats(args.sensitivities, "sensitivities")
        methods = [m for m in args.methods.split(",") if m]
        unknown = [m for m in methods if m not in METHODS]
        if unknown or not methods:
            raise ValueError(
                f"--methods must name some of {', '.join(METHODS)}, got {args.methods!r}"
            )
        names = (args.costs or f"{mode},{mode}-lean").split(",")
        if any(c not in COSTS for c in names):
            raise ValueError(f"--costs must name some of {', '.join(COSTS)}, got {args.costs!r}")
        if args.trials < 1:
            raise ValueError(f"--trials must be an int >= 1, got {args.trials}")
        designs = [
            pa.Design(
                min_effect=args.min_effect,
                floor=f,
                processes=p,
                rounds=r,
                alpha=args.alpha,
                round_growth=args.round_growth,
            )
            for p in processes
            for r in rounds
            for f in floors
        ]
    except ValueError as exc:
        print(f"ab_power: error: {exc}", file=sys.stderr)
        return 2
    model = synthetic.MODELS[args.model]
    costs = [COSTS[c] for c in names]
    t0 = time.monotonic()
    if args.table == "designs":
        rows = [design_row(model, d, costs, args.trials, args.seed) for d in designs]
        print(render_designs(rows, args.trials))
    elif args.table == "methods":
        rows = [
            design_row(model, d, costs, args.trials, args.seed, m) for d in designs for m in methods
        ]
        print(render_methods(rows, args.trials))
    elif args.table == "today":
        rows = [today_row(model, t, args.trials, args.seed) for t in thresholds]
        print(render_today(rows, args.trials))
    else:
        rows = [
            tradeoff_row(model, x, costs[-1], args.trials, args.seed, args.alpha)
            for x in sensitivities
        ]
        print(render_tradeoff(rows, args.trials, costs[-1]))
    effect = (
        "min effect = sensitivity"
        if args.table == "tradeoff"
        else (f"min effect {args.min_effect:.1%}")
    )
    one = ", ".join(f"{c.name} {c.today():.0f} s" for c in costs)
    print(
        f"\nmodel {model.name}; {args.trials} trials a cell, seed {args.seed}; alpha "
        f"{args.alpha} over the looks; {effect}; one worker a side of 200 rounds (today's "
        f"perfgate ab) would cost {one}; {time.monotonic() - t0:.0f} s of CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
