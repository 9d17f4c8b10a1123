"""``python -m perfgate submission export|test``: the one file a user submits, made and tested.

``export --out FILE [--target gfx950|sm90]`` folds the package ``kernels/`` into one
self-contained leaderboard file (:mod:`perfgate.submission.export`): the same package and target
give the same bytes. ``--out`` is never an input of the export nor a file inside the package, and
is written atomically.

``test FILE [--strict] [PYTEST_ARGS]`` runs the submission contract tests (``tests/submission/``)
against FILE's ``custom_kernel``, in two tiers (perfgate/submission/tiers.py):

- **leaderboard**: what GPU MODE's harness checks: its ten cases with their seeds (on a GPU, every
  output leaderboard mode checks), its generator, its rule. It decides the exit code.
- **strict**: the suite's exact semantics (NaN/inf classes bit for bit, the one-ulp bound, odd
  shapes, scale padding, inputs never written, outputs never aliased, determinism). Always run;
  each departure is listed (class, first differing element, got/want bits). ``--strict`` makes
  a departure fail the command too.

The last line says both: ``leaderboard: PASS (10 checks); strict: 6 departures``.

Exit codes: 0 the leaderboard tier passed (with ``--strict``: and no departure; export: written);
1 a leaderboard check failed (named on stderr), or a departure under ``--strict``; 2 unusable
input: FILE does not import or defines no ``custom_kernel``, a bad ``--out`` or ``--target``, a
selection that ran no leaderboard check, a session that did not complete (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfgate import atomic, spawn
from perfgate.checkout import REPO
from perfgate.commands import base
from perfgate.refusal import Refusal, RunFailure
from perfgate.submission import contract, export, load, manifest

CONTRACT_TESTS = "tests/submission"
PYTEST_OK, PYTEST_FAILED, PYTEST_NO_TESTS = 0, 1, 5
STRICT = "--strict"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "submission",
        help="export the package as one leaderboard file; test any submission file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(
        dest="submission_command",
        required=True,
        metavar="SUBCOMMAND",
        help="export or test a submission file",
    )
    export = sub.add_parser(
        "export",
        help="write kernels/ as one self-contained submission file",
        description="Write the package kernels/ as one self-contained leaderboard file.",
    )
    export.add_argument("--out", required=True, type=Path, metavar="FILE", help="file to write")
    export.add_argument(
        "--target",
        default=None,
        metavar="TARGET",
        help="the GPU the file is for: its POPCORN gpu line and tuned table "
        "(gfx950: MI355X, the default; sm90: H100/H200)",
    )
    export.set_defaults(func=_export)
    test = sub.add_parser(
        "test",
        help="would the leaderboard accept FILE, and where does it depart from the suite's "
        "exact semantics",
        description="Run the submission contract tests (tests/submission/) against FILE's "
        "custom_kernel: the leaderboard tier (GPU MODE's cases, seeds and rule) decides the exit "
        "code; the strict tier (the suite's exact semantics) is listed, departure by departure. "
        "Arguments after FILE go to pytest (e.g. -x, -k EXPR, -n 4, --tb=short for tracebacks), "
        "except --strict; after a -- all go to pytest.",
    )
    test.add_argument("file", type=Path, metavar="FILE", help="the submission file (.py)")
    test.add_argument(
        STRICT,
        action="store_true",
        help="a departure in the strict tier fails the command too (exit 1)",
    )
    test.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        metavar="PYTEST_ARGS",
        help="passed to pytest (--strict before a -- is this command's)",
    )
    test.set_defaults(func=_test)


def _export(args: argparse.Namespace) -> int:
    atomic.check_outputs({"--out": args.out})
    rendered = export.export(args.out, args.target or manifest.DEFAULT_TARGET)
    target = args.target or manifest.DEFAULT_TARGET
    print(
        f"perfgate submission export: wrote {args.out} ({target}, {len(rendered.modules)} modules, "
        f"{len(rendered.files)} native sources, sha256:{rendered.digest[:16]})"
    )
    return 0


def split_args(args: list[str]) -> tuple[bool, list[str]]:
    """(``--strict`` given among FILE's trailing arguments, the arguments for pytest): before a
    ``--``, ``--strict`` is this command's; everything after it is pytest's."""
    if "--" in args:
        i = args.index("--")
        mine, theirs = args[:i], args[i + 1 :]
    else:
        mine, theirs = args, []
    return STRICT in mine, [a for a in mine if a != STRICT] + theirs


def _test(args: argparse.Namespace) -> int:
    from perfgate.submission.pytest_plugin import running_path

    tests = REPO / CONTRACT_TESTS
    if not tests.is_dir():
        raise Refusal(f"{tests} does not exist: run from a checkout of the suite")
    path = load.check_path(args.file)
    # where there is no GPU the contract tests run the kernels in the interpreter; a machine
    # whose interpreter cannot is refused once the file itself is known to be usable
    refusal = base.interpreter_refusal()
    strict, extra = split_args(list(args.pytest_args or []))
    strict = strict or args.strict
    with tempfile.TemporaryDirectory(prefix="perfgate-submission-test-") as tmp:
        status, results = Path(tmp) / "status.json", Path(tmp) / "results.json"
        tests = [
            CONTRACT_TESTS, "-m", "not bench",
            # no crash dump: a file that kills the process gets one line naming the test
            "-p", "no:cacheprovider", "-p", "no:faulthandler", "--tb=no", f"--submission={path}",
            f"--submission-results={results}", *extra,
        ]  # fmt: skip
        # one process loads FILE (the probe's check), then runs the tests (contract.py)
        cmd = [sys.executable, "-m", contract.MODULE, str(status), str(path)]
        rc = _run_loading(cmd + ([] if refusal else ["--", *tests]), status, args.file)
        loaded = json.loads(status.read_text()) if status.is_file() else None
        ran = json.loads(results.read_text()) if results.is_file() else None
        running = running_path(results)
        inside = running.read_text().strip() if running.is_file() else None
    if loaded is None:  # exit 0 without the word: the file's own os._exit(0)
        how = "exit 0, os._exit?" if rc == 0 else spawn.describe(rc)
        raise Refusal(f"{args.file}: importing it ended the process ({how})")
    if "error" in loaded:
        raise Refusal(loaded["error"])
    if refusal is not None:
        raise refusal
    if ran is None and inside is not None:
        # the file ended the test process inside a test: the leaderboard would fail it too
        how = f"killed by {_signal_name(-rc)}" if rc < 0 else f"exited {rc}"
        print(
            f"perfgate submission test: {args.file} fails: the test process {how} inside "
            f"{_name({'nodeid': inside})} (the submission ended it)",
            file=sys.stderr,
        )
        return 1
    if rc == PYTEST_NO_TESTS:
        raise Refusal("the pytest selection matched no contract test")
    if rc not in (PYTEST_OK, PYTEST_FAILED):  # no verdict: exit 2, as for unusable input
        raise RunFailure(f"pytest exited {rc} (usage error, interrupted or internal error)")
    if ran is None:
        raise RunFailure(
            f"pytest exited {rc} but the session never reached its end (no results written): "
            f"{args.file} or a test ended the process; no verdict"
        )
    verdict = Verdict(ran["tests"])
    print(verdict.tables(), flush=True)
    if not verdict.leaderboard_ran:
        raise Refusal(
            "no leaderboard check ran (the selection left none): the leaderboard's verdict is "
            "unknown; select at least one test of tests/submission/test_leaderboard_tier.py"
        )
    code = 0
    if verdict.leaderboard_failed:
        first = verdict.leaderboard_failed[0]
        print(
            f"perfgate submission test: {args.file} fails the leaderboard tier: "
            f"{_name(first)}: {first.get('error', '')}",
            file=sys.stderr,
            flush=True,
        )
        code = 1
    elif strict and verdict.departures:
        print(
            f"perfgate submission test: {args.file} departs from the strict tier ({STRICT}): "
            f"{_count(len(verdict.departures), 'departure')}, first {_name(verdict.departures[0])}",
            file=sys.stderr,
            flush=True,
        )
        code = 1
    print(verdict.summary(strict))
    return code


def _run_loading(cmd: list[str], status: Path, name: Path) -> int:
    """``cmd``'s return code; stopped, and refused, when it has not loaded FILE (no ``status``
    yet) after :data:`perfgate.submission.load.IMPORT_TIMEOUT_S`."""
    deadline = time.monotonic() + load.IMPORT_TIMEOUT_S
    with spawn.popen(cmd, cwd=REPO) as proc:
        try:
            while True:
                try:
                    return proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    if not status.is_file() and time.monotonic() > deadline:
                        raise Refusal(
                            f"{name}: importing it took over {load.IMPORT_TIMEOUT_S:.0f} s"
                        ) from None
        except BaseException:
            spawn.stop(proc)
            raise


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _name(test: dict) -> str:
    """A test's name without its module: the function and its parameters."""
    return test["nodeid"].rpartition("::")[2]


class Verdict:
    """The two tiers' results, as ``--submission-results`` recorded them."""

    def __init__(self, tests: list[dict]) -> None:
        tests = sorted(tests, key=lambda t: t["nodeid"])  # pytest-xdist reports in any order
        self.leaderboard = [t for t in tests if t["tier"] == "leaderboard"]
        self.strict = [t for t in tests if t["tier"] == "strict"]
        ran = [t for t in self.leaderboard if t["outcome"] != "skipped"]
        self.leaderboard_ran = len(ran)
        self.leaderboard_failed = [t for t in ran if t["outcome"] != "passed"]
        self.departures = [t for t in self.strict if t["outcome"] in ("failed", "error")]

    def tables(self) -> str:
        lines = ["", "leaderboard tier: GPU MODE's cases, seeds and rule"]
        rows = [("check", "outputs checked", "result")]
        for t in self.leaderboard:
            result = {"passed": "pass", "skipped": f"skipped: {t.get('reason', '')}"}.get(
                t["outcome"], f"FAIL: {t.get('error', '')}"
            )
            rows.append((_name(t).partition("[")[2].rstrip("]") or _name(t),
                         str(t.get("calls", "-")), result))  # fmt: skip
        lines += _aligned(rows)
        lines += ["", "strict tier: the suite's exact semantics"]
        rows = [("test", "class", "first element", "got", "want", "differ", "detail")]
        for t in self.departures:
            d = t.get("departure") or {"class": "error", "detail": t.get("error", "")}
            element = "-" if d.get("element") is None else str(tuple(d["element"]))
            count = "-" if d.get("count") is None else f"{d['count']}/{d['total']}"
            rows.append((_name(t), d["class"], element, d.get("got") or "-", d.get("want") or "-",
                         count, d.get("detail", "")))  # fmt: skip
        skipped = [t for t in self.strict if t["outcome"] == "skipped"]
        held = len(self.strict) - len(self.departures) - len(skipped)
        lines += _aligned(rows) if self.departures else ["  no departure"]
        lines.append(f"  {held} held, {len(skipped)} skipped")
        reasons: dict[str, list[str]] = {}
        for t in skipped:
            reasons.setdefault(t.get("reason", ""), []).append(_name(t))
        for reason, names in reasons.items():
            lines.append(f"  skipped ({reason}): {', '.join(names)}")
        return "\n".join(lines)

    def summary(self, strict: bool) -> str:
        if self.leaderboard_failed:
            board = (
                f"FAIL ({len(self.leaderboard_failed)} of {_count(self.leaderboard_ran, 'check')})"
            )
        else:
            board = f"PASS ({_count(self.leaderboard_ran, 'check')})"
        count = len(self.departures)
        departures = _count(count, "departure")
        deciding = f" ({STRICT}: {'FAIL' if count else 'PASS'})" if strict else ""
        return f"leaderboard: {board}; strict: {departures}{deciding}"


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  " + "  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
        for r in rows
    ]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
