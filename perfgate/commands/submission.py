"""``python -m perfgate submission export|test``: the one file a user submits, made and tested.

``export --out FILE [--target gfx950|sm90]`` folds the package ``kernels/`` into one
self-contained leaderboard file (:mod:`perfgate.submission.export`): the same package and target
give the same bytes. ``--out`` is never an input of the export nor a file inside the package, and
is written atomically.

``test FILE [PYTEST_ARGS]`` runs the submission contract tests (``tests/submission/``: the
leaderboard rule, the one-ulp bound, the NaN/inf classes, property tests, the task's shapes on a
GPU, small shapes in the interpreter on a CPU) against FILE's ``custom_kernel``.

Exit codes: 0 every test passed (export: written); 1 a test failed; 2 unusable input: FILE does
not import or defines no ``custom_kernel``, a bad ``--out`` or ``--target``, a pytest selection
that matched nothing (one line on stderr).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTRACT_TESTS = "tests/submission"
PYTEST_OK, PYTEST_FAILED, PYTEST_NO_TESTS = 0, 1, 5


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
        help="run the submission contract tests against FILE's custom_kernel",
        description="Run the submission contract tests (tests/submission/) against FILE's "
        "custom_kernel. Arguments after FILE go to pytest (e.g. -x, -k EXPR, -n 4).",
    )
    test.add_argument("file", type=Path, metavar="FILE", help="the submission file (.py)")
    test.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        metavar="PYTEST_ARGS",
        help="passed to pytest (a leading -- is dropped)",
    )
    test.set_defaults(func=_test)


def _error(command: str, message: object) -> int:
    print(f"perfgate submission {command}: error: {message}", file=sys.stderr)
    return 2


def _export(args: argparse.Namespace) -> int:
    from perfgate.submission import export, manifest

    try:
        rendered = export.export(args.out, args.target or manifest.DEFAULT_TARGET)
    except export.ExportError as exc:
        return _error("export", exc)
    except OSError as exc:
        return _error("export", f"cannot write --out {args.out}: {exc.strerror or exc}")
    target = args.target or manifest.DEFAULT_TARGET
    print(
        f"perfgate submission export: wrote {args.out} ({target}, {len(rendered.modules)} modules, "
        f"{len(rendered.files)} native sources, sha256:{rendered.digest[:16]})"
    )
    return 0


def _test(args: argparse.Namespace) -> int:
    from perfgate.submission import load

    tests = REPO / CONTRACT_TESTS
    if not tests.is_dir():
        return _error("test", f"{tests} does not exist: run from a checkout of the suite")
    try:
        path = load.check_path(args.file)
        load.probe(path)
    except load.SubmissionError as exc:
        return _error("test", exc)
    extra = list(args.pytest_args or [])
    if extra[:1] == ["--"]:
        extra = extra[1:]
    cmd = [
        sys.executable, "-m", "pytest", CONTRACT_TESTS, "-m", "not bench",
        "-p", "no:cacheprovider", f"--submission={path}", *extra,
    ]  # fmt: skip
    print(f"perfgate submission test: {' '.join(cmd[1:])}", flush=True)
    rc = subprocess.run(cmd, cwd=REPO, check=False).returncode
    if rc == PYTEST_OK:
        return 0
    if rc == PYTEST_FAILED:
        print(f"perfgate submission test: {args.file} failed the contract", file=sys.stderr)
        return 1
    if rc == PYTEST_NO_TESTS:
        return _error("test", "the pytest selection matched no contract test")
    return _error("test", f"pytest exited {rc} (usage error, interrupted or internal error)")
