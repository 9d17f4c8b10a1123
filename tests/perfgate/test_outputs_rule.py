"""One rule for every command that writes (perfgate.atomic.check_outputs): no output over an
input, nor over, or into, the repository's own tracked files, except baselines by the commands
that exist to write them. Table-driven over the CLI's parsers: every option that names a path
is listed here as an output (and then tried on pyproject.toml and inside kernels/) or as an
input, so a new option cannot be added without saying which it is."""

from __future__ import annotations

import argparse
import hashlib

import pytest

from perfgate.__main__ import build_parser, main
from perfgate.gate import paths

# (command, option) -> the rest of a command line that is otherwise valid, for outputs; None
# for options that name an input (or a store read and written in place: --db, see below)
OUTPUTS = {
    ("compare", "--json"): ["in/a.json", "in/a.json"],
    ("compare", "--markdown"): ["in/a.json", "in/a.json"],
    ("bench", "--results-dir"): [],
    ("update-baselines", "--results-dir"): [],
    ("update-baselines", "--baselines-dir"): [],
    ("ab", "--results-dir"): ["--base", "HEAD"],
    ("ab", "--json"): ["--base", "HEAD"],
    ("ab", "--markdown"): ["--base", "HEAD"],
    ("host", "--json"): [],
    ("isa", "--json"): ["--target", "sm90"],
    ("history list", "--json"): [],
    ("history detect", "--json"): [],
    ("history plot", "--out"): [],
    ("history report", "--out"): [],
    ("bisect", "--results-dir"): ["--good", "HEAD~1", "--bad", "HEAD"],
    ("bisect", "--json"): ["--good", "HEAD~1", "--bad", "HEAD"],
    ("triage", "--results-dir"): ["--no-issues"],
    ("triage", "--summary"): ["--no-issues"],
    ("triage", "--json"): ["--no-issues"],
    ("submission export", "--out"): [],
    ("explain", "--json"): ["--base", "HEAD"],
    ("explain", "--markdown"): ["--base", "HEAD"],
}
INPUTS = {
    ("compare", "baseline"), ("compare", "current"), ("bench", "--baselines-dir"),
    ("bench", "--submission"), ("update-baselines", "--submission"), ("host", "--baselines-dir"),
    ("ab", "--base-submission"), ("ab", "--head-submission"), ("history add", "results"),
    ("triage", "reports"), ("triage", "--publish"), ("submission test", "file"),
    ("isa", "--check"), ("explain", "--repo"),
}  # fmt: skip
# the history store is read and extended in place: refused as a tracked file like an output
STORES = {"--db"}
PATHLIKE = ("out", "json", "markdown", "summary", "dir", "file", "path", "db", "report", ".py")


def _path_options():
    """(command, option) of every argument whose name, metavar or type says it is a path."""
    found = set()

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])
                continue
            if action.dest in ("help", "pytest_args", "args", "session"):
                continue
            name = action.option_strings[-1] if action.option_strings else action.dest
            words = f"{action.dest} {action.metavar or ''} {getattr(action.type, '__name__', '')}"
            if "Path" in words or any(w in words.lower() for w in PATHLIKE):
                found.add((" ".join(prefix), name))

    walk(build_parser(), [])
    return found


def test_every_path_option_is_an_output_or_an_input():
    found = _path_options()
    stores = {o for o in found if o[1] in STORES}
    unlisted = found - set(OUTPUTS) - INPUTS - stores
    assert not unlisted, f"say whether these are outputs or inputs: {sorted(unlisted)}"
    assert not set(OUTPUTS) - found and not INPUTS - found, "the table names an option gone"


def _digest() -> str:
    return hashlib.sha256(paths.PYPROJECT.read_bytes()).hexdigest()


@pytest.fixture
def restored():
    """The files a case aims at, put back whatever the case does: a command that breaks the rule
    fails its test without leaving the checkout damaged."""
    kept = {p: p.read_bytes() for p in (paths.PYPROJECT, paths.REPO / "README.md")}
    stray = paths.REPO / "kernels" / "out.json"
    yield
    for p, data in kept.items():
        if p.read_bytes() != data:
            p.write_bytes(data)
    if stray.is_dir():
        import shutil

        shutil.rmtree(stray)
    stray.unlink(missing_ok=True)


@pytest.mark.parametrize("target", ["pyproject.toml", "kernels/out.json", "README.md"])
@pytest.mark.parametrize(("command", "option"), sorted(OUTPUTS), ids=lambda v: str(v))
def test_no_output_goes_over_or_into_the_project(
    command, option, target, capsys, monkeypatch, restored
):
    if (command, option) == ("history plot", "--out"):
        if not target.endswith(".json"):
            pytest.skip("a plot is a .png or .svg: the project's files are refused by their name")
        target = target.replace(".json", ".png")
    monkeypatch.chdir(paths.REPO)
    before = _digest()
    argv = [*command.split(), option, str(paths.REPO / target), *OUTPUTS[(command, option)]]
    assert main(argv) == 2, capsys.readouterr()
    err = capsys.readouterr().err.strip().splitlines()
    assert err and option in err[-1] and "the project's own files" in err[-1], err
    assert _digest() == before
    assert not (paths.REPO / "kernels" / "out.json").exists()


@pytest.mark.parametrize("command", sorted({c for c, o in _path_options() if o in STORES}))
def test_no_history_store_is_a_tracked_file(command, capsys, monkeypatch, restored):
    monkeypatch.chdir(paths.REPO)
    before = _digest()
    extra = {"history add": ["x.json"], "bisect": [], "ab": ["--base", "HEAD", "--history"],
             "bench": ["--history"], "update-baselines": ["--history"], "triage": ["--no-issues"],
             "history plot": ["--out", "x.png"], "history report": ["--out", "site"]}  # fmt: skip
    argv = [*command.split(), "--db", str(paths.PYPROJECT), *extra.get(command, [])]
    assert main(argv) == 2, capsys.readouterr()
    # refused for the store, not for another input missing on this machine (a report, a GPU)
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "--db" in err[-1] and "the project's own files" in err[-1], err
    assert _digest() == before


def test_baselines_are_written_only_by_the_commands_that_exist_to():
    from perfgate import atomic

    baseline = paths.REPO / "perf_baselines" / "isa" / "sm90.json"
    atomic.check_outputs({"--json": baseline}, baselines=True)  # isa --json, update-baselines
    atomic.check_output_dirs({"--baselines-dir": paths.REPO / "perf_baselines"}, baselines=True)
    with pytest.raises(atomic.OutputError, match="tracked file or folder"):
        atomic.check_outputs({"--json": baseline})  # any other output
    with pytest.raises(atomic.OutputError, match="tracked file or folder"):
        atomic.check_outputs({"--json": paths.PYPROJECT}, baselines=True)
