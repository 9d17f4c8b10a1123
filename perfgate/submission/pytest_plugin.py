"""pytest plugin: ``--submission FILE`` and the ``custom_kernel`` fixture the contract tests use.

Declared in the root ``tests/conftest.py`` (``pytest_plugins``), where pytest reads it before
parsing options, so ``nox -s test -- --submission FILE`` and ``python -m perfgate submission test
FILE`` reach the same tests (``tests/submission/``). Without the option the fixture is the
package's own ``kernels.gemm.custom_kernel``.

The file is loaded once per session, at its start: a file that does not import, or has no
``custom_kernel``, stops the session with one line (a usage error) before any test runs.

The tiers (:mod:`perfgate.submission.tiers`) are markers, ``leaderboard`` and ``strict``, one per
module of tests/submission/. ``--submission-results PATH`` writes, at the end of the session,
what ran: every test's tier, outcome, the outputs it checked, its departure (a strict failure's
class, first differing element and bits) or its one-line error. ``submission test`` reads that
file: a session that never reached its end (a file that calls ``os._exit(0)``) writes none, and
is never taken for a pass. Under pytest-xdist the controller writes it, from the reports its
workers send.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfgate import atomic
from perfgate.submission.load import SubmissionError, load

OPTION = "--submission"
RESULTS_OPTION = "--submission-results"
TIERS = {
    "leaderboard": "the submission tier GPU MODE checks (its cases, seeds and rule)",
    "strict": "the submission tier of the suite's exact semantics (departures)",
}
_STASH = pytest.StashKey[object]()


def pytest_addoption(parser: pytest.Parser) -> None:
    helps = {
        (OPTION, "FILE"): "run the submission contract tests (tests/submission/) against FILE's "
        "custom_kernel instead of the package's (perfgate submission test FILE does this)",
        (RESULTS_OPTION, "PATH"): "write what the submission tests did (tier, outcome, departure "
        "of each) as JSON to PATH when the session ends",
    }
    for (option, metavar), text in helps.items():
        parser.getgroup("perfgate").addoption(option, metavar=metavar, default=None, help=text)


def load_option(config: pytest.Config, option: str) -> Any:
    """The submission file that pytest ``option`` names, loaded (None without the option);
    a file that cannot be loaded stops the session as a usage error naming the option. Both
    perfgate plugins load theirs here."""
    path = config.getoption(option)
    if path is None:
        return None
    try:
        return load(path)
    except SubmissionError as exc:
        raise pytest.UsageError(f"{option}: {exc}") from None


# trylast: under pytest-xdist, after the controller has started its workers (xdist's own
# sessionstart is trylast too, and registered later: it runs first). Each worker loads the file
# for its tests; the controller's load, which only stops a session on an unusable file, then
# overlaps their start instead of delaying it by an import of torch and the file.
@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    submission = load_option(session.config, OPTION)
    if submission is not None:
        session.config.stash[_STASH] = submission


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


# -- what ran, for submission test ----------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    from perfgate.submission.tiers import Departure

    if call.excinfo is not None and isinstance(call.excinfo.value, Departure):
        report.user_properties.append(("departure", call.excinfo.value.as_dict()))


def tier_of(keywords: Any) -> str | None:
    return next((t for t in TIERS if t in keywords), None)


def pytest_configure(config: pytest.Config) -> None:
    for name, text in TIERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    path = config.getoption(RESULTS_OPTION)
    if path is not None and not hasattr(config, "workerinput"):  # xdist: the controller writes
        config.pluginmanager.register(Results(path), "perfgate-submission-results")


def running_path(results: str | Path) -> Path:
    """Where :class:`Results` names the test in progress (``RESULTS.running``): left behind
    when the file under test ends the process inside a test (a signal, ``os._exit``)."""
    return Path(f"{results}.running")


class Results:
    """Collects every tiered test's reports; writes them when the session ends. While a test
    runs, its node id stands in :func:`running_path`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tests: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        running_path(self.path).write_text(nodeid + "\n")

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        running_path(self.path).unlink(missing_ok=True)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        tier = tier_of(report.keywords)
        if tier is None:
            return
        entry = self.tests.setdefault(
            report.nodeid, {"nodeid": report.nodeid, "tier": tier, "outcome": "passed"}
        )
        if report.skipped:
            entry.update(outcome="skipped", reason=_one_line(report.longrepr))
        elif report.failed:
            entry.update(outcome="failed" if report.when == "call" else "error",
                         error=_one_line(report.longrepr))  # fmt: skip
        for key, value in report.user_properties:
            if key in ("departure", "calls"):
                entry[key] = value

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        atomic.write_json(self.path, {"complete": True, "exitstatus": int(exitstatus),
                                      "tests": list(self.tests.values())})  # fmt: skip


def _one_line(longrepr: Any) -> str:
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        text = str(longrepr[-1]).removeprefix("Skipped: ")
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(longrepr)
        text = text.removeprefix("Failed: ")  # pytest.fail's
    return " ".join(text.split())[:400]
