"""What every command shares: the answer on a machine without a GPU.

Command modules import this and the library, never each other. None prints an error line of
its own: a command raises a perfgate.refusal.Refusal (or RunFailure) and ``__main__`` answers it.
"""

from __future__ import annotations

from perfgate import flags
from perfgate.refusal import Refusal


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def gpu_required() -> bool:
    """``PERFGATE_REQUIRE_GPU`` on (perfgate.flags): a GPU job, where no GPU is an error."""
    return flags.flag("PERFGATE_REQUIRE_GPU")


class GpuRequired(Refusal):
    """No GPU where ``PERFGATE_REQUIRE_GPU`` says the job needs one."""


def no_gpu(command: str, prog: str = "perfgate") -> int:
    """The answer on a machine without a GPU: a clear message and 0; GpuRequired (exit 2) when
    a GPU is required. ``prog``: the program the command belongs to (``lab`` for the lab's)."""
    import torch

    why = f"torch {torch.__version__} sees no CUDA/ROCm GPU (cuda={torch.version.cuda}, hip={torch.version.hip})"
    if gpu_required():
        raise GpuRequired(f"PERFGATE_REQUIRE_GPU is set but {why}")
    print(f"{prog} {command}: no GPU on this machine ({why}); ran no benchmarks.")
    return 0


class InterpreterRefusal(Refusal):
    """No GPU, and this triton's interpreter cannot run the kernels a command would run on it."""


def require_runnable_interpreter() -> None:
    """Before a command runs the suite's kernels on a CPU (no GPU here): InterpreterRefusal,
    one line, when this triton's interpreter cannot run them (kernels.interpreter)."""
    refusal = interpreter_refusal()
    if refusal is not None:
        raise refusal


def interpreter_refusal() -> InterpreterRefusal | None:
    """What :func:`require_runnable_interpreter` would raise, or None. The interpreter is asked
    first: it answers without torch, which a GPU check imports."""
    from kernels.interpreter import interpreter_problem

    problem = interpreter_problem()
    if problem is not None and not gpu_available():
        return InterpreterRefusal(f"no GPU on this machine, and {problem}")
    return None
