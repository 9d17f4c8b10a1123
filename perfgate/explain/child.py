"""The child that computes revisions' facts: ``python -m perfgate.explain.child --kernels-root
ROOT [--kernels-root ROOT ...] --part static|host|device --shape M,N,K [--shape ...]
[--target T ...] [--rounds N] [--jobs N]``.

Started by :mod:`perfgate.explain.revision` with this checkout as its working directory. Each
ROOT's facts are computed in a process of its own that imports ROOT's ``kernels``
(:func:`perfgate.measure.worker.use_kernels_from`) and this checkout's ``perfgate`` (the package
docstring says why). For ``static`` and ``host`` that process is forked from this one, ``--jobs``
at once, after this one has loaded what no revision changes (torch; triton and its own key; the
census's dispatch machinery): it is paid once, not once per revision, and nothing of a revision
is imported before its fork, so every fact is still computed afresh. ``device`` takes one ROOT
and computes in this process (a GPU context does not survive a fork).

Prints one JSON line per ROOT on its original stdout as it is done,
``{"root": ROOT, "ok": true, "facts": {"M,N,K": {...}}}``; anything the code under test prints
goes to stderr. A fact that cannot be computed is ``{"error": "one line"}`` in its place (or
``{"unavailable": "..."}`` when the revision predates what it needs); the other facts are still
given. Parts: ``static`` (the launch and the compile per target; ``TRITON_INTERPRET`` must be
off), ``host`` (the census, in Triton's interpreter: the parent hides the GPUs and sets
``TRITON_INTERPRET=1``),
``device`` (a GPU's per-kernel split).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from perfgate import spawn
from perfgate.explain.device_split import device_split
from perfgate.explain.host_facts import NotAvailable, host_facts
from perfgate.explain.launch_facts import launch_facts
from perfgate.explain.static_facts import static_facts
from perfgate.interpreter import drop_discarded_work, interpret_without_gpu
from perfgate.measure import host_census
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


def _prepare(part: str) -> None:
    """Load what every revision of ``part`` needs and none changes, before any fork."""
    import torch

    if part == "host":
        interpret_without_gpu(torch.cuda.is_available())  # before triton loads: the CPU counts
        drop_discarded_work()
        # the census's own first step (torch's dispatch-mode machinery, 2 s of a CPU), here
        # once: in each revision's process it then finds it loaded
        host_census.load_dispatch_machinery()
    else:
        from triton.runtime.cache import triton_key

        triton_key()  # the hash of triton's own files, in every compile's cache key


def _revision(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    try:
        use_kernels_from(root)
        return {"ok": True, "facts": facts(args.part, args.shape, args.target, args.rounds)}
    except Exception as exc:
        return {"ok": False, "error": _one_line(exc)}


def each_forked(
    roots: Sequence[Path], jobs: int, compute: Callable[[Path], dict[str, Any]]
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``(root, compute(root))`` for each root, computed in a process forked from this one,
    ``jobs`` at once, in the order they finish."""
    with tempfile.TemporaryDirectory(prefix="perfgate-explain-") as tmp:
        waiting = list(enumerate(roots))
        running: dict[int, tuple[Path, Path]] = {}
        while waiting or running:
            while waiting and len(running) < max(1, jobs):
                i, root = waiting.pop(0)
                out = Path(tmp) / f"{i}.json"
                sys.stdout.flush()
                sys.stderr.flush()
                parent = os.getpid()
                pid = os.fork()
                if pid == 0:  # the revision's own process: its answer in a file, then gone
                    code = 1
                    try:
                        spawn.init_worker(parent)
                        out.write_text(json.dumps(compute(root)))
                        code = 0
                    finally:
                        sys.stdout.flush()
                        sys.stderr.flush()
                        os._exit(code)
                running[pid] = (root, out)
            pid, status = os.wait()
            if pid not in running:
                continue
            root, out = running.pop(pid)
            try:
                yield root, json.loads(out.read_text())
            except (OSError, ValueError):
                code = os.waitstatus_to_exitcode(status)
                yield root, {"ok": False, "error": f"the revision's process {spawn.describe(code)}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfgate.explain.child")
    parser.add_argument("--kernels-root", required=True, type=Path, action="append")
    parser.add_argument("--part", required=True, choices=("static", "host", "device"))
    parser.add_argument("--shape", action="append", type=_shape, required=True)
    parser.add_argument("--target", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    roots = args.kernels_root
    if args.part == "device" and len(roots) != 1:
        parser.error("--part device takes one --kernels-root")
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # prints of the code under test: stderr
    if args.part == "static":
        os.environ.pop("TRITON_INTERPRET", None)

    # (a revision without kernels is answered by the parent, without a child)
    if args.part == "device":
        answers = [(roots[0], _revision(roots[0], args))]
    else:
        try:
            _prepare(args.part)
        except Exception as exc:
            answers = [(root, {"ok": False, "error": _one_line(exc)}) for root in roots]
        else:
            answers = each_forked(roots, args.jobs, lambda r: _revision(r, args))
    code = 0
    for root, result in answers:  # each as it comes
        answer.write(json.dumps({"root": str(root), **result}) + "\n")
        answer.flush()
        code = max(code, int(not result["ok"]))
    return code


if __name__ == "__main__":
    sys.exit(main())
