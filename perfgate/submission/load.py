"""A submission file as the suite calls it: imported in isolation, its ``custom_kernel`` found.

- :func:`load` imports FILE as a fresh module (a new name per call, so two files, or the same
  file twice, never share module state through the import system) and returns a
  :class:`Submission`; a file that does not import or has no callable ``custom_kernel`` raises
  :class:`SubmissionError` with one line.
- :func:`probe` does the same in a fresh Python process (``python -m perfgate.submission.load
  FILE``), so a command (bench, ab) can tell "the file is unusable" (exit 2) from "a test
  failed" before anything runs, whatever the file does to the process that imports it. The
  process is started through :mod:`perfgate.spawn`: it dies with the command, and a timeout or
  an interrupt stops it (SIGTERM, then SIGKILL) before the error is raised. ``submission test``
  loads the file first in the process of its tests instead (:mod:`perfgate.submission.contract`).

As in GPU MODE's harness, the file's directory is on ``sys.path`` while it imports (a sibling
module can be imported) and a ``task`` module is importable: where none exists, a stand-in with
the harness's two type names (``input_t``, ``output_t``, for annotations) is provided. Triton's
interpreter is switched on where torch sees no GPU (:mod:`perfgate.interpreter`, as
``tests/conftest.py`` does) at the first import of triton, before it loads, whenever the file
imports it; a file that never does (numpy, plain torch, a stand-in) loads without that question,
and without torch unless it imports it itself.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import subprocess
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate import spawn
from perfgate.checkout import REPO
from perfgate.interpreter import drop_discarded_work, interpret_at_first_triton_import
from perfgate.refusal import Refusal

ENTRY = "custom_kernel"
PROBE_MODULE = "perfgate.submission.load"  # python -m PROBE_MODULE FILE: probe()'s child
_COUNTER = itertools.count()


class SubmissionError(Refusal):
    """The file cannot be used as a submission; the message is one line naming the file."""


@dataclass(frozen=True)
class Submission:
    """A loaded submission file: what the tests and the benchmarks call."""

    path: Path
    sha256: str
    module: types.ModuleType
    custom_kernel: Callable[[Any], Any]

    @property
    def directives(self) -> dict[str, str]:
        """The file's ``#!POPCORN key value`` lines (``leaderboard``, ``gpu``)."""
        return directives(self.path.read_text(encoding="utf-8", errors="replace"))

    def describe(self) -> dict[str, Any]:
        """What a result file records about the code it timed (instead of a commit)."""
        return {"path": str(self.path), "sha256": self.sha256, **self.directives}

    def device_calls(self, sets: Sequence[tuple]) -> list[Callable[[], Any]]:
        """One ``custom_kernel(data)`` call per input set, each allocating its own output: the
        calls device mode captures in one graph (and replays)."""
        kernel = self.custom_kernel
        return [(lambda data=data: kernel(data)) for data in sets]


def directives(text: str) -> dict[str, str]:
    """``#!POPCORN key value`` lines at the top of a file, as a dict."""
    found = {}
    for line in text.splitlines():
        if not line.startswith("#!POPCORN "):
            break
        key, _, value = line[len("#!POPCORN ") :].strip().partition(" ")
        found[key] = value.strip()
    return found


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _task_stand_in() -> types.ModuleType | None:
    """A ``task`` module with the harness's type names, where none is importable."""
    if "task" in sys.modules or importlib.util.find_spec("task") is not None:
        return None

    def lazy(name: str) -> Any:  # torch loads only for a file that names the output type
        if name == "output_t":
            import torch

            return torch.Tensor
        raise AttributeError(f"module 'task' has no attribute {name!r}")

    task = types.ModuleType("task", "stand-in for GPU MODE's task.py (perfgate.submission)")
    task.input_t = tuple  # (A, B, B_q, B_shuffle, B_scale_sh)
    task.__getattr__ = lazy  # output_t: torch.Tensor
    return task


def sha256_of(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of a file's bytes: what a record names a submission by."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_path(path: str | os.PathLike[str]) -> Path:
    """``path`` resolved; SubmissionError unless it is a readable file."""
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise SubmissionError(f"{path}: no such file (a submission is one .py file)")
    return resolved


def load(path: str | os.PathLike[str]) -> Submission:
    """Import ``path`` as a fresh module and find its ``custom_kernel``."""
    resolved = check_path(path)
    blob = resolved.read_bytes()
    interpret_at_first_triton_import()
    name = f"perfgate_submission_{next(_COUNTER)}_{hashlib.sha256(blob).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise SubmissionError(f"{path}: not importable as a Python file")
    module = importlib.util.module_from_spec(spec)
    task = _task_stand_in()
    if task is not None:
        sys.modules["task"] = task
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    sys.path.insert(0, str(resolved.parent))
    # no __pycache__ beside the user's file: loading a submission writes nothing where it lies
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise SubmissionError(f"{path}: does not import ({_one_line(exc)})") from exc
    finally:
        sys.dont_write_bytecode = writes_bytecode
        if sys.path and sys.path[0] == str(resolved.parent):
            del sys.path[0]
    if "triton" in sys.modules:  # its kernels may run here, interpreted on a CPU
        drop_discarded_work()
    kernel = getattr(module, ENTRY, None)
    if kernel is None:
        raise SubmissionError(f"{path}: defines no {ENTRY} (the leaderboard calls {ENTRY}(data))")
    if not callable(kernel):
        raise SubmissionError(f"{path}: {ENTRY} is a {type(kernel).__name__}, not a function")
    return Submission(resolved, hashlib.sha256(blob).hexdigest(), module, kernel)


def kernel_for(path: str | os.PathLike[str] | None) -> tuple[Callable[[Any], Any], dict[str, Any]]:
    """The ``custom_kernel`` a benchmark calls and what its record says about it: FILE's
    (:meth:`Submission.describe`), or the package's own for None."""
    if path is None:
        from kernels.gemm import custom_kernel

        return custom_kernel, {"source": "kernels"}
    sub = load(path)
    return sub.custom_kernel, {"source": "submission", **sub.describe()}


def fresh_process(
    module: str, path: str | os.PathLike[str], *, timeout_s: float
) -> subprocess.CompletedProcess:
    """``python -m MODULE FILE`` in a fresh process, this checkout first on its path, output
    captured; SubmissionError when it outlasts ``timeout_s`` (it is stopped first)."""
    resolved = check_path(path)
    cmd = [sys.executable, "-m", module, str(resolved)]

    root = str(REPO)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    try:
        return spawn.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        what = "importing it" if module == PROBE_MODULE else f"{module} on it"
        raise SubmissionError(f"{path}: {what} took over {timeout_s:.0f} s") from None


IMPORT_TIMEOUT_S = 900.0  # a file that takes longer to import is unusable


def probe(path: str | os.PathLike[str], *, timeout_s: float = IMPORT_TIMEOUT_S) -> None:
    """:func:`load` in a fresh Python process; SubmissionError with its one line if it fails."""
    done = fresh_process(PROBE_MODULE, path, timeout_s=timeout_s)
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        reason = lines[-1] if lines else f"the probe exited {done.returncode}"
        raise SubmissionError(reason.removeprefix("perfgate submission: error: "))
    if LOADED not in done.stdout.splitlines():
        # exit 0 without the probe's word: the file ended the process while it was imported
        raise SubmissionError(f"{path}: importing it ended the process (exit 0, os._exit?)")


def load_argument(argv: list[str] | None, module: str, prog: str) -> Submission | None:
    """The one FILE of ``python -m MODULE FILE``, loaded; None once the usage or the file's one
    line (``PROG: error: ...``) is on stderr."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m {module} FILE", file=sys.stderr)
        return None
    try:
        return load(args[0])
    except SubmissionError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return None


# what the probe prints once FILE has loaded: exit 0 alone could be the file's own os._exit(0)
LOADED = "perfgate submission: loaded"


def main(argv: list[str] | None = None) -> int:
    """``python -m perfgate.submission.load FILE``: exit 0 and :data:`LOADED` when FILE loads,
    else 2 and one line."""
    if load_argument(argv, PROBE_MODULE, "perfgate submission") is None:
        return 2
    print(LOADED, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
