"""The planted-cause chain that ``perfgate explain`` must read right: one commit per known cause
of a slowdown on top of a clean clone of the working tree (C1 ``stages``, C2 ``vector``, C3
``allocation``, C4 ``split-k``, C5 ``nothing``; lab/scripts/explain_chain.py says what each
plants). The CPU tests explain it (tests/perfgate/test_explain.py), the lab's script on a GPU."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.perfgate.history_clone import REPO, clean_clone, commit, git, tree_files

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
