"""The two errors ``python -m perfgate`` answers with one line, wherever in a command they are
raised: input it cannot use (a Refusal, exit 2) and a run that failed (a RunFailure, its own
exit code). Commands raise them and print no error line of their own."""

from __future__ import annotations


class Refusal(Exception):
    """Input perfgate cannot use (a file, an option, a setting, a revision, a submission): the
    message is one line naming the input and what was expected. ``python -m perfgate`` prints
    it as ``perfgate COMMAND: error: MESSAGE`` and exits 2, wherever in a command it is raised.

    Each module's own error (``BaselineError``, ``SettingsError``, ...) derives from it, and
    keeps ``ValueError`` as a base where it had one. Failures of the run itself (a worker that
    dies, a compiler that fails, a GitHub API that answers 500) are not refusals."""


class RunFailure(Exception):
    """A run that failed rather than its input (a side of an A/B that cannot prepare its case, a
    child command that died): ``python -m perfgate`` prints it as a Refusal is printed and exits
    with ``code``: 1 where the change under test is at fault, 2 where the run cannot be judged."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
