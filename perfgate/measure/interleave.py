"""Interleaved measurement: several streams (a side's worker x a case x a variant) timed in
alternating blocks of rounds on one GPU, so that clocks, temperature and other tenants hit every
stream alike.

The block order alternates forward and backward (A B, B A, A B, ...: ABBA for two streams): a
slow drift over the session then costs every stream the same on average, and no stream always
runs right after the same other one.

The process-level A/B runs several workers a side at once: :func:`alternate` orders them A1 B1
A2 B2 ..., so that the ABBA blocks take the sides' processes in turn, and :func:`close_all`
closes a look's workers together (every ``quit`` sent, then every exit waited for).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate import spawn
from perfgate.checkout import REPO

DEFAULT_BLOCK = 10


class WorkerError(RuntimeError):
    """A worker failed or died; the message is one line naming the side."""


def block_order(streams: Sequence[Any], rounds: int, block: int = DEFAULT_BLOCK) -> Iterator:
    """``(stream, k)`` pairs measuring ``rounds`` rounds of every stream in blocks of at most
    ``block``: forward order, then backward, and so on."""
    if rounds < 0 or block < 1:
        raise ValueError(f"need rounds >= 0 and block >= 1, got {rounds} and {block}")
    done, flip = 0, False
    while done < rounds:
        k = min(block, rounds - done)
        for stream in reversed(streams) if flip else streams:
            yield stream, k
        done += k
        flip = not flip


class SideProcess:
    """One worker process (``python -m perfgate.measure.worker``) and its pipes."""

    def __init__(
        self,
        label: str,
        kernels_root: Path,
        env: dict[str, str] | None = None,
        *,
        mode: str = "device",
    ) -> None:
        cmd = [sys.executable, "-m", "perfgate.measure.worker", "--kernels-root", str(kernels_root)]
        if mode != "device":  # whole-call timing (perfgate.measure.ab_worker)
            cmd += ["--mode", mode]
        self._spawn(label, cmd, env)

    def _spawn(self, label: str, cmd: list[str], env: dict[str, str] | None) -> None:
        self.label = label
        self.reducer_backend: str | None = None
        self._quit_sent = False
        self._ready = False
        self.proc = spawn.popen(
            cmd,
            cwd=REPO,
            env=dict(os.environ, **(env or {})),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def wait_ready(self) -> None:
        """Wait for the worker's start-up (imports, the GPU context, the Triton runtime: it
        warms up on its own as soon as it is started, beside the other workers of its wave),
        announced by its first line."""
        if self._ready:
            return
        try:
            line = self.proc.stdout.readline()
        except (OSError, ValueError) as exc:
            raise WorkerError(f"{self.label}: worker pipe broke ({exc})") from None
        if not line:
            raise WorkerError(
                f"{self.label}: worker exited ({self._exit_code()}) before it was ready; see its "
                "stderr"
            )
        if "ready" not in json.loads(line):
            raise WorkerError(f"{self.label}: the worker's first line is not its ready line")
        self._ready = True

    def _exit_code(self) -> int | None:
        """The exit status of a worker whose output has ended (it may take a moment to go)."""
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.wait_ready()
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerError(f"{self.label}: worker pipe broke ({exc})") from None
        if not line:
            raise WorkerError(f"{self.label}: worker exited ({self._exit_code()}); see its stderr")
        answer = json.loads(line)
        if not answer.get("ok"):
            what = request.get("case") or ", ".join(c["name"] for c in request.get("cases", []))
            raise WorkerError(f"{self.label}: {request['op']} {what}: {answer.get('error')}")
        if "reducer_backend" in answer:
            self.reducer_backend = answer["reducer_backend"]
        return answer

    def begin_close(self) -> None:
        """Ask the worker to quit without waiting for it (:func:`close_all`)."""
        if self.proc.poll() is None and not self._quit_sent:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
            self._quit_sent = True

    def close(self) -> None:
        if self.proc.poll() is None:
            if not self._quit_sent:
                with contextlib.suppress(WorkerError):
                    self.ask({"op": "quit"})
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass(frozen=True)
class Stream:
    """What one series of samples measures."""

    side: Any  # a SideProcess (anything with ask())
    case: str
    variant: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.side.label, self.case, self.variant)


def measure(
    streams: Sequence[Stream], rounds: int, samples: dict, *, block: int = DEFAULT_BLOCK
) -> None:
    """Add ``rounds`` interleaved rounds to every stream's list in ``samples`` (by stream key)."""
    for stream, k in block_order(streams, rounds, block):
        answer = stream.side.ask(
            {"op": "run", "case": stream.case, "variant": stream.variant, "rounds": k}
        )
        samples.setdefault(stream.key, []).extend(float(x) for x in answer["samples"])


def alternate(groups: Sequence[Sequence[Any]]) -> list[Any]:
    """The workers of each side taken in turn, ``[[A1, A2], [B1, B2]] -> [A1, B1, A2, B2]``: the
    order of a look's streams, so that no side's processes run as one stretch. The sides must
    have as many workers each."""
    sizes = {len(g) for g in groups}
    if len(sizes) > 1:
        raise ValueError(f"every side needs as many workers, got {[len(g) for g in groups]}")
    return [w for row in zip(*groups, strict=True) for w in row]


def close_all(sides: Sequence[Any]) -> None:
    """Close every worker: each is asked to quit first, then each exit is waited for, so that
    they wind down at once (one after another cost 0.6 s a worker on the H200)."""
    for side in sides:
        begin = getattr(side, "begin_close", None)
        if begin is not None:
            begin()
    for side in sides:
        side.close()
