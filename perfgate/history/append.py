"""Adding runs to the store: what ``history add`` and every ``--history`` flag call.

A file is a pytest-benchmark results file (``bench``, ``update-baselines``:
:func:`perfgate.history.records.read_run`) or an A/B samples file (``ab``'s ``ab.samples.json``:
its head side, :mod:`perfgate.history.ab_records`). Every file is read and checked before the
first is added, so one malformed file adds nothing
(the command exits 2 naming it). Adding a run already kept, from any path, adds nothing. After
adding, the per-round samples of each series' older runs are dropped (``samples_kept``): the
medians and CIs stay forever, the samples only as long as the push gate may pool them. With
``verdicts``, each results file is kept with the gate verdict of the comparison report beside it
(:mod:`perfgate.history.verdicts`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from perfgate.history.ab_records import is_ab_samples, read_ab_run
from perfgate.history.records import AB_MODE, RecordError, Run, read_run
from perfgate.history.store import Store
from perfgate.history.verdicts import with_verdict


@dataclass(frozen=True)
class Added:
    run: Run
    added: bool  # False: a run of the same digest was already kept


def append_run(
    store: Store,
    results_path: str | os.PathLike[str],
    *,
    branch: str | None = None,
    samples_kept: int | None = None,
) -> Added:
    """Keep the run of one results file (``bench``/``update-baselines``/``ab --history``).

    Raises :class:`perfgate.history.records.RecordError` for a file that cannot be kept.
    """
    return append_runs(store, [results_path], branch=branch, samples_kept=samples_kept)[0]


def append_runs(
    store: Store,
    paths: Iterable[str | os.PathLike[str]],
    *,
    branch: str | None = None,
    samples_kept: int | None = None,
    verdicts: bool = False,
) -> list[Added]:
    """Keep the runs of ``paths`` (all read and checked first), in the order given."""
    runs = [read_any(p, branch=branch) for p in paths]
    if verdicts:
        runs = [_with_verdict(run) for run in runs]
    return add_runs(store, runs, samples_kept=samples_kept)


def _with_verdict(run: Run) -> Run:
    if run.mode == AB_MODE:
        raise RecordError(f"--verdicts: {run.source}: an A/B samples file has no gate verdict")
    return with_verdict(run)


def add_runs(store: Store, runs: Iterable[Run], *, samples_kept: int | None = None) -> list[Added]:
    """Keep ``runs`` (already read), in the order given."""
    out = [Added(run, store.add_run(run)) for run in runs]
    if samples_kept is not None and any(a.added for a in out):
        store.prune_samples(samples_kept)
    return out


def read_any(path: str | os.PathLike[str], *, branch: str | None = None) -> Run:
    """The run of a results file or of an A/B samples file (RecordError when neither)."""
    try:
        data = json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        data = None  # read_run names the problem
    if is_ab_samples(data):
        return read_ab_run(path, branch=branch)
    return read_run(path, branch=branch)
