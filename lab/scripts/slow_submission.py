"""A copy of an exported submission with one ranked shape's tuned config made clearly slower:
the head side of an A/B of two submission files whose verdict is known in advance.

``python -m lab.scripts.slow_submission IN OUT [--shape 16x2112x7168] [--config EXPR]`` copies the
exported file IN to OUT with the one tuned-table entry of ``--shape`` (``(M, N, K): GemmConfig(
...)`` in the embedded table of IN's target) replaced by ``--config``. The default turns the
long-K shape's split-K off (``GemmConfig(16, 128, 128, num_stages=3)`` for 16x2112x7168, K =
7168 in one pass over 17 tiles of N: several times slower on the H200 than its 14 splits); any
other entry keeps its bits, so ``perfgate ab --base-submission IN --head-submission OUT`` must
find that shape slower and no other.

OUT gets a private package name of its own (the digest in ``_mxfp4_submission_<digest>``,
derived from its content), so both files can be loaded in one process, and a comment after the
POPCORN lines saying what was changed. Exit 2 with one line: IN not an exported file, the shape's
entry not found exactly once, a ``--config`` that is not a ``GemmConfig(...)`` call, OUT the
same file as IN. A measuring tool's input, never a submission.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import sys
from pathlib import Path

from perfgate import atomic

DEFAULT_SHAPE = (16, 2112, 7168)
DEFAULT_CONFIG = "GemmConfig(16, 128, 128, num_stages=3)"
NAME = re.compile(r"_mxfp4_submission_([0-9a-f]{16})")


class Refused(Exception):
    """The input cannot be rewritten as asked; the message is one line."""


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"--shape must be MxNxK, e.g. 16x2112x7168, got {text!r}")
    m, n, k = (int(p) for p in parts)
    return m, n, k


def check_config(expr: str) -> str:
    """``expr`` if it is one ``GemmConfig(...)`` call of literal arguments (what the table holds)."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        node = None
    ok = (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "GemmConfig"
        and all(isinstance(a, ast.Constant) for a in node.args)
        and all(isinstance(kw.value, ast.Constant) and kw.arg for kw in node.keywords)
    )
    if not ok:
        raise Refused(f"--config must be a GemmConfig(...) call of literals, got {expr!r}")
    return expr


def rewrite(text: str, shape: tuple[int, int, int], config: str) -> str:
    """``text`` (an exported file) with ``shape``'s table entry set to ``config`` and a new
    private package name; Refused when the file is not an export or the entry is not there once."""
    names = set(NAME.findall(text))
    if not text.startswith("#!POPCORN ") or len(names) != 1:
        raise Refused("IN is not a file written by `perfgate submission export`")
    key = r"\(\s*{}\s*,\s*{}\s*,\s*{}\s*\)".format(*shape)
    # the entry and the timing comment after it, which no longer describes it
    entry = re.compile(key + r"\s*:\s*GemmConfig\([^()]*\)(,[ \t]*#[^\n]*)?")
    found = entry.findall(text)
    if len(found) != 1:
        m, n, k = shape
        raise Refused(
            f"IN holds {len(found)} tuned entries for {m}x{n}x{k} (expected 1: a ranked shape "
            "of IN's target)"
        )
    m, n, k = shape
    text = entry.sub(
        lambda hit: f"({m}, {n}, {k}): {config}" + (",  # slowed" if hit.group(1) else ""),
        text,
        count=1,
    )
    lines = text.split("\n")
    popcorn = next(i for i, line in enumerate(lines) if not line.startswith("#!POPCORN "))
    lines.insert(
        popcorn,
        f"# lab/scripts/slow_submission.py: ({m}, {n}, {k}) -> {config} (an A/B input)",
    )
    text = "\n".join(lines)
    old = names.pop()
    new = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return text.replace(f"_mxfp4_submission_{old}", f"_mxfp4_submission_{new}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.scripts.slow_submission", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("input", type=Path, metavar="IN", help="an exported submission file")
    parser.add_argument("output", type=Path, metavar="OUT", help="the slower copy to write")
    parser.add_argument("--shape", type=parse_shape, default=DEFAULT_SHAPE, help="MxNxK")
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="the entry's new GemmConfig")
    args = parser.parse_args(argv)

    try:
        if args.output.resolve() == args.input.resolve():
            raise Refused("OUT is IN; write the slower copy to another file")
        try:
            text = args.input.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise Refused(f"cannot read IN {args.input}: {exc}") from None
        out = rewrite(text, args.shape, check_config(args.config))
        atomic.write_text(args.output, out)
    except (Refused, atomic.OutputError, OSError) as exc:
        print(f"lab.scripts.slow_submission: error: {exc}", file=sys.stderr)
        return 2
    m, n, k = args.shape
    print(f"lab.scripts.slow_submission: wrote {args.output} ({m}x{n}x{k} -> {args.config})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
