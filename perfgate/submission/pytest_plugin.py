"""pytest plugin: ``--submission FILE`` and the ``custom_kernel`` fixture the contract tests use.

Declared in the root ``tests/conftest.py`` (``pytest_plugins``), where pytest reads it before
parsing options, so ``nox -s test -- --submission FILE`` and ``python -m perfgate submission test
FILE`` reach the same tests (``tests/submission/``). Without the option the fixture is the
package's own ``kernels.gemm.custom_kernel``.

The file is loaded once per session, at its start: a file that does not import, or has no
``custom_kernel``, stops the session with one line (a usage error) before any test runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

OPTION = "--submission"
_STASH = pytest.StashKey[object]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("perfgate").addoption(
        OPTION,
        metavar="FILE",
        default=None,
        help="run the submission contract tests (tests/submission/) against FILE's "
        "custom_kernel instead of the package's (perfgate submission test FILE does this)",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    from perfgate.submission.load import SubmissionError, load

    path = session.config.getoption(OPTION)
    if path is None:
        return
    try:
        session.config.stash[_STASH] = load(path)
    except SubmissionError as exc:
        raise pytest.UsageError(f"{OPTION}: {exc}") from None


def submission_under_test(config: pytest.Config) -> Any:
    """The loaded :class:`perfgate.submission.load.Submission` of ``--submission``, or None."""
    return config.stash.get(_STASH, None)


def kernel_under_test(config: pytest.Config) -> Callable[[Any], Any]:
    """``custom_kernel`` of ``--submission FILE``, or the package's own."""
    submission = submission_under_test(config)
    if submission is not None:
        return submission.custom_kernel
    from kernels.gemm import custom_kernel

    return custom_kernel


@pytest.fixture(scope="session")
def custom_kernel(request: pytest.FixtureRequest) -> Callable[[Any], Any]:
    """The ``custom_kernel(data)`` under test: ``--submission FILE``'s, or the package's."""
    return kernel_under_test(request.config)
