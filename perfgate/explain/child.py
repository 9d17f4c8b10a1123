"""The child that computes one revision's facts: ``python -m perfgate.explain.child --kernels-root
ROOT --part static|host|device --shape M,N,K [--shape ...] [--target T ...] [--rounds N]``.

Started by :mod:`perfgate.explain.revision` with this checkout as its working directory: it
imports ROOT's ``kernels`` (:func:`perfgate.measure.worker.use_kernels_from`) and this
checkout's ``perfgate`` (the package docstring says why). Prints one JSON object on its original
stdout, ``{"ok": true, "facts": {"M,N,K": {...}}}``; anything the code under test prints goes to
stderr. A fact that cannot be computed is ``{"error": "one line"}`` in its place (or
``{"unavailable": "..."}`` when the revision predates what it needs); the other facts are still
given. Parts: ``static`` (the launch and the compile per target; ``TRITON_INTERPRET`` must be
off), ``host`` (the census; on a CPU ``TRITON_INTERPRET=1``, set here before triton loads),
``device`` (a GPU's per-kernel split).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from perfgate.explain.device_split import device_split
from perfgate.explain.host_facts import NotAvailable, host_facts
from perfgate.explain.launch_facts import launch_facts
from perfgate.explain.static_facts import static_facts
from perfgate.measure.worker import use_kernels_from


def _shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(x) for x in text.split(","))
    return m, n, k


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:400]


def _guarded(fn, *args) -> dict[str, Any]:
    try:
        return fn(*args)
    except NotAvailable as exc:
        return {"unavailable": str(exc)}
    except Exception as exc:  # one fact failed: say so, give the others
        return {"error": _one_line(exc)}


def facts(part: str, shapes, targets, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for shape in shapes:
        key = ",".join(map(str, shape))
        if part == "static":
            out[key] = {
                t: {
                    "launch": _guarded(launch_facts, shape, t),
                    "static": _guarded(static_facts, shape, t),
                }
                for t in targets
            }
        elif part == "host":
            out[key] = _guarded(host_facts, shape)
        else:
            out[key] = _guarded(device_split, shape, rounds)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfgate.explain.child")
    parser.add_argument("--kernels-root", required=True, type=Path)
    parser.add_argument("--part", required=True, choices=("static", "host", "device"))
    parser.add_argument("--shape", action="append", type=_shape, required=True)
    parser.add_argument("--target", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # prints of the code under test: stderr
    if args.part == "static":
        os.environ.pop("TRITON_INTERPRET", None)
    try:
        # first: a revision without kernels is answered before torch is loaded (2 s of a CPU)
        use_kernels_from(args.kernels_root)
        if args.part == "host" and "triton" not in sys.modules:
            import torch

            if not torch.cuda.is_available():
                os.environ["TRITON_INTERPRET"] = "1"  # before triton loads: the CPU counts
        result = {"ok": True, "facts": facts(args.part, args.shape, args.target, args.rounds)}
        code = 0
    except Exception as exc:
        result, code = {"ok": False, "error": _one_line(exc)}, 1
    answer.write(json.dumps(result) + "\n")
    answer.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
