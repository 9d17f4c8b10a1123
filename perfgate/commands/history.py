"""``python -m perfgate history add|list|detect|plot|report|migrate``: every run kept, its
change points found and plotted, moved between stores.

  add RESULTS.json [...]     keep runs (pytest-benchmark JSON from bench and update-baselines,
                             ab.samples.json from ab: its head side, mode "ab"); adding a run
                             already kept adds nothing; --verdicts keeps the gate's verdict too
  list [-k TEXT]             the kept rows: one per benchmark per run
  detect [--json OUT]        change points per benchmark over its runs in commit order; a change
                             of the fingerprint (driver, runtime, torch, triton, GPU) starts a new
                             segment and is never a change
  plot --out FILE.png|.svg   medians with their CIs over commits, change points, the score
  report --out DIR           a static HTML site (plots, tables, change points) for GitHub Pages
  migrate --from S --to T    copy every run between stores (SQLite, PostgreSQL), checked row
                             for row; a run the target holds with other data stops it

Every subcommand but migrate takes --db STORE: a SQLite path or a postgresql:// URL (default:
$PERFGATE_HISTORY_URL, else db of [tool.perfgate-history] in pyproject.toml).

Exit codes: 0 done (detect: no slower change in any series' newest segment); 1 detect found a
slower change above the minimum effect in a series' newest segment; 2 unusable input (a
malformed results file, a missing or foreign store, a bad option, an output that would replace
an input), with a one-line reason.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from perfgate import atomic
from perfgate.history import store
from perfgate.history.append import append_runs
from perfgate.history.migrate import migrate, same_store
from perfgate.history.records import AB_MODE
from perfgate.history.store import Query, display, local_path, open_store
from perfgate.modes import MODE_NAMES
from perfgate.refusal import Refusal


class UsageError(Refusal):
    """Unusable input: one line, exit 2."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "history",
        help="keep every run, find change points, plot them, publish a report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(
        dest="history_command",
        required=True,
        metavar="SUBCOMMAND",
        help="what to do with the history",
    )

    add = _sub(sub, "add", "keep the runs of results files (idempotent)")
    add.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json")
    add.add_argument(
        "--branch",
        help="the branch these runs belong to (default: the file's commit_info.branch; CI "
        "checkouts are detached, so CI passes --branch main)",
    )
    add.add_argument(
        "--verdicts",
        action="store_true",
        help="keep each run with the gate's verdict (pass or fail) from the comparison report "
        "bench wrote beside it (<mode>.compare.json); a file without its report is refused",
    )
    add.set_defaults(func=_add)

    ls = _sub(sub, "list", "the kept rows, one per benchmark per run")
    _filters(ls)
    ls.add_argument("--json", dest="json_out", type=Path, metavar="OUT", help="also write them")
    ls.set_defaults(func=_list)

    det = _sub(sub, "detect", "change points per benchmark; exit 1 on a recent slowdown")
    _filters(det)
    det.add_argument(
        "--json",
        dest="json_out",
        type=Path,
        metavar="OUT",
        help="write the change points as a JSON list",
    )
    det.add_argument(
        "--last",
        type=_positive,
        metavar="N",
        help="alarm only on changes among each series' newest N runs",
    )
    det.add_argument(
        "--min-effect",
        type=float,
        metavar="X",
        help="smallest change of level that counts, a fraction (default: the table's)",
    )
    det.set_defaults(func=_detect)

    plt = _sub(sub, "plot", "medians over commits with change points, as PNG or SVG")
    _filters(plt)
    plt.add_argument("--out", required=True, type=Path, metavar="FILE.png|FILE.svg")
    plt.set_defaults(func=_plot)

    rep = _sub(sub, "report", "a static HTML site of the history (for GitHub Pages)")
    _filters(rep)
    rep.add_argument("--out", required=True, type=Path, metavar="DIR")
    rep.set_defaults(func=_report)

    mig = sub.add_parser(
        "migrate",
        help="copy every run from one store to another (SQLite, PostgreSQL), checked row for row",
        description="Copy every run from one store to another (SQLite to PostgreSQL or back) in "
        "one transaction, then read it back and compare it row for row. A run the target "
        "already holds must hold the same data, else nothing is written (exit 2).",
    )
    mig.add_argument(
        "--from",
        dest="source",
        metavar="STORE",
        help="the store to copy: a SQLite path or a postgresql:// URL (default: the configured "
        "store, $PERFGATE_HISTORY_URL, else db of [tool.perfgate-history])",
    )
    mig.add_argument(
        "--to",
        dest="target",
        metavar="STORE",
        help="the store to copy into, created when missing (default: the configured store)",
    )
    mig.set_defaults(func=_migrate)


def _sub(sub, name: str, help_text: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument(
        "--db",
        metavar="STORE",
        help="the history store: a SQLite path or a postgresql:// URL (default: "
        "$PERFGATE_HISTORY_URL, else db of [tool.perfgate-history])",
    )
    return p


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-k", dest="keyword", metavar="TEXT", help="only benchmarks whose name holds TEXT"
    )
    p.add_argument("--device", metavar="KEY", help="only this device key (e.g. nvidia-h200)")
    p.add_argument(
        "--mode", metavar="MODE", help="only this timing mode, or ab for the heads of A/B runs"
    )
    p.add_argument("--branch", metavar="NAME", help="only runs of this branch")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {value}")
    return value


def _config():
    from perfgate.history import config

    return config.load()


def _db(args: argparse.Namespace, cfg) -> Path | str:
    """``--db``, else $PERFGATE_HISTORY_URL, else the table's db (perfgate.history.store)."""
    db = store.location(args.db, cfg.db)
    path = store.local_path(db)
    if path is not None:
        atomic.check_not_tracked("--db", path)  # a store is written in place
    return db


def _not_over(out: Path, inputs: list) -> None:
    """Never write an output over an input (a store given as sqlite:///PATH is that PATH)."""
    for p in inputs:
        path = local_path(p)
        if path is not None and out.resolve() == path.resolve():
            raise UsageError(f"{out}: is also an input; write the output elsewhere")


def _selected(args: argparse.Namespace, *outputs: tuple[str, Path | None], guard=None):
    """What list, detect, plot and report start from: ``(config, store location, the rows the
    filters select)``. ``outputs`` ((option, path) pairs) pass perfgate.atomic's rule and must
    not be the store; ``guard(store path)`` makes any other check of the outputs; all before
    the store is opened."""
    cfg = _config()
    db = _db(args, cfg)
    atomic.check_outputs(outputs)
    for _, out in outputs:
        if out is not None:
            _not_over(out, [db])
    if guard is not None:
        guard(local_path(db))
    with open_store(db, write=False) as store:
        return cfg, db, _rows(args, store)


def _rows(args, store):
    if getattr(args, "mode", None) is not None and args.mode not in (*MODE_NAMES, AB_MODE):
        # ab: named by --mode's help
        raise UsageError(f"--mode {args.mode}: expected one of {', '.join(MODE_NAMES)}")
    rows = store.rows(
        Query(device_key=args.device, mode=args.mode, branch=args.branch, keyword=args.keyword)
    )
    if not rows:
        raise UsageError(f"{store.location}: no runs match {_selection(args)}")
    return rows


def _selection(args) -> str:
    parts = [
        f"{flag} {value}"
        for flag, value in (
            ("-k", args.keyword),
            ("--device", args.device),
            ("--mode", args.mode),
            ("--branch", args.branch),
        )
        if value
    ]
    return " ".join(parts) if parts else "(the store is empty)"


# -- add -----------------------------------------------------------------------------------------
def _add(args: argparse.Namespace) -> int:
    cfg = _config()
    db = _db(args, cfg)
    for p in args.results:
        _not_over(p, [db])
    with open_store(db, write=True) as store:
        done = append_runs(
            store,
            args.results,
            branch=args.branch,
            samples_kept=cfg.samples_kept,
            verdicts=args.verdicts,
        )
    added = [a for a in done if a.added]
    for a in done:
        state = "added" if a.added else "already kept"
        r = a.run
        verdict = f", verdict {r.verdict}" if r.verdict else ""
        print(
            f"{state}: {r.source} ({r.device_key}, {r.mode}, {len(r.results)} benchmarks, "
            f"commit {r.commit[:12]}, branch {r.branch or '-'}{verdict})"
        )
    print(
        f"{len(added)} run{'s' * (len(added) != 1)} added, {len(done) - len(added)} already kept, "
        f"to {store.location}"
    )
    return 0


# -- list ----------------------------------------------------------------------------------------
def _list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    _, db, rows = _selected(args, ("--json", args.json_out))
    table = Table(title=f"perfgate history: {len(rows)} rows from {display(db)}")
    for col in (
        "device",
        "mode",
        "benchmark",
        "commit",
        "commit date",
        "run date",
        "median (µs)",
        "95% CI (µs)",
        "rounds",
        "segment",
        "source",
    ):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            *(
                Text(c)
                for c in (
                    r.device_key,
                    r.mode,
                    r.benchmark,
                    r.commit[:12],
                    (r.commit_time or "-")[:19],
                    (r.run_time or "-")[:19],
                    f"{r.median * 1e6:.3f}",
                    f"{r.ci_low * 1e6:.3f}-{r.ci_high * 1e6:.3f}",
                    str(r.rounds),
                    r.segment[:8],
                    r.source,
                )
            )
        )
    Console(width=200).print(table)
    if args.json_out:
        atomic.write_json(args.json_out, [_row_json(r) for r in rows])
    return 0


def _row_json(r) -> dict:
    return {
        "device_key": r.device_key,
        "mode": r.mode,
        "benchmark": r.benchmark,
        "group": r.group,
        "commit": r.commit,
        "commit_time": r.commit_time,
        "run_time": r.run_time,
        "branch": r.branch,
        "fingerprint": r.fingerprint,
        "segment": r.segment,
        "median": r.median,
        "ci_low": r.ci_low,
        "ci_high": r.ci_high,
        "rounds": r.rounds,
        "source": r.source,
        "digest": r.digest,
        "has_samples": r.has_samples,
    }


# -- detect --------------------------------------------------------------------------------------
def _detection(args, cfg, rows):
    from perfgate.history.detect import detect

    steps = cfg.steps
    if getattr(args, "min_effect", None) is not None:
        try:
            steps = dataclasses.replace(steps, min_effect=args.min_effect)
        except ValueError as exc:  # the detector's own range check, named as the option's
            raise UsageError(f"--min-effect: {exc}") from None
    return detect(rows, steps, last=getattr(args, "last", None))


def _detect(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    cfg, _, rows = _selected(args, ("--json", args.json_out))
    found = _detection(args, cfg, rows)
    console = Console(width=200)
    table = Table(
        title=f"perfgate history detect: {found.series} series, {len(found.changes)} changes"
    )
    for col in (
        "",
        "benchmark",
        "device, mode",
        "first commit after",
        "before (µs)",
        "after (µs)",
        "change",
        "runs before/after",
        "p",
    ):
        table.add_column(col, overflow="fold")
    for c in found.changes:
        state = "ALARM" if c.alarm else ("slower" if c.change > 0 else "faster")
        style = "bold red" if c.alarm else ("yellow" if c.change > 0 else "green")
        table.add_row(
            Text(state, style=style),
            *(
                Text(x)
                for x in (
                    c.benchmark,
                    f"{c.device_key}, {c.mode}",
                    c.commit[:12],
                    f"{c.before * 1e6:.3f}",
                    f"{c.after * 1e6:.3f}",
                    f"{c.change:+.2%}",
                    f"{c.runs_before}/{c.runs_after}",
                    f"{c.p_value:.2g}",
                )
            ),
        )
    console.print(table)
    for s in {(s.device_key, s.mode, s.commit, s.difference) for s in found.segment_starts}:
        console.print(
            Text(f"new fingerprint segment at {s[2][:12]} ({s[0]}, {s[1]}): {s[3]}", style="dim")
        )
    alarms = found.alarms
    if alarms:
        console.print(
            Text(
                f"{len(alarms)} slower change{'s' * (len(alarms) != 1)} in the newest "
                "fingerprint segment",
                style="bold red",
            )
        )
    else:
        console.print(
            Text("no slower change in the newest fingerprint segment", style="bold green")
        )
    if args.json_out:
        atomic.write_json(args.json_out, [c.to_json() for c in found.changes])
    return found.exit_code


# -- plot and report -----------------------------------------------------------------------------
def _plot(args: argparse.Namespace) -> int:
    from perfgate.history import plot

    try:
        plot.format_for(args.out)
    except ValueError as exc:  # the plotting library's check of a file name: here, --out's
        raise UsageError(str(exc)) from None
    cfg, _, rows = _selected(args, ("--out", args.out))
    fig = plot.overview(rows, _detection(args, cfg, rows))
    plot.save(fig, args.out)
    print(f"wrote {args.out} ({len(rows)} rows)")
    return 0


def _report(args: argparse.Namespace) -> int:
    from perfgate.history import site

    def guard(path: Path | None) -> None:
        atomic.check_output_dirs({"--out": args.out})
        site.check_out_dir(args.out, [] if path is None else [path])

    cfg, db, rows = _selected(args, guard=guard)
    path = local_path(db)
    index = site.write_site(
        args.out,
        rows,
        _detection(args, cfg, rows),
        store=display(db),
        inputs=[] if path is None else [path],
    )
    print(f"wrote {index}")
    return 0


# -- migrate -------------------------------------------------------------------------------------
def _migrate(args: argparse.Namespace) -> int:
    cfg = _config()
    source = store.location(args.source, cfg.db)
    target = store.location(args.target, cfg.db)
    if same_store(source, target):
        raise UsageError(
            f"--from {store.display(source)} and --to {store.display(target)}: the same store; "
            "name the other one (the configured store is the default of each)"
        )
    path = store.local_path(target)
    if path is not None:
        atomic.check_not_tracked("--to", path)  # a store is written in place
    moved = migrate(source, target)
    print(
        f"{moved.runs} run{'s' * (moved.runs != 1)} ({moved.results} rows, "
        f"{moved.with_samples} with samples) from {moved.source} to {moved.target}: "
        f"{moved.added} added, {moved.runs - moved.added} already there with the same data; "
        "checked row for row"
    )
    return 0
