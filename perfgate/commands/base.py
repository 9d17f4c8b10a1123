"""What every command shares: the answer on a machine without a GPU, and the one-line error.

Command modules import this and the library, never each other.
"""

from __future__ import annotations

import sys

from perfgate.refusal import Refusal


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def gpu_required() -> bool:
    """``PERFGATE_REQUIRE_GPU`` on (perfgate.flags): a GPU job, where no GPU is an error."""
    from perfgate import flags

    return flags.flag("PERFGATE_REQUIRE_GPU")


def no_gpu(command: str) -> int:
    """The answer on a machine without a GPU: a clear message; 0, or 2 when a GPU is required."""
    import torch

    why = f"torch {torch.__version__} sees no CUDA/ROCm GPU (cuda={torch.version.cuda}, hip={torch.version.hip})"
    if gpu_required():
        print(f"perfgate {command}: error: PERFGATE_REQUIRE_GPU is set but {why}", file=sys.stderr)
        return 2
    print(f"perfgate {command}: no GPU on this machine ({why}); ran no benchmarks.")
    return 0


class InterpreterRefusal(Refusal):
    """No GPU, and this triton's interpreter cannot run the kernels a command would run on it."""


def require_runnable_interpreter() -> None:
    """Before a command runs the suite's kernels on a CPU (no GPU here): InterpreterRefusal,
    one line, when this triton's interpreter cannot run them (kernels.device)."""
    if gpu_available():
        return
    from kernels.device import interpreter_problem

    problem = interpreter_problem()
    if problem is not None:
        raise InterpreterRefusal(f"no GPU on this machine, and {problem}")


def error(command: str, exc: BaseException | str) -> int:
    """``perfgate COMMAND: error: ...`` on stderr, one line; exit code 2 (unusable input)."""
    print(f"perfgate {command}: error: {exc}", file=sys.stderr)
    return 2
