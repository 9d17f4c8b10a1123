"""perfgate.git is the one place perfgate runs git: read from the source, every other module
that names git in a command line fails here; and the wrapper itself on a scratch repository."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from perfgate import git, spawn

ROOT = Path(__file__).resolve().parents[2]
THE_WRAPPER = Path("perfgate/git.py")
# the calls that start a process from a command line or a command string
STARTERS = {"run", "popen", "Popen", "call", "check_call", "check_output", "system", "getoutput"}


def _names_git(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value == "git" or node.value.startswith("git "))
    )


def git_command_lines(source: str) -> list[int]:
    """The lines of ``source`` that build or start a git command: a list or tuple that begins
    with "git", or a process started from a string that does."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts and _names_git(node.elts[0]):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and _names_git(node.args[0]):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in STARTERS:
                found.append(node.lineno)
    return sorted(found)


def test_no_perfgate_module_but_perfgate_git_runs_git():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "perfgate").rglob("*.py"))
        if path.relative_to(ROOT) != THE_WRAPPER
        for line in git_command_lines(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
    assert git_command_lines((ROOT / THE_WRAPPER).read_text(encoding="utf-8"))  # it does run git


@pytest.mark.parametrize(
    "source, found",
    [
        ('subprocess.run(["git", "status"])', [1]),
        ('cmd = ("git", "-C", repo, "ls-files")', [1]),
        ('spawn.run(["git", "-c", "safe.directory=*", *args], cwd=repo)', [1]),
        ('os.system("git status")', [1]),
        ('subprocess.check_output("git rev-parse HEAD", shell=True)', [1]),
        ('if shutil.which("git") is None:\n    pass', []),
        ('raise AbError(f"git {args}: failed")', []),
        ('print("git is not on PATH")', []),
        ('git.run("rev-parse", "HEAD", cwd=repo)', []),
    ],
)
def test_the_rule_tells_a_git_command_from_a_mention(source, found):
    assert git_command_lines(source) == found


@pytest.fixture
def repo(tmp_path):
    def plain(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    plain("init", "-q")
    plain("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "é")
    return tmp_path


def test_run_goes_through_spawn_with_every_directory_safe(monkeypatch, repo):
    # inside the ROCm container the mounted checkout belongs to another user
    assert git._start is spawn.run  # a killed command takes its git child with it
    seen = []

    def start(cmd, **kwargs):
        seen.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(git, "_start", start)
    git.run("status", cwd=repo, timeout=5)
    ((cmd, kwargs),) = seen
    assert cmd == ["git", "-c", "safe.directory=*", "status"]
    assert kwargs == {"cwd": repo, "capture_output": True, "encoding": "utf-8", "timeout": 5}


def test_run_returns_git_s_failure_and_read_says_none(repo):
    proc = git.run("rev-parse", "--verify", "--quiet", "nosuchrev", cwd=repo)
    assert proc.returncode != 0
    assert git.read("rev-parse", "--verify", "--quiet", "nosuchrev", cwd=repo) is None


def test_read_gives_git_s_output_as_utf8(repo):
    commit = git.read("rev-parse", "HEAD", cwd=repo)
    assert commit is not None and len(commit.strip()) == 40
    assert git.read("log", "-1", "--format=%s", cwd=repo) == "é\n"


def test_read_is_none_without_git_or_without_the_directory(monkeypatch, repo, tmp_path):
    assert git.read("status", cwd=tmp_path / "absent") is None
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(OSError):
        git.run("status", cwd=repo)
    assert git.read("status", cwd=repo) is None
