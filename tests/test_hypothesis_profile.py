"""The hypothesis profiles (tests/conftest.py): ``ci`` reports a failing property test at once,
with its failing example, instead of shrinking through the Triton interpreter for minutes; it
is derandomized, and seeded from the code under test (tests/seeds.py); ``thorough`` loads from
the command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from tests import seeds

REPO = Path(__file__).resolve().parents[1]


def test_ci_profile_has_no_shrink_phase():
    assert Phase.shrink not in settings.get_profile("ci").phases
    assert Phase.generate in settings.get_profile("ci").phases  # it still searches


def test_ci_profile_reports_the_first_failure_with_its_example():
    calls_after_failure: list[list[int]] = []
    failures: list[list[int]] = []

    @settings(settings.get_profile("ci"))
    @given(st.lists(st.integers(0, 10**6), min_size=1))
    def prop(xs):
        if failures:
            calls_after_failure.append(xs)
        if sum(xs) > 1000:
            failures.append(xs)
            raise AssertionError("sum too big")

    with pytest.raises(AssertionError, match="sum too big") as info:
        prop()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    # the example is in the report, with its value ("Falsifying example" before hypothesis
    # 6.16x, "Failing test case" after)
    assert re.search(r"(Falsifying example|Failing test case): prop\(\s*xs=\[\d+", notes), notes
    assert "@reproduce_failure" in notes  # and the blob that replays it
    # One replay of the failing example at most; shrinking would call it hundreds of times.
    assert len(calls_after_failure) <= 1


def test_ci_profile_is_derandomized_and_small():
    ci = settings.get_profile("ci")
    # reproducible: no database, no random seed; 25 examples, each a Triton interpreter run
    assert ci.derandomize and ci.database is None and ci.max_examples == 25
    thorough = settings.get_profile("thorough")
    assert not thorough.derandomize and thorough.max_examples >= 1000


def test_the_code_digest_follows_the_sources_only(tmp_path):
    for name in ("kernels/a.py", "kernels/reducer/r.cu", "perfgate/b.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    first = seeds.code_digest(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert seeds.code_digest(tmp_path) == first  # the same tree, the same digest
    (tmp_path / "kernels/reducer/r.so").write_bytes(b"build output")
    (tmp_path / "kernels/__pycache__").mkdir()
    (tmp_path / "kernels/__pycache__/a.py").write_text("cache")
    (tmp_path / "tests/__pycache__").mkdir(parents=True)
    (tmp_path / "tests/__pycache__/t.py").write_text("cache")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/d.py").write_text("not a source the tests run")
    assert seeds.code_digest(tmp_path) == first  # builds, caches, other folders: not sources
    (tmp_path / "tests/t.py").write_text("a strategy")
    assert seeds.code_digest(tmp_path) != first  # a test or strategy changed: new examples
    (tmp_path / "tests/t.py").unlink()
    assert seeds.code_digest(tmp_path) == first
    for name in ("kernels/reducer/r.cu", "perfgate/b.py"):
        (tmp_path / name).write_text("x = 2\n")
        assert seeds.code_digest(tmp_path) != first, name
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "kernels/a.py").rename(tmp_path / "kernels/c.py")  # a path is part of it
    assert seeds.code_digest(tmp_path) != first


def test_the_digest_can_be_pinned(monkeypatch, tmp_path):
    monkeypatch.setenv(seeds.DIGEST_ENV, "00ff00ff00ff00ff")
    assert seeds.run_digest(tmp_path) == "00ff00ff00ff00ff"
    monkeypatch.delenv(seeds.DIGEST_ENV)
    assert seeds.run_digest(REPO) == seeds.code_digest(REPO)


def test_seeded_property_tests_replay_per_digest():
    # What the ci profile does to a collected property test: the same digest draws the same
    # examples, another digest (a change to the code under test) other ones.
    drawn: list[int] = []

    @settings(settings.get_profile("ci"), max_examples=10)
    @given(st.integers(0, 2**60))
    def prop(x):
        drawn.append(x)

    item = SimpleNamespace(obj=prop, nodeid="tests/test_x.py::prop[param]")
    plain = SimpleNamespace(obj=lambda: None, nodeid="tests/test_x.py::plain")

    def run(digest: str) -> list[int]:
        assert seeds.seed_property_tests([item, plain], digest) == 1
        drawn.clear()
        prop()
        return list(drawn)

    first = run("aaaaaaaaaaaaaaaa")
    assert len(first) == 10
    assert run("aaaaaaaaaaaaaaaa") == first
    assert run("bbbbbbbbbbbbbbbb") != first
    assert seeds.seed_for("a", "t::x") != seeds.seed_for("a", "t::y")


def test_thorough_profile_loads_from_the_command_line():
    # The nightly job's flag, under CI as the job runs: the profile must be registered where
    # pytest reads the option, and stay random although hypothesis derandomizes under CI.
    env = {**os.environ, "CI": "true"}
    env.pop(seeds.DIGEST_ENV, None)
    run = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co",
            "--hypothesis-profile", "thorough",
            "tests/test_hypothesis_profile.py::test_ci_profile_has_no_shrink_phase",
        ],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "hypothesis: profile 'thorough' (max_examples=1000, derandomize=False)" in run.stdout


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        # hypothesis' own check ends in an INTERNALERROR traceback, exit 3
        (["--hypothesis-profile", "bogus"], {},
         "ERROR: --hypothesis-profile must be one of ci, dev, thorough, got 'bogus'"),
        ([], {"PERFGATE_REQUIRE_GPU": "maybe"},
         "ERROR: PERFGATE_REQUIRE_GPU must be one of 1, true, yes, on (on) or 0, false, no, off "
         "or empty (off), got 'maybe'"),
    ],
)  # fmt: skip
def test_unusable_options_are_pytests_usage_error(args, env, line):
    # exit 4, which `nox -s test` turns into its exit 2 (noxfile.CHILD_USAGE)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", *args,
         "tests/test_hypothesis_profile.py::test_ci_profile_has_no_shrink_phase"],
        cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 4, run.stdout + run.stderr
    assert [ln for ln in run.stderr.splitlines() if ln.strip()] == [line]
