"""Replay: every offline perfgate command gives byte for byte the outputs recorded before.

Each case runs ``python -m perfgate ...`` (one or more steps; in this process, see ``run_step``) in a fresh working
directory holding a copy of the committed inputs (``data/replay/inputs`` as ``in/``), and its
exit codes, stdout, stderr and every file it writes must equal the golden files under
``data/replay/golden/<case>/``, byte for byte. The test speaks only through the command line, so
it holds across a restructure of perfgate's modules (issue 21): record the golden files with the
old code (``tools/replay_golden.py``), replay them with the new. The test never writes them.

Normalisation, the same when recording and replaying (``normalise``): the working directory
becomes ``<WORK>``, the repository root ``<REPO>`` and the interpreter ``<PYTHON>``, in outputs
and written files alike. Arguments are relative to the working directory, so reports name
``in/base.json``, not a temporary path. Each step gets a fixed environment: no
COLUMNS/LINES/FORCE_COLOR/NO_COLOR/TERM (rich and argparse read them), no PERFGATE_* variable,
PYTHONHASHSEED=0, TRITON_INTERPRET=1 unless a case says otherwise. The history store
(``*.sqlite``) is not compared: it records when each run was added; its rows are compared through
``history list --json``. The inputs must come back unchanged (no output over an input).

The golden outputs hold for the environment they were recorded in (golden/ENV.json: Python,
numpy, scipy, rich, argparse's messages and the bootstrap's numbers depend on them); elsewhere the
test skips, naming both. They also depend on ``[tool.perfgate]`` of pyproject.toml: a deliberate
change of a setting or an output means re-recording (``tools/replay_golden.py --force``).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.metadata
import importlib.util
import io
import json
import os
import shutil
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REPLAY = Path(__file__).resolve().parent / "data" / "replay"
INPUTS = REPLAY / "inputs"
GOLDEN = REPLAY / "golden"
NOT_COMPARED = (".sqlite", ".sqlite-journal", ".sqlite-wal", ".sqlite-shm")
_ENV_DROPPED = ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TERM", "TTY_COMPATIBLE",
                "TTY_INTERACTIVE", "CLICOLOR", "CLICOLOR_FORCE", "PYTHONWARNINGS")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    steps: tuple[tuple[str, ...], ...]  # each: the arguments after ``python -m perfgate``
    env: tuple[tuple[str, str | None], ...] = ()  # None removes the variable


def one(case_id: str, *argv: str, env: tuple = ()) -> Case:
    return Case(case_id, (argv,), env)


FAST = ("--n-resamples", "2000")  # clear-cut verdicts; the default 5000 only costs time
NO_INTERPRETER = (("TRITON_INTERPRET", None),)  # perfgate isa refuses to run under it
REPORTS = ("--json", "out/report.json", "--markdown", "out/report.md")
HISTORY_RUNS = tuple(f"in/run{i}.json" for i in range(8))
DB = ("--db", "store.sqlite")

CASES = (
    # -- compare: verdicts and exit codes
    one("compare-every-verdict", "compare", "in/base.json", "in/current.json", *REPORTS, *FAST),
    one("compare-file-with-itself", "compare", "in/base.json", "in/base.json", *FAST),
    one(
        "compare-improvement-passes",
        "compare",
        "in/base.json",
        "in/current_better.json",
        "--json",
        "out/report.json",
        *FAST,
    ),
    one("compare-missing-fails", "compare", "in/base.json", "in/current_missing.json", *FAST),
    one(
        "compare-allow-missing",
        "compare",
        "in/base.json",
        "in/current_missing.json",
        "--allow-missing",
        "--json",
        "out/report.json",
        *FAST,
    ),
    one(
        "compare-inconclusive-fails",
        "compare",
        "in/base.json",
        "in/current_inconclusive.json",
        "--markdown",
        "out/report.md",
        *FAST,
    ),
    one(
        "compare-inconclusive-exit-0",
        "compare",
        "in/base.json",
        "in/current_inconclusive.json",
        "--inconclusive-exit",
        "0",
        *FAST,
    ),
    one(
        "compare-fingerprint-warnings",
        "compare",
        "in/base.json",
        "in/current_driver.json",
        *REPORTS,
        *FAST,
    ),
    one(
        "compare-pooled-baseline",
        "compare",
        "in/pooled_base.json",
        "in/pooled_current.json",
        *REPORTS,
        *FAST,
    ),
    one(
        "compare-settings-overridden",
        "compare",
        "in/base.json",
        "in/current.json",
        "--alpha",
        "0.05",
        "--min-effect",
        "0.08",
        "--seed",
        "3",
        "--json",
        "out/report.json",
        *FAST,
    ),
    # -- compare: refusals (exit 2, one line)
    one("compare-device-key-mismatch", "compare", "in/base.json", "in/current_other_key.json"),
    one("compare-compute-units-mismatch", "compare", "in/base.json", "in/current_other_cus.json"),
    one("compare-mode-mismatch", "compare", "in/base.json", "in/current_leaderboard.json"),
    one("compare-too-few-rounds", "compare", "in/base.json", "in/current_short.json"),
    one("compare-malformed-file", "compare", "in/malformed.json", "in/base.json"),
    one("compare-no-perfgate-block", "compare", "in/base.json", "in/no_perfgate.json"),
    one("compare-missing-file", "compare", "in/base.json", "in/nothere.json"),
    one("compare-directory", "compare", "in", "in/base.json"),
    one(
        "compare-report-over-input",
        "compare",
        "in/base.json",
        "in/current.json",
        "--json",
        "in/base.json",
    ),
    one("compare-bad-alpha", "compare", "in/base.json", "in/current.json", "--alpha", "0.7"),
    one(
        "compare-bad-resamples", "compare", "in/base.json", "in/current.json", "--n-resamples", "5"
    ),
    # -- host: the refusals before any counting (its compare needs the live counts)
    one("host-check-missing", "host", "--check", "in/nothere.json"),
    one("host-check-malformed", "host", "--check", "in/host_counts_bad.json"),
    one("host-check-results-file", "host", "--check", "in/base.json"),
    one("host-update-and-gate", "host", "--update", "--gate"),
    one("host-json-over-check", "host", "--check", "in/base.json", "--json", "in/base.json"),
    # -- isa: the refusals before any compiling (its compare needs a fresh compile)
    one("isa-under-interpreter", "isa", "--target", "gfx950", "--check", "in/isa_sm90.json"),
    one(
        "isa-check-missing",
        "isa",
        "--target",
        "gfx950",
        "--check",
        "in/nothere.json",
        env=NO_INTERPRETER,
    ),
    one(
        "isa-check-malformed",
        "isa",
        "--target",
        "gfx950",
        "--check",
        "in/isa_bad.json",
        env=NO_INTERPRETER,
    ),
    one(
        "isa-check-other-target",
        "isa",
        "--target",
        "gfx950",
        "--check",
        "in/isa_sm90.json",
        env=NO_INTERPRETER,
    ),
    one(
        "isa-json-over-check",
        "isa",
        "--target",
        "sm90",
        "--check",
        "in/isa_sm90.json",
        "--json",
        "in/isa_sm90.json",
        env=NO_INTERPRETER,
    ),
    one(
        "isa-bad-tolerance",
        "isa",
        "--target",
        "sm90",
        "--isa-vgpr-tolerance-abs",
        "-1",
        env=NO_INTERPRETER,
    ),
    # -- history: a store built, listed and searched for change points
    Case(
        "history-add-list-detect",
        (
            ("history", "add", *DB, "--branch", "main", *HISTORY_RUNS),
            ("history", "add", *DB, "--branch", "main", "in/run0.json"),
            ("history", "list", *DB, "--json", "out/list.json"),
            ("history", "list", *DB, "-k", "reducer", "--device", "nvidia-h200"),
            ("history", "detect", *DB, "--json", "out/detect.json"),
            ("history", "detect", *DB, "--last", "2", "--json", "out/detect_last2.json"),
            ("history", "detect", *DB, "--min-effect", "0.2"),
            ("history", "list", *DB, "-k", "no-such-benchmark"),
            ("history", "list", *DB, "--mode", "bogus"),
            ("history", "add", *DB, "in/run_dirty.json"),
            ("history", "list", *DB, "--json", "store.sqlite"),
        ),
    ),
    one("history-no-store", "history", "list", "--db", "nothere.sqlite"),
    one("history-add-malformed", "history", "add", *DB, "in/malformed.json"),
    # -- submission: refusals (a real export and test depend on kernels/, not on perfgate)
    one("submission-test-missing", "submission", "test", "in/nothere.py"),
    one("submission-test-no-kernel", "submission", "test", "in/no_kernel.py"),
    one("submission-test-not-python", "submission", "test", "in/not_python.txt"),
    one(
        "submission-export-bad-target",
        "submission",
        "export",
        "--out",
        "out/s.py",
        "--target",
        "bogus",
    ),
    # -- usage errors: one line on stderr, exit 2
    one("usage-no-command"),
    one("usage-unknown-command", "frobnicate"),
    one("usage-compare-no-files", "compare"),
    one("usage-compare-unknown-option", "compare", "in/base.json", "in/base.json", "--bogus"),
    one("usage-bench-bad-mode", "bench", "--mode", "bogus"),
    one("usage-update-baselines-bad-runs", "update-baselines", "--runs", "0"),
    one("usage-ab-no-base", "ab"),
    one("usage-host-unknown-option", "host", "--bogus"),
    one("usage-isa-no-target", "isa"),
    one("usage-isa-bad-target", "isa", "--target", "mi300"),
    one("usage-container-unknown-option", "container", "--bogus"),
    one("usage-history-no-subcommand", "history"),
    one("usage-history-detect-bad-last", "history", "detect", "--last", "0"),
    one("usage-bisect-no-revisions", "bisect"),
    one("usage-submission-no-subcommand", "submission"),
    one("usage-submission-export-no-out", "submission", "export"),
)


# -- running and recording -----------------------------------------------------------------------
def _env(case: Case) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROPPED}
    env = {k: v for k, v in env.items() if not k.startswith("PERFGATE_")}
    env.update(PYTHONPATH=str(REPO), PYTHONHASHSEED="0", TRITON_INTERPRET="1")
    for key, value in case.env:
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def normalise(data: bytes, work: Path) -> bytes:
    # each place as given and as resolved (a /tmp behind a link, a mounted checkout), longest
    # first so that a path inside another is replaced whole
    places = {}
    for path, name in ((work, "<WORK>"), (REPO, "<REPO>"), (Path(sys.executable), "<PYTHON>")):
        places.setdefault(str(path), name)
        places.setdefault(str(Path(path).resolve()), name)
    for text in sorted(places, key=len, reverse=True):
        data = data.replace(text.encode(), places[text].encode())
    return data


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def run_step(argv: tuple[str, ...], env: dict[str, str], work: Path) -> dict:
    """``python -m perfgate *argv`` run in this process (one import of torch and numpy for every
    case, not one per case): ``perfgate.__main__.main`` with the environment, working directory,
    ``sys.argv`` and standard streams a subprocess would have. Python warnings are ignored: their
    text names perfgate's source lines, which a restructure moves."""
    import perfgate
    from perfgate.__main__ import main

    assert Path(perfgate.__file__).is_relative_to(REPO), f"{perfgate.__file__}: another checkout's"
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(work)
        sys.argv = ["-m", *argv]  # what `python -m perfgate` leaves after argv[0]
        with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                rc = main(list(argv))
            except SystemExit as exc:  # argparse's usage errors
                rc = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    return {
        "rc": rc,
        "stdout": normalise(out.getvalue().encode(), work),
        "stderr": normalise(err.getvalue().encode(), work),
    }


def run_case(case: Case, tmp: Path) -> dict:
    """Run ``case`` in ``tmp/work``: {"steps": [{rc, stdout, stderr}], "files": {path: bytes}}."""
    work = tmp / "work"
    shutil.copytree(INPUTS, work / "in")
    env = _env(case)
    steps = [run_step(argv, env, work) for argv in case.steps]
    assert _tree(work / "in") == _tree(INPUTS), f"{case.id}: an input was changed"
    shutil.rmtree(work / "in")
    files = {
        name: normalise(data, work)
        for name, data in _tree(work).items()
        if not name.endswith(NOT_COMPARED)
    }
    return {"steps": steps, "files": files}


def write_outcome(outcome: dict, target: Path) -> None:
    target.mkdir(parents=True)
    for n, step in enumerate(outcome["steps"], 1):
        (target / f"{n}.rc").write_text(f"{step['rc']}\n")
        (target / f"{n}.stdout").write_bytes(step["stdout"])
        (target / f"{n}.stderr").write_bytes(step["stderr"])
    for name, data in outcome["files"].items():
        path = target / "files" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def read_outcome(source: Path) -> dict:
    steps = []
    for n in range(1, len(list(source.glob("*.rc"))) + 1):
        steps.append(
            {
                "rc": int((source / f"{n}.rc").read_text()),
                "stdout": (source / f"{n}.stdout").read_bytes(),
                "stderr": (source / f"{n}.stderr").read_bytes(),
            }
        )
    files = _tree(source / "files") if (source / "files").is_dir() else {}
    return {"steps": steps, "files": files}


def environment() -> dict[str, str]:
    """What the golden outputs depend on beyond perfgate's code."""
    env = {"python": f"{sys.version_info.major}.{sys.version_info.minor}"}
    for package in ("numpy", "scipy", "rich"):
        env[package] = importlib.metadata.version(package)
    return env


# -- the test --------------------------------------------------------------------------------------
def _diff(what: str, want: bytes, got: bytes) -> str:
    lines = difflib.unified_diff(
        want.decode(errors="replace").splitlines(),
        got.decode(errors="replace").splitlines(),
        "golden",
        "now",
        lineterm="",
    )
    return f"{what} differs:\n" + "\n".join(list(lines)[:40])


def test_every_case_has_golden_files_and_no_golden_lacks_a_case():
    recorded = {p.name for p in GOLDEN.iterdir() if p.is_dir()}
    assert recorded == {c.id for c in CASES}
    assert len({c.id for c in CASES}) == len(CASES)


# cases that run an optional extra's library: history detect needs ruptures
_NEEDS = {"history-add-list-detect": ("ruptures",)}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_replay(case, tmp_path):
    recorded = json.loads((GOLDEN / "ENV.json").read_text())
    if recorded != environment():
        pytest.skip(f"golden outputs recorded under {recorded}, this is {environment()}: "
                    "re-record them with the reference code to replay here")  # fmt: skip
    needs = [m for m in _NEEDS.get(case.id, ()) if importlib.util.find_spec(m) is None]
    if needs:
        pytest.skip(f"{case.id} needs {', '.join(needs)} (the history extra), not installed here")
    want = read_outcome(GOLDEN / case.id)
    got = run_case(case, tmp_path)
    assert len(got["steps"]) == len(want["steps"])
    problems = []
    for n, (w, g) in enumerate(zip(want["steps"], got["steps"], strict=True), 1):
        argv = " ".join(case.steps[n - 1])
        if w["rc"] != g["rc"]:
            problems.append(f"step {n} ({argv}): exit {g['rc']}, golden {w['rc']}")
        for stream in ("stdout", "stderr"):
            if w[stream] != g[stream]:
                problems.append(_diff(f"step {n} ({argv}) {stream}", w[stream], g[stream]))
    if set(want["files"]) != set(got["files"]):
        problems.append(f"files written: {sorted(got['files'])}, golden {sorted(want['files'])}")
    for name in sorted(set(want["files"]) & set(got["files"])):
        if want["files"][name] != got["files"][name]:
            problems.append(_diff(f"file {name}", want["files"][name], got["files"][name]))
    assert not problems, "\n".join(problems)
