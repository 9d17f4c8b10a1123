"""The push gate's baseline from history: the last K runs of main on this device and mode, in
this run's fingerprint segment, pooled as ``update-baselines`` pools its runs.

:func:`history_baseline` returns a pytest-benchmark document that :func:`perfgate.gate.baseline.load`
accepts (``bench --against history`` writes it next to the run's results and compares with it as
with a stored baseline): each benchmark's samples are those runs' samples concatenated, and its
per-run medians are recorded in ``extra_info.perfgate_runs``, so the stored-baseline threshold
applies, ``max(gate_min_effect, gate_drift_factor x the robust drift of those medians)``
(:func:`gate_settings`). A history too short for that (fewer than ``min_runs`` runs with samples
for any benchmark of the run) gives no document but the reason, and the caller falls back to the
stored baseline with that reason as its warning.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from perfgate.gate import baseline as bl
from perfgate.history.config import HistoryConfig
from perfgate.history.records import segment_key
from perfgate.history.store import Query, Row, Store


@dataclass(frozen=True)
class HistoryBaseline:
    data: dict[str, Any] | None  # a baseline document, or None: use the stored baseline
    reason: str  # what it is made of, or why there is none
    runs: tuple[Row, ...] = ()  # the rows pooled (every benchmark's)


def history_baseline(
    store: Store,
    device_key: str,
    mode: str,
    fingerprint: dict[str, Any],
    k: int,
    *,
    branch: str,
    min_runs: int,
    benchmarks: Iterable[str] | None = None,
    exclude_digest: str | None = None,
) -> HistoryBaseline:
    """The pooled baseline of the newest ``k`` runs of ``branch`` per benchmark (at least
    ``min_runs`` each), or None with the reason.

    ``benchmarks``: the run's benchmarks, each of which must be covered (a benchmark the history
    lacks would otherwise go unjudged as ``new``). ``exclude_digest``: the run being judged, if it
    was already added.
    """
    if not (2 <= min_runs <= k):
        raise ValueError(f"need 2 <= min_runs <= k, got min_runs={min_runs!r}, k={k!r}")
    segment = segment_key(fingerprint)
    where = f"{branch} on {device_key}, {mode} mode, in this fingerprint segment"
    rows = [
        r
        for r in store.rows(Query(device_key=device_key, mode=mode, branch=branch, segment=segment))
        if r.has_samples and r.digest != exclude_digest
    ]
    per_bench: dict[str, list[Row]] = {}
    for r in rows:  # each series in commit order: the newest k are the last k
        per_bench.setdefault(r.benchmark, []).append(r)
    per_bench = {name: rs[-k:] for name, rs in per_bench.items()}
    wanted = list(per_bench) if benchmarks is None else list(dict.fromkeys(benchmarks))
    if not wanted:
        return HistoryBaseline(None, f"the history holds no runs of {where}")
    short = [(n, len(per_bench.get(n, []))) for n in wanted if len(per_bench.get(n, [])) < min_runs]
    if short:
        name, have = short[0]
        more = f" (and {len(short) - 1} more benchmarks)" if len(short) > 1 else ""
        return HistoryBaseline(
            None,
            f"the history holds {have} run{'s' * (have != 1)} of {name} of {where}, fewer than "
            f"min_runs = {min_runs}{more}",
        )
    picked = {n: per_bench[n] for n in wanted}
    data = _document(store, device_key, mode, picked)
    counts = sorted({len(rs) for rs in picked.values()})
    runs = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    commits = {r.commit for rs in picked.values() for r in rs}
    reason = f"pooled from the last {runs} runs of {where} ({len(commits)} commits)"
    return HistoryBaseline(data, reason, tuple(r for rs in picked.values() for r in rs))


def gate_settings(stats, config: HistoryConfig, *, given: Iterable[str] = ()):
    """``stats`` (perfgate.gate.stats.Settings) with the history's threshold rule, less the keys
    ``given`` on the command line (they win over both tables; ``--min-effect`` sets the floor
    against a pooled baseline too, as perfgate.gate.settings rules)."""
    given = set(given)
    rule = {}
    if not given & {"min_effect", "min_effect_drift"}:
        rule["min_effect_drift"] = config.gate_min_effect
    if "drift_factor" not in given:
        rule["drift_factor"] = config.gate_drift_factor
    return dataclasses.replace(stats, **rule)


def _document(store: Store, device_key: str, mode: str, picked: dict[str, list[Row]]):
    newest = max((r for rs in picked.values() for r in rs), key=lambda r: r.run_id)
    benchmarks = []
    for name, rows in picked.items():
        per_run = []
        for r in rows:
            samples = store.samples(r.run_id, r.benchmark)
            if samples is None:  # pruned between the query and now
                raise ValueError(f"the samples of {name} at {r.commit[:12]} are gone")
            per_run.append(list(samples))
        data = [x for s in per_run for x in s]
        medians = [statistics.median(s) for s in per_run]
        benchmarks.append(
            {
                "name": name.rpartition("::")[2] or name,
                "fullname": name,
                "group": rows[-1].group,
                "stats": bl.stats_block(data),
                "extra_info": {
                    bl.RUNS_KEY: {
                        "runs": len(per_run),
                        "rounds": [len(s) for s in per_run],
                        "medians": medians,
                        "spread": bl.run_spread(medians),
                    },
                    "perfgate_history": [
                        {"commit": r.commit, "source": r.source, "run_time": r.run_time}
                        for r in rows
                    ],
                },
            }
        )
    return {
        "machine_info": {
            "perfgate": {
                "schema": bl.SCHEMA,
                "device_key": device_key,
                "mode": mode,
                "fingerprint": dict(newest.fingerprint),
            }
        },
        "commit_info": {"id": newest.commit, "time": newest.commit_time},
        "datetime": newest.run_time,
        "benchmarks": benchmarks,
    }
