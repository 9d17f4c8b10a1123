"""GPU MODE's own harness, unchanged, beside perfgate's leaderboard mode on one submission file.

``python -m lab.scripts.gpumode_harness fetch [--from-git GIT_DIR | --base-url URL] [--cache DIR]``
puts the harness's ``eval.py``, ``utils.py`` and ``task.py`` of gpu-mode/reference-kernels at the
pinned commit (:data:`COMMIT`, ``perfgate.submission.tiers.HARNESS_COMMIT``) into
``DIR/<commit>/`` (default ``.perfgate/cache/gpumode/``, git-ignored), each checked against its
pinned sha256 before it is written: from raw.githubusercontent.com, another ``--base-url``
serving ``<commit>/<path>``, or a local clone (``--from-git``, ``git show <commit>:<path>``).
Their files are never copied into the tracked tree.

``python -m lab.scripts.gpumode_harness run FILE [--harness-dir DIR] [--no-perfgate] [--json OUT]
[--markdown OUT]`` (a GPU): in a temporary directory, their three files (checked again), the
suite's stand-in for their ``reference.py`` (``lab/scripts/gpumode_reference.py``: theirs needs AMD's
aiter), FILE as ``submission.py`` and ``tests.txt`` in their format (``m: 4; n: 2880; k: 512;
seed: 4565`` a line, task.yml's six benchmark cases); then ``python eval.py leaderboard
tests.txt`` in a fresh process with ``POPCORN_FD`` on a file, its ``benchmark.N.*`` lines parsed;
then, in the same call, ``perfgate bench --submission FILE --mode leaderboard`` (no baseline:
only its medians are read). It prints eval.py's mean against perfgate's median per shape and
their ratio, and the scores (geometric means). ``--harness-dir`` names a directory that already
holds the three files (the GPU machine has no network: fetch here, carry the directory).

Exit 0; 1 when eval.py rejects the file (its ``check: fail``) or perfgate's benchmark fails; 2
for unusable input (files missing or not matching their sha256, no GPU, an output over an input).
Not the code under test: a measuring tool.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate import atomic, spawn
from perfgate.submission.load import SubmissionError, check_path
from perfgate.submission.tiers import BENCHMARK_CASES, HARNESS_COMMIT

REPO = Path(__file__).resolve().parents[2]  # lab/scripts/ -> the checkout
COMMIT = HARNESS_COMMIT
RAW = "https://raw.githubusercontent.com/gpu-mode/reference-kernels"
# name in the harness directory -> (path in the repository, sha256 of its bytes at COMMIT)
FILES: dict[str, tuple[str, str]] = {
    "eval.py": (
        "problems/amd_202602/eval.py",
        "601424938e19e26622d84c7811daae47740376c152a21efa735e26b4866eaf55",
    ),
    "utils.py": (
        "problems/amd_202602/utils.py",
        "bce2f41a0ccca472906ac80bd4d12adb2e43ce41a1e5817c2809bbc965a66612",
    ),
    "task.py": (
        "problems/amd_202602/mxfp4-mm/task.py",
        "7aec5ff817bd5a0a966c2d1724f8d1f09f760c3ee8fd2b7c04c6bad394af9795",
    ),
}
DEFAULT_CACHE = REPO / ".perfgate" / "cache" / "gpumode"
STAND_IN = Path(__file__).with_name("gpumode_reference.py")
STATS = ("runs", "mean", "std", "err", "best", "worst")  # eval.py's Stats fields, ns
PROG = "lab.scripts.gpumode_harness"


class HarnessError(Exception):
    """Unusable input: one line."""


# -- the harness's files --------------------------------------------------------------------------
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _checked(
    name: str, data: bytes, source: str, pins: Mapping[str, tuple[str, str]], commit: str = COMMIT
) -> bytes:
    want = pins[name][1]
    if _sha256(data) != want:
        raise HarnessError(
            f"{name} from {source} has sha256 {_sha256(data)[:16]}..., the pin is {want[:16]}... "
            f"(commit {commit[:12]}): not used"
        )
    return data


def _from_url(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except OSError as exc:
        raise HarnessError(f"cannot download {url}: {exc}") from None


def _from_git(git_dir: Path, commit: str, path: str) -> bytes:
    done = spawn.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
                     capture_output=True, timeout=60)  # fmt: skip
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        raise HarnessError(f"--from-git {git_dir}: no {commit[:12]}:{path} ({why[0]})")
    return done.stdout


def fetch(
    dest: Path,
    *,
    base_url: str = RAW,
    from_git: Path | None = None,
    commit: str = COMMIT,
    pins: Mapping[str, tuple[str, str]] = FILES,
) -> Path:
    """The pinned files into ``dest`` (created), each checked before it is written atomically;
    HarnessError naming the first file that cannot be had or does not match its pin."""
    blobs = {}
    for name, (path, _) in pins.items():
        if from_git is not None:
            data, source = _from_git(from_git, commit, path), f"--from-git {from_git}"
        else:
            source = f"{base_url.rstrip('/')}/{commit}/{path}"
            data = _from_url(source)
        blobs[name] = _checked(name, data, source, pins, commit)
    dest.mkdir(parents=True, exist_ok=True)
    for name, data in blobs.items():
        atomic.write_bytes(dest / name, data)
    return dest


def verify(directory: Path, pins: Mapping[str, tuple[str, str]] = FILES) -> Path:
    """``directory`` when it holds every pinned file with its sha256; HarnessError otherwise."""
    for name in pins:
        path = directory / name
        if not path.is_file():
            raise HarnessError(
                f"{path}: missing; run `python -m {PROG} fetch` (or name --harness-dir)"
            )
        _checked(name, path.read_bytes(), str(path), pins)
    return directory


# -- one run of eval.py -----------------------------------------------------------------------------
def tests_text(cases: Sequence[tuple[int, int, int, int]] = BENCHMARK_CASES) -> str:
    """task.yml's cases in eval.py's test-file format, one ``m: 4; n: 2880; k: 512; seed: 4565``
    a line."""
    return "".join(f"m: {m}; n: {n}; k: {k}; seed: {seed}\n" for m, n, k, seed in cases)


def stage(harness: Path, submission: Path, work: Path, cases=BENCHMARK_CASES) -> Path:
    """``work`` laid out as the harness runs: its files, the stand-in reference, the submission
    as submission.py, tests.txt."""
    for name in FILES:
        shutil.copyfile(harness / name, work / name)
    shutil.copyfile(STAND_IN, work / "reference.py")
    shutil.copyfile(submission, work / "submission.py")
    (work / "tests.txt").write_text(tests_text(cases))
    return work


def parse_popcorn(text: str) -> dict[str, str]:
    """eval.py's ``key: value`` lines (POPCORN_FD) as a dict."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def benchmarks(popcorn: Mapping[str, str]) -> list[dict[str, Any]]:
    """Per benchmark: its spec and eval.py's statistics (ns), or its error."""
    out = []
    for i in range(int(popcorn.get("benchmark-count", 0))):
        row: dict[str, Any] = {"spec": popcorn.get(f"benchmark.{i}.spec", "")}
        if popcorn.get(f"benchmark.{i}.status") == "fail":
            row["error"] = popcorn.get(f"benchmark.{i}.error", "")
        elif f"benchmark.{i}.mean" in popcorn:
            row.update({f: float(popcorn[f"benchmark.{i}.{f}"]) for f in STATS})
        else:
            break  # eval.py stops at the first failure: later benchmarks never ran
        out.append(row)
    return out


def run_eval(work: Path, *, mode: str = "leaderboard", timeout_s: float = 900.0) -> dict[str, str]:
    """``python eval.py MODE tests.txt`` in ``work``, the checkout on PYTHONPATH (the stand-in
    imports it), POPCORN_FD on a file; its POPCORN lines. HarnessError when it exits non-zero
    without writing a verdict."""
    out_path = work / "popcorn.txt"
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    env = dict(os.environ, POPCORN_FD=str(fd),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))  # fmt: skip
    try:
        done = spawn.run([sys.executable, "eval.py", mode, "tests.txt"], cwd=work, env=env,
                         pass_fds=(fd,), timeout=timeout_s, capture_output=True, text=True)  # fmt: skip
    finally:
        os.close(fd)
    popcorn = parse_popcorn(out_path.read_text())
    if "check" not in popcorn:
        tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise HarnessError(f"eval.py {mode} wrote no verdict (exit {done.returncode}): {tail[0]}")
    return popcorn


# -- perfgate's side ------------------------------------------------------------------------------
def perfgate_command(submission: Path, results: Path, baselines: Path) -> list[str]:
    """``perfgate bench`` in leaderboard mode on the file, against an empty baselines directory:
    a run whose medians are read, never a gate."""
    return [sys.executable, "-m", "perfgate", "bench", "--submission", str(submission),
            "--mode", "leaderboard", "--allow-missing-baseline", "--results-dir", str(results),
            "--baselines-dir", str(baselines)]  # fmt: skip


def perfgate_medians(results_json: Path) -> dict[tuple[int, int, int], float]:
    """(M, N, K) -> median ns of a leaderboard-mode results file."""
    data = json.loads(results_json.read_text())
    out = {}
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        out[(info["m"], info["n"], info["k"])] = bench["stats"]["median"] * 1e9
    return out


def run_perfgate(submission: Path, tmp: Path) -> dict[tuple[int, int, int], float]:
    results, baselines = tmp / "perfgate-results", tmp / "no-baselines"
    baselines.mkdir()
    cmd = perfgate_command(submission, results, baselines)
    print(f"{PROG}: {' '.join(cmd[1:])}", flush=True)
    rc = spawn.run(cmd, cwd=REPO).returncode
    if rc != 0:
        raise RuntimeError(f"perfgate bench exited {rc}")
    return perfgate_medians(results / "leaderboard-submission.json")


# -- the table --------------------------------------------------------------------------------------
def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def rows(evals: Sequence[Mapping[str, Any]], medians: Mapping[tuple[int, int, int], float] | None,
         cases=BENCHMARK_CASES) -> list[dict[str, Any]]:  # fmt: skip
    """One row per case: eval.py's statistics, perfgate's median and eval.py mean / median - 1."""
    out = []
    for (m, n, k, seed), ev in zip(cases, evals, strict=False):
        row = {"shape": f"m{m}-n{n}-k{k}", "seed": seed, "eval": dict(ev)}
        if medians is not None and "mean" in ev:
            row["perfgate_median_ns"] = medians[(m, n, k)]
            row["eval_vs_perfgate"] = ev["mean"] / medians[(m, n, k)] - 1
        out.append(row)
    return out


def table(rs: Sequence[Mapping[str, Any]], title: str) -> str:
    lines = [
        f"### {title}",
        "",
        "| shape | eval.py mean µs | runs | err/mean | best µs | perfgate median µs | eval.py vs perfgate |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rs:
        ev = r["eval"]
        if "mean" not in ev:
            lines.append(f"| {r['shape']} | {ev.get('error', 'not run')} | | | | | |")
            continue
        pg = r.get("perfgate_median_ns")
        ratio = r.get("eval_vs_perfgate")
        lines.append(
            f"| {r['shape']} | {ev['mean'] / 1e3:.3f} | {ev['runs']:.0f} | "
            f"{100 * ev['err'] / ev['mean']:.2f}% | {ev['best'] / 1e3:.3f} | "
            f"{'' if pg is None else f'{pg / 1e3:.3f}'} | "
            f"{'' if ratio is None else f'{100 * ratio:+.1f}%'} |"
        )
    timed = [r for r in rs if "eval_vs_perfgate" in r]
    if timed and len(timed) == len(rs):
        ev_score = geomean([r["eval"]["mean"] for r in timed])
        pg_score = geomean([r["perfgate_median_ns"] for r in timed])
        lines.append(
            f"| score (geometric mean) | {ev_score / 1e3:.3f} | | | | {pg_score / 1e3:.3f} | "
            f"{100 * (ev_score / pg_score - 1):+.1f}% |"
        )
    return "\n".join(lines) + "\n"


# -- the command line -------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    f = sub.add_parser("fetch", help="download the harness's files at the pinned commit")
    f.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="cache directory")
    source = f.add_mutually_exclusive_group()
    source.add_argument("--base-url", default=RAW, help="serves <commit>/<path> (default: GitHub)")
    source.add_argument("--from-git", type=Path, metavar="GIT_DIR", help="a local clone instead")
    r = sub.add_parser("run", help="eval.py leaderboard beside perfgate's leaderboard mode (GPU)")
    r.add_argument("file", type=Path, metavar="FILE", help="the submission file")
    r.add_argument("--harness-dir", type=Path, help="holds eval.py, utils.py, task.py (checked)")
    r.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where fetch put them")
    r.add_argument("--no-perfgate", action="store_true", help="eval.py only")
    r.add_argument("--json", dest="json_out", type=Path, metavar="OUT", help="rows as JSON")
    r.add_argument("--markdown", dest="markdown_out", type=Path, metavar="OUT", help="the table")
    return parser


def _fetch(args: argparse.Namespace) -> int:
    dest = fetch(args.cache / COMMIT, base_url=args.base_url, from_git=args.from_git)
    print(f"{PROG}: {', '.join(FILES)} of {COMMIT[:12]} in {dest} (sha256 checked)")
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        submission = check_path(args.file)
    except SubmissionError as exc:
        raise HarnessError(str(exc)) from None
    outputs = {"--json": args.json_out, "--markdown": args.markdown_out}
    try:
        atomic.check_outputs(outputs, {"FILE": submission})
    except atomic.OutputError as exc:
        raise HarnessError(str(exc)) from None
    harness = verify(args.harness_dir if args.harness_dir else args.cache / COMMIT)
    import torch

    if not torch.cuda.is_available():
        raise HarnessError("eval.py times on a GPU (torch.cuda); this machine has none")
    with tempfile.TemporaryDirectory(prefix="gpumode-harness-") as tmp:
        work = stage(harness, submission, Path(tmp))
        print(f"{PROG}: python eval.py leaderboard tests.txt in {work} ...", flush=True)
        popcorn = run_eval(work)
        evals = benchmarks(popcorn)
        for row in rows(evals, None):
            ev = row["eval"]
            shown = f"{ev['mean'] / 1e3:.3f} us ({ev['runs']:.0f} runs)" if "mean" in ev else ev
            print(f"{PROG}: eval.py {row['shape']}: {shown}", flush=True)
        medians = None
        if popcorn["check"] == "pass" and not args.no_perfgate:
            try:
                medians = run_perfgate(submission, Path(tmp))
            except RuntimeError as exc:
                print(f"{PROG}: {exc}", file=sys.stderr)
                return 1
    result = rows(evals, medians)
    device = torch.cuda.get_device_name()
    text = table(
        result, f"GPU MODE eval.py ({COMMIT[:12]}) vs perfgate leaderboard mode ({device})"
    )
    print(text)
    if args.json_out:
        atomic.write_json(args.json_out, {"commit": COMMIT, "device": device,
                                          "submission": str(submission), "rows": result})  # fmt: skip
    if args.markdown_out:
        atomic.write_text(args.markdown_out, text)
    if popcorn["check"] != "pass":
        print(f"{PROG}: eval.py rejected {args.file} (check: {popcorn['check']})", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _fetch(args) if args.command == "fetch" else _run(args)
    except HarnessError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
