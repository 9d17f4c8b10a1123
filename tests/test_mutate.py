"""tools.mutate on a two-file git repository: kills, survivors, invalid mutants, the baseline
check, and that the repository's working tree is never touched."""

from __future__ import annotations

import json
import subprocess

import pytest

from tools import mutate

CALC = "def add(a, b):\n    return a + b\n\n\ndef unused():\n    return 1\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "test_calc.py").write_text(TEST)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    return root


def _mutants(tmp_path, entries) -> list[mutate.Mutant]:
    path = tmp_path / "mutants.json"
    path.write_text(json.dumps(entries))
    return mutate.load_mutants(path)


def _measure(repo, mutants, tmp_path, monkeypatch):
    monkeypatch.setattr(mutate, "ROOT", repo)
    work = tmp_path / "work"
    work.mkdir()
    original = mutate.export_tree
    monkeypatch.setattr(mutate, "export_tree", lambda ref, dest: original(ref, dest, repo))
    return mutate.measure(mutants, "HEAD", jobs=2, timeout_s=60, workdir=work)


def test_killed_survived_and_invalid(repo, tmp_path, monkeypatch):
    (repo / "calc.py").write_text("a dirty working tree that must be neither used nor changed")
    mutants = _mutants(
        tmp_path,
        [
            {"name": "minus", "file": "calc.py", "old": "a + b", "new": "a - b"},
            {"name": "dead-code", "file": "calc.py", "old": "return 1", "new": "return 2"},
            {"name": "absent", "file": "calc.py", "old": "a * b", "new": "b"},
            {"name": "no-tests", "file": "calc.py", "old": "a + b", "new": "a - b",
             "tests": ["-k", "nothing_matches"]},
        ],
    )  # fmt: skip
    outcomes = _measure(repo, mutants, tmp_path, monkeypatch)
    assert [(o.name, o.status) for o in outcomes] == [
        ("minus", "killed"),
        ("dead-code", "survived"),  # no test reads unused(): a survivor, as it should be
        ("absent", "invalid"),
        ("no-tests", "invalid"),  # pytest collected nothing: not a kill
    ]
    assert "occurs 0 times" in outcomes[2].detail
    assert mutate.summary(outcomes) == "killed 1 of 2 (50.0%); 2 invalid"
    assert (repo / "calc.py").read_text().startswith("a dirty working tree")


def test_red_baseline_measures_nothing(repo, tmp_path, monkeypatch):
    subprocess.run(["git", "-C", str(repo), "rm", "-q", "calc.py"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
        check=True,
    )
    mutants = _mutants(tmp_path, [{"name": "m", "file": "test_calc.py", "old": "5", "new": "6"}])
    with pytest.raises(mutate.MutantError, match="unmutated tree fails the whole CPU suite"):
        _measure(repo, mutants, tmp_path, monkeypatch)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "non-empty JSON list"),
        ('[{"name": "a", "file": "f", "old": "x"}]', "'new' must be a non-empty string"),
        ('[{"name": "a", "file": "f", "old": "", "new": "y"}]', "'old' must be a non-empty"),
        ('[{"name": "a", "file": "f", "old": "x", "new": "x"}]', "the same text"),
        ('[{"name": "a", "file": "f", "old": "x", "new": "y", "tests": "t.py"}]', "'tests'"),
        (
            '[{"name": "a", "file": "f", "old": "x", "new": "y"},'
            ' {"name": "a", "file": "f", "old": "z", "new": "y"}]',
            "used twice",
        ),
        ("{not json", "not a JSON file"),
    ],
)
def test_bad_mutant_files_are_named(tmp_path, content, message):
    path = tmp_path / "mutants.json"
    path.write_text(content)
    with pytest.raises(mutate.MutantError, match=message):
        mutate.load_mutants(path)


def test_cli_exit_2_on_unusable_input(tmp_path, capsys):
    assert mutate.main([str(tmp_path / "absent.json")]) == 2
    assert capsys.readouterr().err.startswith("mutate: error: ")
