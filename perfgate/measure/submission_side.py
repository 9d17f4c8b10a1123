"""An A/B side that is a submission file (``perfgate ab --base-submission A.py``).

:class:`SubmissionSide` is :class:`perfgate.measure.interleave.SideProcess` with a worker that
times a file (``python -m perfgate.measure.worker --submission FILE``) instead of a revision's
``kernels``: the same protocol, pipes and shutdown, so the A/B loop
(:func:`perfgate.measure.ab.measure_ab`) cannot tell them apart. Both workers run this checkout's
perfgate and ``kernels`` (the inputs, the reference, the checks); only ``custom_kernel`` differs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from perfgate.measure import interleave


def worker_command(path: Path, mode: str = "device") -> list[str]:
    return [
        sys.executable,
        "-m",
        "perfgate.measure.worker",
        "--submission",
        str(path),
        "--mode",
        mode,
    ]


class SubmissionSide(interleave.SideProcess):
    """One worker process timing ``path``'s ``custom_kernel``; it dies with this process."""

    def __init__(
        self, label: str, path: Path, env: dict[str, str] | None = None, mode: str = "device"
    ) -> None:
        self._spawn(label, worker_command(Path(path).resolve(), mode), env)

    def describe(self) -> dict[str, Any]:
        """What the worker loaded, by its own account (path, sha256, POPCORN directives)."""
        return self.ask({"op": "describe"})["source"]
