"""The one kind of error perfgate answers with one line and exit 2: input it cannot use."""

from __future__ import annotations


class Refusal(Exception):
    """Input perfgate cannot use (a file, an option, a setting, a revision, a submission): the
    message is one line naming the input and what was expected. ``python -m perfgate`` prints
    it as ``perfgate COMMAND: error: MESSAGE`` and exits 2, wherever in a command it is raised.

    Each module's own error (``BaselineError``, ``SettingsError``, ...) derives from it, and
    keeps ``ValueError`` as a base where it had one. Failures of the run itself (a worker that
    dies, a compiler that fails, a GitHub API that answers 500) are not refusals."""
