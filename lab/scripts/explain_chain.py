"""The planted-cause chain of ``perfgate explain``: one commit per known cause of a slowdown, each
explained against its parent; the explanation must name the planted cause first.

``python -m lab.scripts.explain_chain --out DIR [--shape 256,3072,1536] [--target sm90] [--device auto]``

In a temporary clean clone of this working tree (:mod:`lab.scripts.history_clone`), on top of C0 (the
tree as it is), each commit plants one cause on the shape (an entry of sm90's tuned table,
``kernels/_configs_nvidia.py``, that splits K; the quantizer and the launcher are every
shape's):

- C1 ``stages``: the shape's ``num_stages`` one lower (a config change on one shape);
- C2 ``vector``: one more vector operation per element in the quantizer (the per-element NaN
  select issue 14 removed from ``block_abs_max``: a compare and a select on every element of A);
- C3 ``allocation``: one more allocation per call in the launcher (``torch.empty`` in
  ``_Bound.__call__``);
- C4 ``split-k``: the shape unsplit (``split_k=1``);
- C5 ``nothing``: a text file (no cause: the explanation must say nothing changed).

Then ``python -m perfgate explain --base C(i-1) --head Ci -k <shape> --json ...`` for each; on a
GPU (``--device auto``) each explanation measures the per-kernel split too. Written to DIR:
``explain-<cause>.txt`` and ``.json`` per pair, ``explain-chain.json`` and ``explain-chain.md``
(per cause: the expected and the first-ranked difference, correct or not). Exit 0 when every
cause is named first and the unchanged pair explains nothing; 1 otherwise; 2 when the chain
cannot be made. The clone is removed.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from lab.scripts.bisect_chain import chain_parser, on_chain, shape_id
from lab.scripts.history_clone import REPO, clean_clone, commit, git, tree_files

CONFIGS = Path("kernels/_configs_nvidia.py")
QUANT = Path("kernels/_quant.py")
GEMM = Path("kernels/gemm.py")
# cause -> (part, field) its explanation must rank first; None: nothing may change
EXPECTED = {
    "stages": ("launch", "num_stages"),
    "vector": ("static", "valu_per_wave"),
    "allocation": ("host", "allocations"),
    "split-k": ("launch", "split_k"),
    "nothing": None,
}


def _entry_span(text: str, shape: tuple[int, int, int]) -> tuple[int, int]:
    """Where ``shape``'s entry of a tuned table starts and ends (its key to the next key)."""
    key = f"({shape[0]}, {shape[1]}, {shape[2]}):"
    starts = [m.start() for m in re.finditer(re.escape(key), text)]
    if len(starts) != 1:
        raise ValueError(f"expected one entry {key} in the table, found {len(starts)}")
    nxt = re.compile(r"^\s*\(\d+, \d+, \d+\):|^\s*\}", re.M).search(text, starts[0] + len(key))
    return starts[0], nxt.start() if nxt else len(text)


def set_field(text: str, shape: tuple[int, int, int], field: str, value) -> str:
    """``text`` (a tuned table) with ``shape``'s ``field=`` set to ``value``; the field must be
    written in the entry and differ."""
    lo, hi = _entry_span(text, shape)
    found = re.search(rf"\b{field}=(\d+)", text[lo:hi])
    if found is None:
        raise ValueError(f"the entry of {shape} writes no {field}=")
    if int(found.group(1)) == value:
        raise ValueError(f"the entry of {shape} already has {field}={value}")
    a, b = lo + found.start(1), lo + found.end(1)
    return text[:a] + str(value) + text[b:]


def field_of(text: str, shape: tuple[int, int, int], field: str) -> int:
    lo, hi = _entry_span(text, shape)
    found = re.search(rf"\b{field}=(\d+)", text[lo:hi])
    if found is None:
        raise ValueError(f"the entry of {shape} writes no {field}=")
    return int(found.group(1))


VECTOR_ANCHOR = "    bits = x.to(tl.uint16, bitcast=True) & 0x7FFF\n"
VECTOR_LINE = "    bits = tl.where(bits > 0x7F80, 0, bits)  # planted: a select per element\n"
ALLOC_ANCHOR = "    def __call__(self, a, b, bs, out):\n"
ALLOC_LINE = "        torch.empty(1, device=self.device)  # planted: one more allocation per call\n"


def _insert_after(text: str, anchor: str, line: str, what: str) -> str:
    if text.count(anchor) != 1:
        raise ValueError(f"{what}: expected the line {anchor.strip()!r} once")
    return text.replace(anchor, anchor + line)


def plant(clone: Path, cause: str, shape: tuple[int, int, int]) -> None:
    """Write ``cause`` into the clone's tree (not committed)."""

    def edit(rel: Path, fn) -> None:
        path = clone / rel
        path.write_text(fn(path.read_text(encoding="utf-8")), encoding="utf-8")

    if cause == "stages":
        edit(
            CONFIGS,
            lambda t: set_field(t, shape, "num_stages", field_of(t, shape, "num_stages") - 1),
        )
    elif cause == "vector":
        edit(QUANT, lambda t: _insert_after(t, VECTOR_ANCHOR, VECTOR_LINE, str(QUANT)))
    elif cause == "allocation":
        edit(GEMM, lambda t: _insert_after(t, ALLOC_ANCHOR, ALLOC_LINE, str(GEMM)))
    elif cause == "split-k":
        edit(CONFIGS, lambda t: set_field(t, shape, "split_k", 1))
    elif cause == "nothing":
        (clone / "EXPLAIN_CHAIN.txt").write_text("a commit that changes no timing\n")
    else:
        raise ValueError(f"unknown cause {cause!r}")


def kernels_repo(dest: Path, src: Path = REPO) -> Path:
    """A new repository at ``dest`` holding ``src``'s kernels/ alone, committed: all a
    revision's children import, so a small ``src`` for :func:`make_chain` (the tests')."""
    for rel in tree_files(src):
        if rel.startswith("kernels/"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)
    git(dest, "init", "-q")
    commit(dest, "kernels/ of the tree")
    return dest


def make_chain(clone: Path, shape: tuple[int, int, int], src: Path = REPO) -> list[tuple[str, str]]:
    """[("C0", sha), (cause, sha), ...] in a new clean clone at ``clone``."""
    commits = [("C0", clean_clone(clone, src, "explain chain C0: the working tree as it is"))]
    for cause in EXPECTED:
        plant(clone, cause, shape)
        commits.append((cause, commit(clone, f"explain chain: planted {cause}")))
    return commits


def first_ranked(answer: dict) -> tuple[str, str] | None:
    (bench,) = answer["benchmarks"]
    ranked = [d for d in bench["ranked"] if d["part"] != "device"]
    return (ranked[0]["part"], ranked[0]["field"]) if ranked else None


def judge(cause: str, answer: dict) -> bool:
    (bench,) = answer["benchmarks"]
    if EXPECTED[cause] is None:
        return bench["nothing_changed"]
    return first_ranked(answer) == EXPECTED[cause]


def main(argv: list[str] | None = None) -> int:
    parser = chain_parser("lab.scripts.explain_chain", __doc__)
    parser.set_defaults(shape=(256, 3072, 1536))  # an sm90 tuned entry that splits K
    parser.add_argument("--target", default="sm90")
    parser.add_argument("--device", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="per explanation")
    parser.add_argument(
        "--causes",
        default=",".join(EXPECTED),
        help="the pairs to explain, comma-separated (default: all): on a GPU each pair measures "
        "its device split, so the chain can be split over several runs",
    )
    args = parser.parse_args(argv)
    unknown = set(args.causes.split(",")) - set(EXPECTED)
    if unknown:
        parser.error(f"--causes: unknown {sorted(unknown)}; choose from {', '.join(EXPECTED)}")

    def explain_all(clone: Path, commits, out: Path) -> int:
        return _explain_all(clone, commits, args.shape, out, args)

    return on_chain("lab.scripts.explain_chain", args.out, args.shape, explain_all, make=make_chain)


def _explain_all(clone: Path, commits, shape, out: Path, args) -> int:
    from perfgate import spawn

    results = []
    wanted = set(args.causes.split(","))
    for (_, base), (cause, head) in itertools.pairwise(commits):
        if cause not in wanted:
            continue
        cmd = [sys.executable, "-m", "perfgate", "explain", "--base", base, "--head", head]
        cmd += ["-k", shape_id(shape), "--target", args.target, "--device", args.device]
        cmd += ["--json", str(out / f"explain-{cause}.json")]
        start = time.monotonic()
        with (out / f"explain-{cause}.txt").open("w", encoding="utf-8") as log:
            try:
                rc = spawn.run(
                    cmd, cwd=clone, stdout=log, stderr=log, timeout=args.timeout_s
                ).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        try:
            answer = json.loads((out / f"explain-{cause}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            answer = None
        first = answer and answer["benchmarks"][0]["ranked"][:1]
        results.append(
            {
                "cause": cause,
                "base": base,
                "head": head,
                "exit": rc,
                "expected": EXPECTED[cause],
                "first": first[0]["text"] if first else None,
                "first_static": first_ranked(answer) if answer else None,
                "correct": bool(answer) and rc == 0 and judge(cause, answer),
                "device_measured": bool(answer and answer["device_measured"]),
                "wall_s": round(time.monotonic() - start, 1),
            }
        )
    (out / "explain-chain.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [f"### Planted-cause chain: {shape_id(shape)}", "", "| cause | first ranked | correct |",
             "| --- | --- | --- |"]  # fmt: skip
    lines += [
        f"| {r['cause']} | {r['first'] or 'nothing changed'} | {r['correct']} |" for r in results
    ]
    (out / "explain-chain.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0 if all(r["correct"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
