"""The planted-cause chain of ``perfgate explain``: one commit per known cause of a slowdown, each
explained against its parent; the explanation must name the planted cause first.

``python -m lab.scripts.explain_chain --out DIR [--shape 256,3072,1536] [--target sm90] [--device auto]``

In a temporary clean clone of this working tree (:mod:`tests.perfgate.planted_causes`, the chain
the CPU tests explain too), on top of C0 (the
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
import subprocess
import sys
import time
from pathlib import Path

from lab.scripts.bisect_chain import chain_parser, on_chain, shape_id
from perfgate import spawn
from tests.perfgate.planted_causes import EXPECTED, make_chain  # the tests' planted chain


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
