"""The planted-chain bisect on a GPU: a three-commit chain whose middle commit slows one shape,
bisected by ``python -m perfgate bisect``; the answer must be the middle commit.

``python -m lab.scripts.bisect_chain --out DIR [--shape 16,2112,7168] [--timeout-s 330]``

In a temporary clean clone of this working tree (:mod:`tests.perfgate.history_clone`):

- C0: the tree as it is;
- C1: the shape's entry of ``kernels/_configs_nvidia.py`` set to ``split_k=1`` (sm90's table:
  m16-n2112-k7168 is tuned at split_k=14, 18.6 µs on the H200; unsplit, its 7168-long K runs on
  17 CTAs of 132 SMs, several times slower);
- C2: a harmless commit (a text file added), so that the slow commit is not the last one.

Then ``python -m perfgate bisect --good C0 --bad C2 -k m<M>-n<N>-k<K> --groups leaderboard`` runs
in the clone (each step a same-job A/B on this GPU). Written to DIR: ``bisect.log`` (its
output), ``bisect.json`` (its answer), ``steps/`` (every A/B's reports), ``bisect-chain.json``
and ``bisect-chain.md`` (the chain, the expected and the found commit, wall time). Exit 0 when
the bisection names C1, 1 when it names anything else or finds nothing, 2 when the chain or the
run could not be made. The clone is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfgate import spawn
from tests.perfgate.history_clone import REPO, CloneError, clean_clone, commit

CONFIGS = Path("kernels/_configs_nvidia.py")


def slow_config(text: str, shape: tuple[int, int, int]) -> str:
    """``text`` (the configs module) with ``shape``'s entry at ``split_k=1``; ValueError when the
    entry is missing or already unsplit."""
    key = f"({shape[0]}, {shape[1]}, {shape[2]}):"
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.lstrip().startswith(key)]
    if len(hits) != 1:
        raise ValueError(f"{CONFIGS}: expected one entry {key}, found {len(hits)}")
    line = lines[hits[0]]
    found = re.search(r"split_k=(\d+)", line)
    if found is None or int(found.group(1)) == 1:
        raise ValueError(f"{CONFIGS}: the entry {key} is not split; nothing to slow down")
    lines[hits[0]] = line[: found.start()] + "split_k=1" + line[found.end() :]
    return "".join(lines)


def make_chain(clone: Path, shape: tuple[int, int, int], src: Path = REPO) -> list[str]:
    """C0, C1 (the slow commit), C2 in a new clean clone at ``clone``."""
    name = shape_id(shape)
    c0 = clean_clone(clone, src, "bisect chain C0: the working tree as it is")
    path = clone / CONFIGS
    path.write_text(slow_config(path.read_text(encoding="utf-8"), shape), encoding="utf-8")
    c1 = commit(clone, f"bisect chain C1: {name} unsplit (split_k=1), planted slowdown")
    (clone / "BISECT_CHAIN.txt").write_text("a commit that changes no timing\n", encoding="utf-8")
    c2 = commit(clone, "bisect chain C2: a text file, no timing change")
    return [c0, c1, c2]


def shape_id(shape: tuple[int, int, int]) -> str:
    return f"m{shape[0]}-n{shape[1]}-k{shape[2]}"


def bisect_command(commits: list[str], shape: tuple[int, int, int], out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "perfgate",
        "bisect",
        "--good",
        commits[0],
        "--bad",
        commits[-1],
        "-k",
        shape_id(shape),
        "--groups",
        "leaderboard",
        "--results-dir",
        str(out / "steps"),
        "--json",
        str(out / "bisect.json"),
    ]


def summarize(commits: list[str], rc: int, out: Path, wall_s: float, timed_out: bool) -> dict:
    try:
        answer = json.loads((out / "bisect.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        answer = None
    found = answer.get("first_bad") if answer else None
    return {
        "commits": {"C0 (good)": commits[0], "C1 (slow)": commits[1], "C2 (bad)": commits[2]},
        "expected_first_bad": commits[1],
        "found_first_bad": found,
        "correct": found == commits[1],
        "bisect_exit": rc,
        "timed_out": timed_out,
        "message": answer.get("message") if answer else None,
        "steps": answer.get("steps") if answer else None,
        "wall_s": round(wall_s, 1),
    }


def markdown(summary: dict, shape: tuple[int, int, int]) -> str:
    lines = [
        f"### Planted-chain bisect: {shape_id(shape)}",
        "",
        "| commit | sha |",
        "| --- | --- |",
        *(f"| {k} | `{v[:12]}` |" for k, v in summary["commits"].items()),
        "",
        f"- found: `{(summary['found_first_bad'] or '-')[:12]}`, expected C1 "
        f"`{summary['expected_first_bad'][:12]}`: **{'correct' if summary['correct'] else 'WRONG'}**",
        f"- bisect exit {summary['bisect_exit']}, {summary['wall_s']} s wall"
        + (" (timed out)" if summary["timed_out"] else ""),
        f"- {summary['message'] or 'no answer'}",
    ]
    for s in summary["steps"] or []:
        lines.append(f"  - {s['head'][:12]} against {s['base'][:12]}: {s['outcome']}")
    return "\n".join(lines) + "\n"


def parse_shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected M,N,K, got {text!r}") from None
    return m, n, k


def chain_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """The options every planted-chain tool takes: --out and --shape."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="where the reports go")
    parser.add_argument("--shape", type=parse_shape, default=(16, 2112, 7168), metavar="M,N,K")
    return parser


def on_chain(prog: str, out: Path, shape: tuple[int, int, int], body, make=None) -> int:
    """``body(clone, commits, out)`` on a new chain in a temporary clean clone (removed
    afterwards), ``out`` made; exit 2 after one line when the chain cannot be made.
    ``make(clone, shape)`` makes the chain (default: this module's :func:`make_chain`)."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"perfgate-{prog.rpartition('.')[2].replace('_', '-')}-"))
    try:
        try:
            commits = (make or make_chain)(work / "clone", shape)
        except (CloneError, ValueError, OSError) as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return 2
        return body(work / "clone", commits, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = chain_parser("lab.scripts.bisect_chain", __doc__)
    parser.add_argument(
        "--timeout-s", type=float, default=330.0, help="stop the bisection after this long"
    )
    args = parser.parse_args(argv)

    def run(clone: Path, commits: list[str], out: Path) -> int:
        cmd = bisect_command(commits, args.shape, out)
        print(
            f"lab.scripts.bisect_chain: chain {' '.join(c[:12] for c in commits)}; {' '.join(cmd[1:])}"
        )
        start, timed_out = time.monotonic(), False
        with (out / "bisect.log").open("w", encoding="utf-8") as log:
            try:
                rc = spawn.run(
                    cmd, cwd=clone, stdout=log, stderr=log, timeout=args.timeout_s
                ).returncode
            except subprocess.TimeoutExpired:  # spawn.run stopped it and its children
                rc, timed_out = 124, True
        summary = summarize(commits, rc, out, time.monotonic() - start, timed_out)
        (out / "bisect-chain.json").write_text(json.dumps(summary, indent=2) + "\n")
        text = markdown(summary, args.shape)
        (out / "bisect-chain.md").write_text(text, encoding="utf-8")
        print(text, end="")
        return 0 if summary["correct"] else 1

    return on_chain("lab.scripts.bisect_chain", args.out, args.shape, run)


if __name__ == "__main__":
    raise SystemExit(main())
