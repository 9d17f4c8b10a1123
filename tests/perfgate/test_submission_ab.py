"""``ab --base-submission A.py --head-submission B.py`` on a CPU: the options' refusals (exit 2, one
line), the reducer cases left out, the worker protocol with ``--submission`` (a real worker
process on a fake file: it loads the file, says what it times, keeps the file's prints off the
protocol, dies cleanly), the sides wired into the A/B loop, and the report naming both files."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import torch

from perfgate import catalog
from perfgate.__main__ import main
from perfgate.commands import ab as ab_command
from perfgate.gate.stats import REGRESSION, UNCHANGED
from perfgate.measure import ab as ab_measure
from perfgate.measure import interleave, submission_side
from perfgate.measure import worker as sampler
from perfgate.revisions import AbError
from perfgate.submission import sides
from tests.perfgate.test_ab import FakeSide

# A file whose import prints to stdout: the worker must keep that off its protocol channel.
FAKE = "print('hello from the file')\n\ndef custom_kernel(data):\n    return data\n"


def _write(tmp_path: Path, name: str, text: str = FAKE) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- the options --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, message",
    [
        ((), "the following arguments are required: --base (see perfgate ab --help)"),
        (
            ("--base", "HEAD", "--base-submission", "a.py", "--head-submission", "b.py"),
            "--base cannot be combined with --base-submission/--head-submission: an A/B "
            "compares two revisions or two submission files",
        ),
        (
            ("--head", "HEAD", "--base-submission", "a.py", "--head-submission", "b.py"),
            "--head cannot be combined with --base-submission/--head-submission: an A/B "
            "compares two revisions or two submission files",
        ),
        (
            ("--base", "X", "--head", "Y", "--head-submission", "b.py"),
            "--base and --head cannot be combined with --base-submission/--head-submission: an "
            "A/B compares two revisions or two submission files",
        ),
        (
            ("--base-submission", "a.py"),
            "--base-submission and --head-submission go together; --head-submission is missing",
        ),
        (
            ("--head-submission", "b.py"),
            "--base-submission and --head-submission go together; --base-submission is missing",
        ),
    ],
)
def test_option_refusals_are_one_line(capsys, argv, message):
    rc, out, err = _cli(capsys, "ab", *argv)
    assert (rc, out, err) == (2, "", f"perfgate ab: error: {message}\n")


def test_a_file_that_does_not_import_is_exit_2_naming_its_option(tmp_path, capsys):
    good = _write(tmp_path, "a.py")
    bad = _write(tmp_path, "b.py", "import no_such_module_here\n")
    rc, out, err = _cli(capsys, "ab", "--base-submission", str(good), "--head-submission", str(bad))
    assert rc == 2 and out == ""
    assert err == (
        f"perfgate ab: error: --head-submission: {bad}: does not import (ModuleNotFoundError: "
        "No module named 'no_such_module_here')\n"
    )
    rc, out, err = _cli(capsys, "ab", "--base-submission", str(tmp_path / "none.py"),
                        "--head-submission", str(good))  # fmt: skip
    assert rc == 2 and err.startswith("perfgate ab: error: --base-submission: ")


def test_the_reducer_group_alone_is_refused(tmp_path, capsys):
    a, b = _write(tmp_path, "a.py"), _write(tmp_path, "b.py")
    rc, out, err = _cli(capsys, "ab", "--base-submission", str(a), "--head-submission", str(b),
                        "--groups", "reducer")  # fmt: skip
    assert rc == 2 and out == ""
    assert err == (
        "perfgate ab: error: the selection holds no GEMM benchmark: a submission file has no "
        "reducer entry point (--groups leaderboard or grid)\n"
    )


def test_reports_never_overwrite_a_submission(tmp_path, capsys):
    a, b = _write(tmp_path, "a.py"), _write(tmp_path, "b.py")
    rc, _, err = _cli(capsys, "ab", "--base-submission", str(a), "--head-submission", str(b),
                      "--json", str(b))  # fmt: skip
    assert rc == 2 and err.startswith("perfgate ab: error: ") and err.count("\n") == 1
    assert b.read_text() == FAKE


def test_without_a_gpu_the_files_are_checked_and_the_reducer_left_out(
    tmp_path, capsys, monkeypatch
):
    from perfgate.commands import base

    monkeypatch.setattr(base, "gpu_available", lambda: False)  # the no-GPU path, on any machine
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU", raising=False)
    a, b = _write(tmp_path, "a.py"), _write(tmp_path, "b.py")
    rc, out, err = _cli(capsys, "ab", "--base-submission", str(a), "--head-submission", str(b),
                        "--results-dir", str(tmp_path / "r"))  # fmt: skip
    reducers = len(catalog.cases(("reducer",)))
    assert (rc, err) == (0, "")
    assert out.splitlines()[0] == (
        f"perfgate ab: {reducers} reducer benchmark(s) left out: a submission file has no "
        "reducer entry point (only custom_kernel)"
    )
    assert out.splitlines()[1].startswith("perfgate ab: no GPU on this machine (")


def test_gemm_cases_keep_the_gemm_cases_in_order():
    selected = catalog.cases(("leaderboard", "reducer"))
    kept = sides.gemm_cases(selected)
    assert kept == catalog.cases(("leaderboard",))


# -- the worker with --submission ---------------------------------------------------------------
def _worker(*args: str, requests: list[dict]) -> subprocess.CompletedProcess:
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    return subprocess.run(
        [sys.executable, "-m", "perfgate.measure.worker", *args],
        input=lines, capture_output=True, text=True, cwd=interleave.REPO, timeout=300,
    )  # fmt: skip


def test_the_worker_loads_the_file_and_says_what_it_times(tmp_path):
    fake = _write(tmp_path, "fake.py")
    done = _worker("--submission", str(fake), requests=[{"op": "describe"}, {"op": "quit"}])
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    sha = hashlib.sha256(fake.read_bytes()).hexdigest()
    assert answers == [
        {"ok": True, "ready": True},  # unasked, once warmed up (here: no GPU to warm)
        {"ok": True, "source": {"source": "submission", "path": str(fake), "sha256": sha}},
        {"ok": True},
    ]
    assert "hello from the file" in done.stderr  # the file's print, off the protocol


def test_a_worker_whose_file_does_not_load_exits_2_in_one_line(tmp_path):
    done = _worker("--submission", str(tmp_path / "gone.py"), requests=[{"op": "quit"}])
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"perfgate worker: error: --submission: {tmp_path / 'gone.py'}: no such file "
        "(a submission is one .py file)\n"
    )


def test_a_worker_times_a_revision_or_a_file_never_both(tmp_path):
    fake = _write(tmp_path, "fake.py")
    both = _worker("--kernels-root", str(tmp_path), "--submission", str(fake), requests=[])
    neither = _worker(requests=[])
    assert both.returncode == neither.returncode == 2
    assert "not allowed with argument" in both.stderr
    assert "one of the arguments --kernels-root --submission is required" in neither.stderr


def test_describe_never_makes_the_gpu_worker():
    def no_worker():
        raise AssertionError("describe must not build the GPU worker")

    answers = []
    requests = [json.dumps({"op": "describe"}), json.dumps({"op": "quit"})]
    sampler.serve(no_worker, iter(requests), answers.append, {"source": "kernels"})
    assert answers == [{"ok": True, "source": {"source": "kernels"}}, {"ok": True}]


def test_a_submission_side_speaks_the_protocol_and_goes_away(tmp_path):
    fake = _write(tmp_path, "fake.py")
    side = submission_side.SubmissionSide("head", fake)
    try:
        assert side.describe()["path"] == str(fake)
        # on a CPU the first GPU request fails in one line naming the side; the worker lives on
        case = catalog.cases(("leaderboard",))[0]
        with pytest.raises(interleave.WorkerError) as info:
            side.ask({"op": "prepare", "cases": [case]})
        message = str(info.value)
        assert message.startswith(f"head: prepare {case['name']}: ") and "\n" not in message
        # no GPU: the worker refuses the device; on a GPU the fake file's answer (its input, a
        # tuple) fails the output check; either way the side and the case are named in one line
        if torch.cuda.is_available():
            assert message.endswith("AttributeError: 'tuple' object has no attribute 'shape'")
        else:
            assert message == (
                f"head: prepare {case['name']}: ValueError: last_level_cache_bytes must be > 0, "
                "got 0 (the interpreter has no cache to flush; benchmarks need a GPU)"
            )
        assert side.describe()["path"] == str(fake)
    finally:
        side.close()
    assert side.proc.returncode == 0


# -- the sides in the A/B loop and the report ---------------------------------------------------
REAL_SIDE = submission_side.SubmissionSide


class FileSide(FakeSide):
    """A side's worker whose rounds are FakeSide's (a CPU has no device clock); a side's first
    worker, the one asked what it times, is also a real worker process on the file (it loads the
    file and hashes it). Everything between (the looks, the processes a side, the blocks, the
    verdicts, the store) is the real A/B's; only the clock is planted."""

    def __init__(self, label, path, factors, order):
        super().__init__(label, factors, zlib.crc32(label.encode()), order, offset=0.002)
        self.real = REAL_SIDE(label, path) if label in ("base1", "head1") else None

    def ask(self, req):
        answer = super().ask(req)
        if req["op"] == "prepare":
            answer["reducer_backend"] = None  # a file has no reducer of its own
        return answer

    def describe(self):
        return self.real.describe()

    def close(self):
        if self.real is not None:
            self.real.close()
        super().close()


def test_run_submissions_measures_both_files_and_records_what_each_timed(tmp_path, monkeypatch):
    from perfgate.gate import settings

    a, b = _write(tmp_path, "a.py"), _write(tmp_path, "b.py", FAKE + "# 5% slower on 'slow'\n")
    factors = {a: {}, b: {"slow": 1.05}}
    order, started = [], []

    def side(label, path, mode="device"):
        started.append(FileSide(label, path, factors[path], order))
        return started[-1]

    monkeypatch.setattr(ab_measure, "SubmissionSide", side)  # the name perfgate.measure.ab calls
    cases = [{"name": "slow"}, {"name": "same"}]
    decisions, store, infos, _ = ab_measure.run_submissions(a, b, cases, settings.load())
    assert decisions["slow"].result.verdict == REGRESSION  # judged from the rounds, 5% slower
    assert decisions["same"].result.verdict == UNCHANGED
    assert decisions["slow"].result.ratio == pytest.approx(1.05, rel=0.005)
    first = decisions["slow"].processes  # processes a side at the look that decided it
    assert [len(p) for p in store["head"]["slow"]["plain"]] == [decisions["slow"].rounds] * first
    for label, path in (("base", a), ("head", b)):
        timed = infos[label]["timed"]
        assert (timed["path"], timed["sha256"]) == (
            str(path),
            hashlib.sha256(path.read_bytes()).hexdigest(),
        )
        assert infos[label]["reducer_backend"] is None
    assert all(w.closed for w in started)
    assert all(w.real.proc.poll() is not None for w in started if w.real)  # all gone after


def test_a_worker_failure_is_one_line_and_exit_2(tmp_path, monkeypatch):
    from perfgate.gate import settings

    a, b = _write(tmp_path, "a.py"), _write(tmp_path, "b.py")

    def broken(specs, cases, design, start, *, on_prepared=None, timings=None):
        raise interleave.WorkerError("base: worker exited (1); see its stderr")

    monkeypatch.setattr(ab_measure, "measure_ab", broken)
    with pytest.raises(AbError) as info:
        ab_measure.run_submissions(a, b, [], settings.load())
    assert (str(info.value), info.value.code) == ("base: worker exited (1); see its stderr", 2)


def test_the_report_names_both_files(tmp_path, monkeypatch):
    from perfgate.gate import settings
    from perfgate.measure import fingerprint
    from tests.perfgate.test_ab import DESIGN_FOR, SPECS, starter

    gate = settings.load()
    start = starter({"head": {"slow": 1.05}}, [], offset=0.002)
    decisions, store = ab_measure.measure_ab(
        SPECS, [{"name": "slow"}, {"name": "same"}], DESIGN_FOR(gate, "device"), start
    )
    assert decisions["slow"].result.verdict == REGRESSION
    assert decisions["same"].result.verdict == UNCHANGED
    monkeypatch.setattr(fingerprint, "collect", lambda: {"device_key": "nvidia-h200"})
    infos = {
        label: {"reducer_backend": None, "timed": {"path": f"/x/{label}.py", "sha256": c * 64}}
        for label, c in (("base", "a"), ("head", "b"))
    }
    args = argparse.Namespace(results_dir=tmp_path, json_out=None, markdown_out=None,
                              base=None, head=None, mode="device")  # fmt: skip
    labels = sides.labels(infos)
    rc = ab_command.report(args, gate, decisions, store, infos, "sha256:" + "a" * 64,
                           "sha256:" + "b" * 64, labels)  # fmt: skip
    assert rc == 1  # the slower head fails the gate
    markdown = (tmp_path / "ab.md").read_text()
    assert f"base /x/base.py (sha256:{'a' * 12})" in markdown
    assert f"head /x/head.py (sha256:{'b' * 12})" in markdown
    record = json.loads((tmp_path / "ab.samples.json").read_text())
    assert (record["base"], record["head"]) == ("sha256:" + "a" * 64, "sha256:" + "b" * 64)
    assert record["prepare"]["head"]["timed"]["path"] == "/x/head.py"
