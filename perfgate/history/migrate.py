"""``history migrate``: every run of one store copied into another (SQLite to PostgreSQL and
back), in one transaction of the target, read back and compared row for row before it ends.

A run is copied whole: its columns, its results and their samples as stored (pruned ones stay
pruned), and when it was first kept; only the store's own row ids are new, given in the source's
order, so runs of one commit date keep the order they were added in. A run the target already
holds (the same digest) must hold the same data: the copy of a copy adds nothing, and a target
that holds something else for that run stops the migration with nothing written (a verdict
recorded in one store only, say, is for a person to settle, not for a copy to overwrite).
Nothing is pruned: the target's next ``history add`` applies ``samples_kept``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from perfgate.history.store import display, local_path, open_store


@dataclass(frozen=True)
class Moved:
    source: str  # as messages name it (a server's URL without its password)
    target: str
    runs: int  # in the source, all now in the target
    results: int  # their rows (one per benchmark)
    with_samples: int  # ... of which still hold their samples
    added: int  # runs the target did not hold before


def same_store(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two locations name one store as written (one file, or one URL)."""
    pa, pb = local_path(a), local_path(b)
    if pa is not None and pb is not None:
        return pa.resolve() == pb.resolve()
    return pa is None and pb is None and str(a).strip() == str(b).strip()


def migrate(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Moved:
    """Copy every run of ``source`` into ``target`` (created when missing), checked row for row.
    StoreError (one line; nothing written) when the target holds other data for a run."""
    with open_store(source, write=False) as src:
        runs = src.kept_runs()
    path = local_path(target)
    created = path is not None and not Path(path).exists()
    try:
        with open_store(target, write=True) as dst:
            added = dst.receive(runs)
    except BaseException:
        if created:  # the file this call made holds no run: leave no empty store behind
            Path(path).unlink(missing_ok=True)
        raise
    results = [r for run in runs for r in run.results]
    return Moved(
        source=display(source),
        target=display(target),
        runs=len(runs),
        results=len(results),
        with_samples=sum(r.samples is not None for r in results),
        added=added,
    )
