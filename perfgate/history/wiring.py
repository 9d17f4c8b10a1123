"""The history in ``bench``, ``update-baselines`` and ``ab``: their options, the check made before
anything is measured, the append after a run, and ``bench --against history``.

- ``--history`` appends the run's results to the store (``--db PATH``, default ``db`` of
  ``[tool.perfgate-history]``), as ``history add`` of its results file would: ``bench`` its
  ``<mode>.json`` (after any adaptive looks) with the gate's verdict on it (``pass``/``fail``;
  none when there was no baseline to judge it against), ``update-baselines`` the pooled file it wrote as the
  baseline (one run of its commit), ``ab`` the head side of ``ab.samples.json``
  (:mod:`perfgate.history.ab_records`). A run that did not complete appends nothing.
- A run the history refuses to keep (uncommitted changes, no commit) is not appended: one
  warning line, and the run's exit code is unchanged; the run itself was what was asked for.
  A store that fails while appending is exit 2 (one line), whatever the run found.
- The store is checked before any measuring (exit 2, one line), changing nothing: a missing one
  is created by the append.
- ``--against history`` (bench): the run is judged against the last ``baseline_runs`` runs of
  ``branch`` on this device and mode in this run's fingerprint segment
  (:mod:`perfgate.history.against`), written next to the results as
  ``<mode>.history-baseline.json``; with too short a history (or none), one warning line and the
  stored baseline, as ``--against baseline``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from perfgate import atomic
from perfgate.gate import baseline as bl
from perfgate.gate import settings
from perfgate.history.append import add_runs, read_any
from perfgate.history.records import RecordError
from perfgate.refusal import Refusal

AGAINST = ("baseline", "history")


class HistoryOptionError(Refusal, ValueError):
    """History options that cannot be used; the message is one line naming the option."""


def add_options(parser: argparse.ArgumentParser, *, against: bool = False) -> None:
    """``--history``, ``--history-branch``, ``--db`` and, with ``against``, ``--against``."""
    group = parser.add_argument_group("history", "keep this run in the history (docs/history.md)")
    group.add_argument(
        "--history",
        action="store_true",
        help="append this run's results to the history store; a run with uncommitted changes "
        "is not appended (one warning line, same exit code)",
    )
    group.add_argument(
        "--history-branch",
        metavar="NAME",
        help="the branch the appended run belongs to (default: the results' commit_info.branch; "
        "CI checkouts are detached: pass --history-branch main for pushes to main)",
    )
    group.add_argument(
        "--db",
        metavar="STORE",
        help="the history store of --history and --against history: a SQLite path or a "
        "postgresql:// URL (default: $PERFGATE_HISTORY_URL, else db of [tool.perfgate-history])",
    )
    if against:
        group.add_argument(
            "--against",
            choices=AGAINST,
            default="baseline",
            help="judge the run against this device's stored baseline (default), or against the "
            "last runs of main on this device and mode in this fingerprint segment (the stored "
            "baseline, with a warning, while that history is too short)",
        )


def _uses(args: argparse.Namespace) -> tuple[bool, bool]:
    return bool(args.history), getattr(args, "against", "baseline") == "history"


def check(args: argparse.Namespace, outputs: Iterable[Path] = ()) -> None:
    """Refuse unusable history options (HistoryOptionError, one line) before any measuring.

    ``outputs``: files the command writes besides ``--results-dir``, which the store must not be.
    """
    from perfgate.history import config, store

    append, against = _uses(args)
    if args.db and not (append or against):
        flags = "--history or --against history" if hasattr(args, "against") else "--history"
        raise HistoryOptionError(
            f"--db {store.display(args.db)}: names the store of {flags}; give one"
        )
    if args.history_branch is not None and not append:
        raise HistoryOptionError(f"--history-branch {args.history_branch}: needs --history")
    if args.history_branch is not None and not args.history_branch.strip():
        raise HistoryOptionError("--history-branch: expected a branch name, got ''")
    if not (append or against):
        return

    cfg = config.load()  # HistoryConfigError is a ValueError: one line, exit 2
    try:
        db = store.location(args.db, cfg.db)
        local = store.local_path(db)
        if local is not None:
            atomic.check_not_tracked("--db", local)
        store.check_usable(db, write=append)
    except atomic.OutputError as exc:
        raise HistoryOptionError(str(exc)) from None
    except store.StoreError as exc:
        raise HistoryOptionError(f"--db: {exc}") from None
    if local is None:  # a server: no file of this run can be it
        return
    path = Path(os.path.realpath(local))
    results = getattr(args, "results_dir", None)
    if results is not None and Path(os.path.realpath(results)) in path.parents:
        raise HistoryOptionError(
            f"--db {db}: inside --results-dir {results}, which every run rewrites; keep the "
            "history elsewhere"
        )
    for out in outputs:
        if Path(os.path.realpath(out)) == path:
            raise HistoryOptionError(f"--db {db}: is also an output of this run ({out})")


def keep(
    args: argparse.Namespace, results: Path, rc: int, prog: str, verdict: str | None = None
) -> int:
    """Append the run of ``results`` when ``--history`` is given, with the gate's ``verdict``
    on it (bench's; None: not judged); the exit code to return (HistoryOptionError, exit 2,
    when the store cannot take it)."""
    if not args.history:
        return rc

    from perfgate.history import config, store

    try:  # read first: a run that cannot be kept creates no store
        run = dataclasses.replace(read_any(results, branch=args.history_branch), verdict=verdict)
    except RecordError as exc:
        print(f"perfgate {prog}: WARNING: --history: not appended: {_line(exc)}", file=sys.stderr)
        return rc
    try:
        cfg = config.load()
        db = store.location(args.db, cfg.db)
        with store.open_store(db, write=True) as s:
            (done,) = add_runs(s, [run], samples_kept=cfg.samples_kept)
    except (store.StoreError, config.HistoryConfigError) as exc:  # named as --history's
        raise HistoryOptionError(f"--history: {_line(exc)}") from None
    r = done.run
    state = "appended" if done.added else "already kept"
    judged = f", verdict {r.verdict}" if r.verdict else ""
    print(
        f"perfgate {prog}: --history: {state}: {r.source} ({r.device_key}, {r.mode}, "
        f"{len(r.results)} benchmarks, commit {r.commit[:12]}, branch {r.branch or '-'}{judged}) "
        f"in {store.display(db)}"
    )
    return rc


def judged_against(
    args: argparse.Namespace, data: dict[str, Any], results: Path, stored: Path, gate, prog: str
):
    """``(baseline path, gate settings)`` to judge the run ``data`` (written at ``results``)
    with: ``stored`` and ``gate`` unless ``--against history`` finds enough history;
    HistoryOptionError when the history cannot be read."""
    if getattr(args, "against", "baseline") != "history":
        return stored, gate

    from perfgate.history import against, config, store

    try:
        cfg = config.load()
        db = store.location(args.db, cfg.db)
        if not store.exists(db):
            picked = against.HistoryBaseline(None, f"no history at {store.display(db)}")
        else:
            with store.open_store(db, write=False) as s:
                picked = against.history_baseline(
                    s,
                    bl.device_key(data),
                    bl.mode(data),
                    bl.fingerprint(data),
                    cfg.baseline_runs,
                    branch=cfg.branch,
                    min_runs=cfg.min_runs,
                    benchmarks=bl.samples(data),
                )
    except (store.StoreError, config.HistoryConfigError, ValueError) as exc:
        raise HistoryOptionError(f"--against history: {_line(exc)}") from None
    if picked.data is None:
        print(
            f"perfgate {prog}: WARNING: --against history: {picked.reason}; judged against the "
            f"stored baseline {stored}",
            file=sys.stderr,
        )
        return stored, gate
    out = Path(results).with_suffix(".history-baseline.json")
    atomic.write_json(out, picked.data)
    print(f"perfgate {prog}: --against history: {picked.reason}: {out}")
    given = settings.overrides_from(args)
    stats = against.gate_settings(gate.stats, cfg, given=given)
    return out, dataclasses.replace(gate, stats=stats)


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
