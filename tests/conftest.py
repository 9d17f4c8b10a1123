"""Suite-wide pytest setup: interpreter mode, hypothesis profiles, the GPU policy.

- Without a GPU, ``TRITON_INTERPRET=1`` is set at triton's first import, so Triton kernels run
  on CPU tensors in the interpreter, without the work whose result it discards
  (:func:`perfgate.interpreter.drop_discarded_work`, applied before the first test). Nothing
  here imports torch or triton: a pytest process that runs no test (the xdist controller, a
  run that stops at its options or only collects) never pays for them.
- Hypothesis profiles: ``ci`` (derandomized, 25 examples, no shrinking, the default under
  ``CI``), ``dev`` (50, random, the default elsewhere) and ``thorough`` (1000, random: the
  nightly job). Pick one with ``--hypothesis-profile``. Under ``ci`` every property test is
  seeded from its id and a digest of the code under test (:mod:`tests.seeds`): a rerun of one
  tree replays its examples, a change to ``kernels/``, ``perfgate/`` or ``tests/`` draws new ones. The
  kernel tests stay at 25 examples (each runs the Triton interpreter); tests that run no
  kernel ask for more (``CHEAP`` in tests/test_mxfp4.py), and the small input spaces are
  enumerated instead of sampled.
- ``PERFGATE_REQUIRE_GPU=1`` (set by the GPU workflow) turns a missing GPU into a session error,
  so a GPU job can never pass by skipping every GPU test.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from perfgate.interpreter import drop_discarded_work, interpret_at_first_triton_import
from perfgate.measure.pinning import pin_xdist_worker, share_cores

# perfgate's pytest plugin (the benchmark harness, --perfgate-* options) for every run from the
# root: declared here, where pytest reads it before parsing options. A tests/perf/conftest.py
# that imported it would register options after parsing when the whole tree is collected.
# `python -m perfgate bench` also passes `-p perfgate.plugin`; pytest registers it once.
pytest_plugins = ("perfgate.plugin", "perfgate.submission.pytest_plugin", "tests.gpu_job")

# one GPU per pytest-xdist worker; must precede every torch.cuda call in this process
pin_xdist_worker()
# and its share of the cores; must precede the first import of numpy or torch in this process
share_cores()

# the interpreter where there is no GPU, chosen when triton is first imported (which loads torch
# to ask); must precede that import
interpret_at_first_triton_import()

import pytest  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

from perfgate import flags  # noqa: E402
from tests import seeds  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# ci: no shrink phase. Shrinking a kernel property test replays it through the interpreter
# hundreds of times (2-5 minutes before a red CI says anything); without it the first failing
# example is reported as found, with its values and the @reproduce_failure blob. Use the dev
# profile locally to shrink it.
CI_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=25,
    deadline=None,
    print_blob=True,
    database=None,
    phases=CI_PHASES,
    suppress_health_check=[HealthCheck.too_slow],
)
# dev and thorough draw new examples every run, CI or not: hypothesis' own profile under CI (the
# parent a profile inherits from when CI is set) is derandomized
settings.register_profile("dev", max_examples=50, derandomize=False, deadline=None, print_blob=True)
settings.register_profile(
    "thorough",
    max_examples=1000,
    derandomize=False,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
PROFILES = ("ci", "dev", "thorough")  # the profiles registered above


@functools.cache
def _torch():
    import torch

    return torch


def _gpu() -> bool:
    return _torch().cuda.is_available()


def _hip() -> bool:
    return _torch().version.hip is not None


def pytest_configure(config: pytest.Config) -> None:
    """Refuse, as a usage error (pytest exit 4: `nox -s test` exits 2), a hypothesis profile
    that is not registered (hypothesis' own check ends in an INTERNALERROR traceback) and an
    on/off variable that is neither (perfgate.flags)."""
    profile = config.getoption("hypothesis_profile", None)
    if profile is not None and profile not in PROFILES:
        raise pytest.UsageError(
            f"--hypothesis-profile must be one of {', '.join(PROFILES)}, got {profile!r}"
        )
    try:
        flags.check()
    except flags.FlagError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_sessionstart(session: pytest.Session) -> None:
    # A process a test starts is no xdist worker: with the worker's variables a child pytest
    # would pin itself a GPU as worker N, and pytest-benchmark would put its xdist warning first
    # in the output a test compares line for line. Read at start-up (pin_xdist_worker above,
    # pytest-benchmark's configure), they are needed no more.
    for name in [n for n in os.environ if n.startswith("PYTEST_XDIST_")]:
        del os.environ[name]
    if flags.flag("PERFGATE_REQUIRE_GPU") and not _gpu():
        torch = _torch()
        raise pytest.UsageError(
            "PERFGATE_REQUIRE_GPU is set but torch sees no GPU "
            f"(torch {torch.__version__}, hip={torch.version.hip}, cuda={torch.version.cuda}); "
            "refusing to run a GPU job that would skip every GPU test"
        )


def pytest_report_header(config: pytest.Config) -> str:
    profile = settings.default
    current = getattr(settings, "get_current_profile_name", None)  # hypothesis >= 6.123
    name = current() if current else getattr(settings, "_current_profile", "?")
    line = (
        f"hypothesis: profile {name!r} "
        f"(max_examples={profile.max_examples}, derandomize={profile.derandomize})"
    )
    if profile.derandomize:
        line += f", seeded from code digest {seeds.run_digest(REPO)} ({seeds.DIGEST_ENV})"
    return line


# Why the gfx950 tests run on the MI355X runner alone, and what stands in for them elsewhere.
GFX950_ONLY = (
    "needs an AMD gfx950 GPU: v_cvt_scalef32_pk_fp4_bf16 and the scaled MFMA execute nowhere "
    "else (everywhere, the gfx950-emulated path runs the asm path's own operand preparation "
    "through a model of the instruction, and tests/test_gemm_gfx950.py compiles and assembles "
    "the asm path)"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if settings.default.derandomize:
        seeds.seed_property_tests(items, seeds.run_digest(REPO))
    for item in items:
        # tests/perf/ only: tests/perfgate/ shares the prefix
        if item.nodeid.replace(os.sep, "/").startswith("tests/perf/"):
            item.add_marker(pytest.mark.bench)
        if item.get_closest_marker("gpu") and not _gpu():
            item.add_marker(
                pytest.mark.skip(reason="needs a GPU (torch.cuda.is_available() is False)")
            )
        if item.get_closest_marker("gfx950") and not (_gpu() and _hip() and _arch() == "gfx950"):
            item.add_marker(pytest.mark.skip(reason=GFX950_ONLY))


def pytest_collection_finish(session: pytest.Session) -> None:
    # before the first test, in a process that runs tests (the kernels are imported by now)
    if not session.config.option.collectonly:
        drop_discarded_work()  # a no-op where the kernels run compiled


def _arch() -> str:
    from kernels.device import device_info

    return device_info().arch


@pytest.fixture(scope="session")
def device():
    """The device the kernel tests run on (a ``torch.device``): the GPU, or the CPU under the
    Triton interpreter."""
    return _torch().device("cuda" if _gpu() else "cpu")
