"""The ``ci`` hypothesis profile's seeds: reproducible for one tree, new for every change to the
code under test.

Hypothesis' own ``derandomize`` seeds a test from the test's source alone, so CI replayed the
same 25 examples of a kernel test on every run, whatever the pull request changed. Here each
property test is seeded from the test's id and a digest of the code under test and of the
tests (``kernels/``, ``perfgate/`` and ``tests/`` sources): a rerun of one tree draws the same examples (a red CI reproduces
locally with ``CI=true``), and every change to the code draws new ones. Setting
``MXFP4_HYPOTHESIS_DIGEST`` to the digest a CI log prints replays that run's examples on a tree
with local edits; a failure's ``@reproduce_failure`` blob replays its one example anywhere.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

DIGEST_ENV = "MXFP4_HYPOTHESIS_DIGEST"
# the tests too: a changed strategy or test draws new examples, not the old ones again
SOURCES = ("kernels", "perfgate", "tests")
SUFFIXES = frozenset({".py", ".cu", ".cuh", ".h", ".hip", ".cpp"})


def code_digest(root: Path) -> str:
    """16 hex digits over the path and bytes of every source file under ``SOURCES``."""
    h = hashlib.sha256()
    for top in SOURCES:
        for path in sorted((root / top).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                h.update(path.relative_to(root).as_posix().encode() + b"\0")
                h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def run_digest(root: Path) -> str:
    """The digest this run seeds from: ``MXFP4_HYPOTHESIS_DIGEST`` if set, else the tree's."""
    return os.environ.get(DIGEST_ENV) or code_digest(root)


def seed_for(digest: str, test_id: str) -> int:
    """The seed of one test (its node id without parameters: they share one function)."""
    return int.from_bytes(hashlib.sha256(f"{digest}:{test_id}".encode()).digest()[:16], "big")


def seed_property_tests(items, digest: str) -> int:
    """Seed every hypothesis test among pytest ``items`` from ``digest``; how many were seeded
    (parametrized items share one function and one seed)."""
    from hypothesis import seed

    seeded = 0
    for item in items:
        test = getattr(item, "obj", None)
        if getattr(test, "is_hypothesis_test", False):
            seed(seed_for(digest, item.nodeid.split("[")[0]))(test)
            seeded += 1
    return seeded
