"""``lab.scripts.gpumode_harness`` on a CPU: the download path against a local HTTP server and a local git
clone (each file checked against its pin before it is written), the refusals, the staging of a
harness directory, a run of a fake ``eval.py`` of our own (it writes POPCORN lines in the
harness's format and calls the staged stand-in reference on the staged submission), the parsing
of those lines and of a perfgate results file, and the table's arithmetic. The harness's own
eval.py times on a GPU: docs/submission.md has the H200 command."""

from __future__ import annotations

import functools
import hashlib
import http.server
import subprocess
import threading
from pathlib import Path

import pytest

from lab.scripts import gpumode_harness as gh

COMMIT = "c0ffee" * 6 + "c0ff"
FAKE_FILES = {
    "eval.py": ("problems/amd_202602/eval.py", "# a fake eval.py, replaced below\n"),
    "utils.py": ("problems/amd_202602/utils.py", "UTILS = 'fake'\n"),
    "task.py": ("problems/amd_202602/mxfp4-mm/task.py", "TASK = 'fake'\n"),
}


def _pins(files=FAKE_FILES) -> dict[str, tuple[str, str]]:
    return {n: (p, hashlib.sha256(t.encode()).hexdigest()) for n, (p, t) in files.items()}


def test_the_pins_name_the_three_files_of_the_tiers_commit():
    from perfgate.submission.tiers import HARNESS_COMMIT

    assert gh.COMMIT == HARNESS_COMMIT
    assert {n: p for n, (p, _) in gh.FILES.items()} == {
        "eval.py": "problems/amd_202602/eval.py",
        "utils.py": "problems/amd_202602/utils.py",
        "task.py": "problems/amd_202602/mxfp4-mm/task.py",
    }
    assert all(len(sha) == 64 for _, sha in gh.FILES.values())


@pytest.fixture
def server(tmp_path):
    """A local HTTP server serving ``<commit>/<path>`` from a directory; yields (url, root)."""
    root = tmp_path / "served"
    for _, (path, text) in FAKE_FILES.items():
        (root / COMMIT / path).parent.mkdir(parents=True, exist_ok=True)
        (root / COMMIT / path).write_text(text)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_fetch_downloads_and_checks_every_file(server, tmp_path):
    url, _ = server
    dest = gh.fetch(tmp_path / "cache" / COMMIT, base_url=url, commit=COMMIT, pins=_pins())
    assert sorted(p.name for p in dest.iterdir()) == ["eval.py", "task.py", "utils.py"]
    for name, (_, text) in FAKE_FILES.items():
        assert (dest / name).read_text() == text
    assert gh.verify(dest, _pins()) == dest


def test_a_file_that_does_not_match_its_pin_writes_nothing(server, tmp_path):
    url, root = server
    (root / COMMIT / FAKE_FILES["task.py"][0]).write_text("TASK = 'changed'\n")
    dest = tmp_path / "cache" / COMMIT
    with pytest.raises(gh.HarnessError, match=r"^task.py from http://127.0.0.1:\d+/c0ffee.*/"
                       r"problems/amd_202602/mxfp4-mm/task.py has sha256 [0-9a-f]{16}\.\.\., "
                       r"the pin is [0-9a-f]{16}\.\.\. \(commit c0ffeec0ffee\): not used$"):  # fmt: skip
        gh.fetch(dest, base_url=url, commit=COMMIT, pins=_pins())
    assert not dest.exists()  # not even the files that matched


def test_an_unreachable_server_is_one_line(tmp_path):
    with pytest.raises(gh.HarnessError, match=r"^cannot download http://127.0.0.1:9/"):
        gh.fetch(tmp_path / "c", base_url="http://127.0.0.1:9", commit=COMMIT, pins=_pins())


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def test_fetch_from_a_local_clone(tmp_path):
    repo = tmp_path / "clone"
    for _, (path, text) in FAKE_FILES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git("init", "-q", cwd=repo)
    _git("add", ".", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", cwd=repo)
    commit = _git("rev-parse", "HEAD", cwd=repo)
    dest = gh.fetch(tmp_path / "d", from_git=repo / ".git", commit=commit, pins=_pins())
    assert (dest / "utils.py").read_text() == "UTILS = 'fake'\n"
    with pytest.raises(
        gh.HarnessError, match=r"--from-git .*: no 000000000000:problems/amd_202602/eval\.py "
    ):
        gh.fetch(tmp_path / "e", from_git=repo / ".git", commit="0" * 40, pins=_pins())


def test_verify_names_a_missing_or_changed_file(tmp_path):
    with pytest.raises(gh.HarnessError, match=r"eval.py: missing; run `python -m lab\.scripts"):
        gh.verify(tmp_path, _pins())
    for name, (_, text) in FAKE_FILES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "utils.py").write_text("changed\n")
    with pytest.raises(gh.HarnessError, match=r"^utils.py from .*utils.py has sha256"):
        gh.verify(tmp_path, _pins())


def test_run_refuses_a_harness_dir_that_is_not_the_pinned_one(tmp_path, capsys):
    for name, (_, text) in FAKE_FILES.items():
        (tmp_path / name).write_text(text)
    sub = tmp_path / "sub.py"
    sub.write_text("def custom_kernel(data):\n    return data\n")
    rc = gh.main(["run", str(sub), "--harness-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("lab.scripts.gpumode_harness: error: eval.py from ")  # the real pins


def test_run_never_writes_over_the_submission(tmp_path, capsys):
    sub = tmp_path / "sub.py"
    sub.write_text("def custom_kernel(data):\n    return data\n")
    assert gh.main(["run", str(sub), "--markdown", str(sub)]) == 2
    assert "is the input FILE" in capsys.readouterr().err
    assert sub.read_text() == "def custom_kernel(data):\n    return data\n"


# -- one run, with a fake eval.py of our own ------------------------------------------------------
def test_the_tests_file_is_in_the_harnesses_format():
    assert gh.tests_text() == (
        "m: 4; n: 2880; k: 512; seed: 4565\nm: 16; n: 2112; k: 7168; seed: 15\n"
        "m: 32; n: 4096; k: 512; seed: 457\nm: 32; n: 2880; k: 512; seed: 54\n"
        "m: 64; n: 7168; k: 2048; seed: 687\nm: 256; n: 3072; k: 1536; seed: 7856\n"
    )


# Writes eval.py's POPCORN lines for leaderboard mode, from the tests file it is given; before
# that it checks the staging: argv, the submission and the stand-in reference importable beside
# it (whose check runs the suite's reference, through this fake utils, on an input made where
# the real eval.py makes it: on the GPU, or on the CPU for the interpreter).
FAKE_EVAL = """
import os, sys
import torch
from reference import check_implementation
from submission import custom_kernel
from kernels.reference import generate_input

assert sys.argv[1:] == ["leaderboard", "tests.txt"], sys.argv
data = generate_input(4, 64, 128, 1, "cuda" if torch.cuda.is_available() else "cpu")
good, message = check_implementation(data, custom_kernel(data))
out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
specs = open(sys.argv[2]).read().splitlines()
print(f"benchmark-count: {len(specs)}", file=out)
for i, spec in enumerate(specs):
    if not good:
        print(f"benchmark.{i}.status: fail", file=out)
        print(f"benchmark.{i}.error: {message}", file=out)
        break
    for field, value in (("runs", 100), ("mean", 1000.0 * (i + 1)), ("std", 10.0),
                         ("err", 1.0), ("best", 990.0 * (i + 1)), ("worst", 1100.0 * (i + 1))):
        print(f"benchmark.{i}.{field}: {value}", file=out)
    print(f"benchmark.{i}.spec: {spec}", file=out)
print(f"check: {'pass' if good else 'fail'}", file=out)
"""
FAKE_UTILS = """
def make_match_reference(reference, rtol, atol):
    assert (rtol, atol) == (1e-2, 1e-2)
    def check(data, output):
        import torch
        return bool(torch.equal(output.view(torch.int16), reference(data).view(torch.int16))), "bits"
    return check
"""
EXACT = "from kernels.gemm import custom_kernel\n"
OFF_BY_ONE_BIT = """
from kernels.gemm import custom_kernel as _package

def custom_kernel(data):
    out = _package(data)
    out.view(dtype=__import__("torch").int16)[0, 0] ^= 1
    return out
"""


@pytest.fixture
def fake_harness(tmp_path) -> Path:
    d = tmp_path / "fake-harness"
    d.mkdir()
    (d / "eval.py").write_text(FAKE_EVAL)
    (d / "utils.py").write_text(FAKE_UTILS)
    (d / "task.py").write_text("")
    return d


def _staged_run(fake_harness, tmp_path, text):
    sub = tmp_path / "sub.py"
    sub.write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    gh.stage(fake_harness, sub, work)
    assert sorted(p.name for p in work.iterdir()) == [
        "eval.py", "reference.py", "submission.py", "task.py", "tests.txt", "utils.py"
    ]  # fmt: skip
    assert (work / "reference.py").read_text() == gh.STAND_IN.read_text()
    return gh.run_eval(work, timeout_s=300)


def test_a_staged_run_reads_the_harnesses_lines(fake_harness, tmp_path):
    popcorn = _staged_run(fake_harness, tmp_path, EXACT)
    assert popcorn["check"] == "pass"
    evals = gh.benchmarks(popcorn)
    assert [e["spec"] for e in evals] == gh.tests_text().splitlines()
    assert evals[1] == {"spec": "m: 16; n: 2112; k: 7168; seed: 15", "runs": 100.0,
                        "mean": 2000.0, "std": 10.0, "err": 1.0, "best": 1980.0,
                        "worst": 2200.0}  # fmt: skip


def test_a_rejected_file_stops_the_benchmarks(fake_harness, tmp_path):
    popcorn = _staged_run(fake_harness, tmp_path, OFF_BY_ONE_BIT)
    assert popcorn["check"] == "fail"
    assert gh.benchmarks(popcorn) == [{"spec": "", "error": "bits"}]


def test_an_eval_that_writes_no_verdict_is_one_line(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "eval.py").write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(
        gh.HarnessError, match=r"^eval.py leaderboard wrote no verdict \(exit 3\): boom$"
    ):
        gh.run_eval(work)


def test_perfgate_medians_and_the_table(tmp_path, write_result):
    from tests.perfgate.conftest import make_result

    data = make_result({"test_leaderboard[m4-n2880-k512]": [8e-6, 9e-6, 10e-6],
                        "test_leaderboard[m16-n2112-k7168]": [20e-6, 20e-6, 21e-6]},
                       mode="leaderboard")  # fmt: skip
    for bench, shape in zip(data["benchmarks"], ((4, 2880, 512), (16, 2112, 7168)), strict=True):
        bench["extra_info"].update(m=shape[0], n=shape[1], k=shape[2])
    medians = gh.perfgate_medians(write_result("lb.json", data))
    assert medians == {
        (4, 2880, 512): pytest.approx(9000.0),
        (16, 2112, 7168): pytest.approx(20000.0),
    }
    evals = [{"runs": 100, "mean": 9450.0, "std": 1, "err": 9.45, "best": 9000.0, "worst": 1e4},
             {"runs": 3, "mean": 19000.0, "std": 1, "err": 1.0, "best": 18000.0, "worst": 2e4}]  # fmt: skip
    rs = gh.rows(evals, medians, cases=((4, 2880, 512, 4565), (16, 2112, 7168, 15)))
    assert [r["eval_vs_perfgate"] for r in rs] == [pytest.approx(0.05), pytest.approx(-0.05)]
    text = gh.table(rs, "t")
    assert "| m4-n2880-k512 | 9.450 | 100 | 0.10% | 9.000 | 9.000 | +5.0% |" in text
    assert "| m16-n2112-k7168 | 19.000 | 3 | 0.01% | 18.000 | 20.000 | -5.0% |" in text
    # the score: geometric means, sqrt(9.45 * 19) = 13.400 against sqrt(9 * 20) = 13.416
    assert "| score (geometric mean) | 13.400 | | | | 13.416 | -0.1% |" in text


def test_perfgate_is_run_as_a_measurement_never_a_gate(tmp_path):
    cmd = gh.perfgate_command(Path("/x/sub.py"), tmp_path / "r", tmp_path / "b")
    assert cmd[1:] == ["-m", "perfgate", "bench", "--submission", "/x/sub.py", "--mode",
                       "leaderboard", "--allow-missing-baseline", "--results-dir",
                       str(tmp_path / "r"), "--baselines-dir", str(tmp_path / "b")]  # fmt: skip
