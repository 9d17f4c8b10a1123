"""``python -m perfgate.submission.contract STATUS FILE [-- PYTEST_ARGS...]``: the one process of
``perfgate submission test``: FILE loaded first, then the contract tests in the same process
(without ``--``: FILE loaded, and nothing run).

Loading first is the probe's check (:func:`perfgate.submission.load.probe`) without a process of
its own: a file that cannot be used is told from a failed test before pytest starts, and the
two imports of torch a separate probe costs become one.

STATUS (a path) receives ``{"loaded": true}`` once FILE loads, or ``{"error": LINE}`` when it
cannot be used (then exit 2 and nothing printed: the command says it, in one line). A file that
ends the process while it is imported leaves no STATUS. Once FILE loads, the command line of the
tests is printed, and pytest's exit code is this process's.
"""

from __future__ import annotations

import sys

from perfgate import atomic
from perfgate.submission import load

MODULE = "perfgate.submission.contract"
PROG = "perfgate submission test"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or (len(args) > 2 and args[2] != "--"):
        print(f"usage: python -m {MODULE} STATUS FILE [-- PYTEST_ARGS...]", file=sys.stderr)
        return 2
    status, path, pytest_args = args[0], args[1], args[3:]
    try:
        load.load(path)
    except load.SubmissionError as exc:
        atomic.write_json(status, {"error": str(exc)})
        return 2
    atomic.write_json(status, {"loaded": True})
    if len(args) == 2:
        return 0
    print(f"{PROG}: -m pytest {' '.join(pytest_args)}", flush=True)
    import pytest

    return int(pytest.main(pytest_args))


if __name__ == "__main__":
    sys.exit(main())
