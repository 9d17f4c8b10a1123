"""One refusal type: every error that means "input perfgate cannot use" is a
perfgate.refusal.Refusal, which ``python -m perfgate`` answers with one line and exit 2 wherever a
command raises it; every other error class says why it is not one."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from perfgate.__main__ import main
from perfgate.refusal import Refusal

PERFGATE = Path(__file__).resolve().parents[2] / "perfgate"

# Errors that are not unusable input, and why (a new error class must be put on one side).
NOT_REFUSALS = {
    "CommandImportError": "a broken command module: the CLI cannot be built, before any command",
    "FlagError": "perfgate/flags.py imports nothing of perfgate (the noxfile loads it by path); "
    "main checks the variables, one line and exit 2, before any command runs",
    "ContainerError": "the container's setup failed: its own exit code (EXIT_SETUP)",
    "StepLimit": "bisect's step budget ran out: control flow, the answer says so",
    "GitHubError": "the issues API failed: the run's failure, not its input",
    "ProviderError": "no compiler for a target: the run's environment",
    "CompileError": "a kernel failed to compile: the code under test",
    "PrepareError": "a worker could not prepare a case: the head's output may be wrong (exit 1)",
    "WorkerError": "a worker process died or lied: the run's failure",
    "AbError": "an A/B that cannot run: carries its own exit code (a wrong head output is 1)",
    "Departure": "a strict-tier departure: a finding, not an error of the command",
    "TierFailure": "a leaderboard-tier failure: a verdict (exit 1)",
    "_RunFailed": "a pytest run that failed: its own exit code",
    "NotAvailable": "a revision that predates a fact of explain's: that fact is not compared",
    "SplitError": "a device trace that cannot be split: one fact not given, the rest explained",
}


def _error_classes() -> list[tuple[str, str]]:
    """(module, class) of every class in perfgate whose name says it is an error or exception."""
    found = []
    for path in sorted(PERFGATE.rglob("*.py")):
        module = ".".join(path.relative_to(PERFGATE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            bases = [ast.unparse(b) for b in getattr(node, "bases", [])]
            if isinstance(node, ast.ClassDef) and any(
                b.endswith(("Error", "Exception", "Refusal", "Failure")) for b in bases
            ):
                found.append((module, node.name))
    return found


ERRORS = _error_classes()


def test_the_error_classes_are_found():
    names = {name for _, name in ERRORS}
    assert {"SettingsError", "OutputError", "BaselineError", "WorkerError"} <= names


@pytest.mark.parametrize(("module", "name"), ERRORS, ids=[n for _, n in ERRORS])
def test_every_error_is_a_refusal_or_says_why_not(module, name):
    cls = getattr(importlib.import_module(module), name)
    if name in NOT_REFUSALS:
        assert not issubclass(cls, Refusal), f"{name} is listed as not a refusal"
    else:
        assert issubclass(cls, Refusal), (
            f"{module}.{name}: derive it from perfgate.refusal.Refusal (unusable input: one "
            "line, exit 2), or list it in NOT_REFUSALS with the reason"
        )


def test_a_refusal_raised_anywhere_in_a_command_is_one_line_and_exit_2(monkeypatch, capsys):
    from perfgate.commands import compare

    def deep(args):
        raise Refusal("--baseline x.json: expected a results file")

    monkeypatch.setattr(compare, "_run", deep)
    assert main(["compare", "b.json", "c.json"]) == 2
    assert capsys.readouterr().err == (
        "perfgate compare: error: --baseline x.json: expected a results file\n"
    )


def test_a_refusal_keeps_the_base_its_callers_catch():
    from perfgate.atomic import OutputError
    from perfgate.gate.settings import SettingsError

    assert issubclass(SettingsError, ValueError) and issubclass(OutputError, ValueError)
