"""One rule for every command of ``python -m perfgate``, through a real subprocess: unusable input
is exit 2 with one line on stderr naming the argument or file and what was expected (a traceback
would be exit 1, which CI reads as a regression); and help written for the user."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfgate import modes
from perfgate.__main__ import build_parser, main, plain_text, unexpected

ROOT = Path(__file__).resolve().parents[2]
PROC = Path("/proc/self").is_dir()


def perfgate(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PERFGATE_TRACEBACK"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Inputs for the cases below: a good result file, broken ones, samples files."""
    from tests.perfgate.conftest import gpu_like, make_result

    d = tmp_path_factory.mktemp("cli")
    good = make_result({"t::a": gpu_like(1), "t::b": gpu_like(2)})
    paths = {"good": d / "good.json", "taken": d / "taken", "empty": d / "empty.npz"}
    paths["good"].write_text(json.dumps(good))
    listed = json.loads(json.dumps(good))
    listed["benchmarks"][0]["extra_info"] = [1, 2]
    paths["listed"] = d / "listed.json"
    paths["listed"].write_text(json.dumps(listed))
    paths["nested"] = d / "nested.json"
    paths["nested"].write_text("[" * 100_000 + "]" * 100_000)
    paths["taken"].write_text("a file, not a directory")
    np.savez(paths["empty"])
    (d / "pb" / "k").mkdir(parents=True)
    paths["pb"] = d / "pb"
    return paths


# (argv with {placeholders}, what the one line must contain)
CASES = {
    "compare-missing": (["compare", "{d}/none.json", "{good}"], "{d}/none.json: no such file"),
    "compare-extra_info-list": (["compare", "{good}", "{listed}"], "extra_info is a JSON array"),
    "compare-nested": (["compare", "{nested}", "{good}"], "nested too deeply"),
    "compare-over-baseline": (
        ["compare", "{good}", "{listed}", "--json", "{good}"],
        "--json {good} is the input BASELINE.json {good}",
    ),
    "compare-proc": (["compare", "{good}", "{good}", "--json", "/proc/x.json"], "/proc"),
    "compare-resamples": (["compare", "{good}", "{good}", "--n-resamples", "100000000"], "[100, 100000]"),
    "compare-unknown-flag": (["compare", "{good}", "{good}", "--looks", "3"], "unrecognized arguments: --looks 3"),
    "compare-not-a-number": (["compare", "{good}", "{good}", "--alpha", "x"], "--alpha: invalid float value: 'x'"),
    "bench-processes": (
        ["bench", "--mode", "leaderboard", "--processes-leaderboard", "16", "--rounds-leaderboard", "10"],
        "processes.leaderboard (16, --processes-leaderboard) x min_samples",
    ),
    "bench-rounds": (["bench", "--rounds-device", "1000000000000"], "rounds.device must be an int in [2, 10000]"),
    "bench-results-in-baselines": (
        ["bench", "--results-dir", "{pb}/k", "--baselines-dir", "{pb}"],
        "--results-dir {pb}/k is inside --baselines-dir {pb}",
    ),
    "bench-tag": (["bench", "--tag", "../x"], "--tag must be letters, digits"),
    "update-runs": (["update-baselines", "--runs", "0"], "argument --runs: must be an int in [1, 20]"),
    "update-isa-unwritable": (["update-baselines", "--isa", "--baselines-dir", "{taken}"], "is a file, expected a directory"),
    "ab-unknown-rev": (["ab", "--base", "no-such-revision-xyz"], "names no commit"),
    "ab-ignored-option": (["ab", "--base", "HEAD", "--min-effect", "0.05"], "unrecognized arguments: --min-effect"),
    "ab-over-settings": (["ab", "--base", "HEAD", "--json", "pyproject.toml"], "--json pyproject.toml: is a tracked file or folder of the repository"),
    "host-proc": (["host", "--json", "/proc/x.json"], "--json /proc/x.json: cannot write in /proc"),
    "host-over-check": (["host", "--json", "{good}", "--check", "{good}"], "--json {good} is the input --check {good}"),
    "isa-proc": (["isa", "--target", "gfx950", "--json", "/proc/x.json"], "--json /proc/x.json: cannot write in /proc"),
    "isa-over-check": (["isa", "--target", "gfx950", "--json", "{good}", "--check", "{good}"], "is the input --check"),
    "isa-jobs": (["isa", "--target", "gfx950", "--jobs", "0"], "argument --jobs: must be an int in [1, 256], got 0"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_every_command_answers_bad_input_with_one_line_and_exit_2(files, case):
    argv, expected = CASES[case]
    if not PROC and any("/proc" in a for a in argv):
        pytest.skip("no /proc on this system")
    fill = {**{k: str(v) for k, v in files.items()}, "d": str(files["good"].parent)}
    argv = [a.format(**fill) for a in argv]
    before = {p: p.read_bytes() for p in files.values() if p.is_file()}
    done = perfgate(*argv)
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"perfgate {argv[0]}: error: "), done.stderr
    assert expected.format(**fill) in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in before} == before  # no input was touched


def test_an_error_nothing_foresaw_is_one_line_exit_2_not_a_traceback(monkeypatch, capsys):
    from perfgate.commands import compare

    def broken(args):
        raise AttributeError("'list' object has no attribute 'get'")

    parser_run = compare._run
    monkeypatch.setattr(compare, "_run", broken)
    try:
        assert main(["compare", "b.json", "c.json"]) == 2
    finally:
        monkeypatch.setattr(compare, "_run", parser_run)
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        "perfgate compare: error: AttributeError: 'list' object has no attribute 'get' "
    )
    assert "PERFGATE_TRACEBACK=1" in err
    monkeypatch.setenv("PERFGATE_TRACEBACK", "1")  # the detail is opt-in; the exit code is not
    try:
        raise ValueError("boom")
    except ValueError as exc:
        assert unexpected("perfgate x", exc) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfgate x: error: ValueError: boom ") and "Traceback" in err


@pytest.mark.parametrize(
    ("requires", "how"),
    [
        (['ruptures==1.1.10; extra == "history"', 'numpy>=1.26; extra == "perf"'],
         "perfgate's 'history' extra: pip install -e '.[history]'"),
        (None, "pip install ruptures"),  # the checkout is not installed: no metadata to ask
    ],
    ids=["installed-checkout", "not-installed"],
)  # fmt: skip
def test_a_missing_optional_module_names_what_installs_it(monkeypatch, capsys, requires, how):
    import importlib.metadata

    from perfgate import __main__ as cli
    from perfgate.commands import compare

    def needs_ruptures(args):
        raise ModuleNotFoundError("No module named 'ruptures'", name="ruptures")

    def metadata(name):
        assert name == cli.DISTRIBUTION
        if requires is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return requires

    monkeypatch.setattr(importlib.metadata, "requires", metadata)
    monkeypatch.setattr(compare, "_run", needs_ruptures)
    assert main(["compare", "b.json", "c.json"]) == 2
    assert capsys.readouterr().err == (
        "perfgate compare: error: needs the Python module 'ruptures', which is not installed "
        f"({how})\n"
    )


def test_the_distribution_named_is_the_projects():
    from perfgate import __main__ as cli
    from perfgate.checkout import tomllib  # tomli on Python 3.10
    from perfgate.gate.paths import REPO

    with open(REPO / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["name"] == cli.DISTRIBUTION


def test_a_missing_module_of_this_checkout_is_an_unexpected_error(monkeypatch, capsys):
    from perfgate.commands import compare

    def broken(args):
        raise ModuleNotFoundError("No module named 'kernels.nope'", name="kernels.nope")

    monkeypatch.setattr(compare, "_run", broken)
    assert main(["compare", "b.json", "c.json"]) == 2
    assert "(an input perfgate did not expect" in capsys.readouterr().err


def test_an_interrupted_command_is_not_a_regression(monkeypatch, capsys):
    from perfgate.commands import compare

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(compare, "_run", interrupted)
    assert main(["compare", "b.json", "c.json"]) == 130
    assert capsys.readouterr().err == "perfgate compare: interrupted\n"


# --- help written for the user ------------------------------------------------------------------


def _help(*argv: str) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([*argv, "--help"])
    assert info.value.code == 0


def _commands() -> dict[str, argparse.ArgumentParser]:
    return build_parser().commands


def test_the_top_line_of_help_says_what_perfgate_is(capsys):
    _help()
    lines = capsys.readouterr().out.splitlines()
    top = lines[lines.index("") + 1]
    assert top.startswith("perfgate: ") and "regression gates" in top
    assert "module" not in top


_MARKUP = re.compile(r"``|`|:(mod|func|class|data|meth|attr):|\*\*")


@pytest.mark.parametrize("command", list(_commands()))
def test_help_holds_no_markup(capsys, command):
    _help(command)
    text = capsys.readouterr().out
    assert not _MARKUP.search(text), _MARKUP.search(text).group(0)


def test_the_command_list_holds_no_markup(capsys):
    _help()
    assert not _MARKUP.search(capsys.readouterr().out)


def test_plain_text_removes_each_kind_of_markup():
    assert plain_text(":mod:`perfgate.measure.worker` and ``x = 1`` and **bold** and `y`") == (
        "perfgate.measure.worker and x = 1 and bold and y"
    )


@pytest.mark.parametrize("command", list(_commands()))
def test_every_option_has_help(command):
    parser = _commands()[command]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help.strip(), (command, action.option_strings or action.dest)


@pytest.mark.parametrize("command", ["bench", "update-baselines"])
def test_mode_help_lists_every_mode(capsys, command):
    _help(command)
    text = " ".join(capsys.readouterr().out.split())
    mode_help = text[text.index("--mode {") :]
    for mode in modes.MODES:
        assert f"{mode.name}: {mode.description}" in mode_help
    assert "host" in modes.MODE_NAMES


HEAVY = ("torch", "triton", "matplotlib", "ruptures", "psycopg")


def _history_subcommands() -> list[str]:
    history = build_parser().commands["history"]
    (sub,) = [a for a in history._actions if isinstance(a, argparse._SubParsersAction)]
    return [f"history {name}" for name in sorted(sub.choices)]


@pytest.mark.parametrize("command", ["", *sorted(build_parser().commands), *_history_subcommands()])
def test_help_loads_no_heavy_library(command):
    # --help answers at once, also where torch is absent (the container launcher's host) or
    # slow to import (4 s on the H200): the commands import their heavy libraries when they run
    assert heavy_after_help("perfgate.__main__", command) == "[]", command


def heavy_after_help(cli: str, command: str) -> str:
    """The heavy libraries (:data:`HEAVY`) loaded once ``cli``'s ``main`` answered
    ``COMMAND --help``, in a fresh interpreter, as a printed list (also python -m lab's)."""
    probe = (
        "import sys\n"
        f"from {cli} import main\n"
        "try:\n"
        f"    main({[*command.split(), '--help']!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], check=True)  # fmt: skip
    return done.stdout.splitlines()[-1]


def test_the_ab_path_takes_its_modes_from_modes_py():
    # one class and one entry in perfgate/modes.py add a mode everywhere: no file of the A/B
    # path names the modes by hand, and every --mode of it offers exactly the A/B modes
    import ast

    from perfgate import modes
    from perfgate.gate import settings
    from perfgate.hunt import culprits
    from perfgate.measure import worker as ab_process

    assert (
        settings.AB_MODES == culprits.AB_MODES == modes.AB_MODE_NAMES == ("device", "leaderboard")
    )
    assert modes.WHOLE_CALL_MODE_NAMES == ("leaderboard",)
    (action,) = [a for a in _commands()["ab"]._actions if "--mode" in a.option_strings]
    assert tuple(action.choices) == modes.AB_MODE_NAMES  # the lab's experiment: tests/lab
    with pytest.raises(SystemExit):
        ab_process.main(["--kernels-root", ".", "--mode", "host"])
    names = set(modes.MODE_NAMES)
    for path in (ROOT / "perfgate").rglob("*.py"):
        if path.name == "modes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple) and len(node.elts) > 1:
                words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                assert not (len(words) == len(node.elts) and words <= names), (
                    f"{path.relative_to(ROOT)}:{node.lineno} names timing modes by hand: "
                    "read them from perfgate.modes"
                )
