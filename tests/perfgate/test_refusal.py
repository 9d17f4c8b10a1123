"""One refusal type: every error that means "input perfgate cannot use" is a
perfgate.refusal.Refusal, which ``python -m perfgate`` answers with one line and exit 2 wherever a
command raises it; every other error class says why it is not one. One way out: no command
module prints an error line of its own or catches a Refusal (read from the code)."""

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
    "RunFailure": "a run that failed, not its input: main prints it, with its own exit code",
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
    "AbError": "an A/B that cannot run: a RunFailure, its own exit code (a wrong head output is 1)",
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


# perfgate's commands, and the lab's, which runs on perfgate's main
COMMANDS = [
    *sorted((PERFGATE / "commands").glob("*.py")),
    PERFGATE.parent / "lab" / "experiment.py",
]
REFUSALS = {name for module, name in ERRORS if issubclass(
    getattr(importlib.import_module(module), name), Refusal)} | {"Refusal"}  # fmt: skip


def _strings(node: ast.AST) -> list[str]:
    """The literal text of a string or f-string node."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    return []


def own_error_lines_and_refusal_catches(source: str) -> list[str]:
    """What breaks the one way out in a command module's source: a string holding ``error:``
    (an error line printed by hand) and an ``except`` naming a Refusal (one answered by hand)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for text in _strings(node):
            if "error:" in text:
                found.append(f"line {node.lineno}: an error line of its own ({text.strip()!r})")
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            kinds = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            for kind in kinds:
                name = ast.unparse(kind).rpartition(".")[2]
                if name in REFUSALS:
                    found.append(f"line {node.lineno}: catches {name}, a Refusal")
    return found


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: p.name)
def test_no_command_prints_its_own_error_line_or_catches_a_refusal(path):
    found = own_error_lines_and_refusal_catches(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.parent.name}/{path.name}: raise a perfgate.refusal.Refusal (or RunFailure) and let "
        "__main__ print it: " + "; ".join(found)
    )


def test_the_rule_sees_a_hand_written_error_line_and_a_caught_refusal():
    printed = 'import sys\nprint(f"perfgate x: error: {1}", file=sys.stderr)\n'
    caught = "try:\n    pass\nexcept (KeyError, bl.BaselineError):\n    pass\n"
    assert own_error_lines_and_refusal_catches(printed)
    assert own_error_lines_and_refusal_catches(caught) == [
        "line 3: catches BaselineError, a Refusal"
    ]
    assert (
        own_error_lines_and_refusal_catches("try:\n    pass\nexcept ValueError:\n    pass\n") == []
    )


def test_a_subcommand_s_refusal_names_the_subcommand(monkeypatch, capsys, tmp_path):
    assert main(["history", "list", "--db", str(tmp_path / "nothere.sqlite")]) == 2
    assert capsys.readouterr().err.startswith("perfgate history list: error: ")


def test_a_run_failure_is_one_line_with_its_own_exit_code(monkeypatch, capsys):
    from perfgate.commands import compare
    from perfgate.refusal import RunFailure

    def deep(args):
        raise RunFailure("--head-submission b.py: fails the leaderboard tier; not timed", 1)

    monkeypatch.setattr(compare, "_run", deep)
    assert main(["compare", "b.json", "c.json"]) == 1
    assert capsys.readouterr().err == (
        "perfgate compare: error: --head-submission b.py: fails the leaderboard tier; not timed\n"
    )
