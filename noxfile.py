"""nox sessions of the MXFP4 GEMM regression suite.

Every session is small and passes ``session.posargs`` through. ``nox --no-venv -s SESSION``
runs in the current environment (the ROCm container, a GPU box with torch and triton already
installed) and installs nothing into it except the suite itself in editable mode.

Sessions that need torch (``test``, ``isa``, ``build``, ``bench``, ``update_baselines``) share
ONE virtualenv instead of one each (each used to hold its own multi-gigabyte torch):
``.nox/shared-cpu`` on a machine without a GPU (the CPU build of torch 2.13.0 and triton 3.9.0,
whose interpreter runs ``tl.dot_scaled``), ``.nox/shared-gpu`` on a GPU box (torch as pip
resolves it there). It is filled once; a stamp of its requirements means the next session
installs nothing until ``pyproject.toml`` or the pins below change. nox still makes its own
empty per-session venv (without pip: a few hundred kilobytes) and every command runs from the
shared one. ``bench`` and ``update_baselines`` look for a GPU before installing anything.

Exit codes, as every perfgate command's (README, "Exit codes"): 0 pass, 1 a regression or a
failed test, 2 unusable input. nox itself exits 1 for any failed session, so a session that
meets unusable input (its own argument checks, a perfgate child's exit 2, pytest's usage error
4 or its "no test collected" 5) prints one line and raises ``SystemExit(2)``: nox 2026.10.20
catches only ``Exception`` around a session, so the run stops there, later sessions do not run
and nox exits 2.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # nox itself depends on tomli before 3.11
    import tomli as tomllib

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["test"]
nox.options.reuse_existing_virtualenvs = True


def _load_flags():
    """perfgate/flags.py, the one parser of on/off variables, loaded by path: nox's Python has
    nothing of the suite installed, and the noxfile's directory is not on its sys.path."""
    path = Path(__file__).resolve().parent / "perfgate" / "flags.py"
    spec = importlib.util.spec_from_file_location("perfgate_flags_for_nox", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


flags = _load_flags()
# Exit 2: unusable input. A child's exit codes that mean the same, by program (what the user
# typed is wrong, nothing was judged): pytest's usage error and its "no test collected" (a -k,
# -m or path that selects nothing), and every perfgate command's 2.
USAGE = 2
CHILD_USAGE = {
    "pytest": {
        4: "pytest usage error",
        5: "no test collected (a -k, -m or path that selects nothing)",
    },
    "perfgate": {2: "unusable input (the line above names it)"},
}

# The CPU build of torch 2.13.0 is what these machines cache; an unpinned torch pulls a
# multi-gigabyte CUDA build.
CPU_TORCH = "torch==2.13.0"
# The static ISA baselines are compiler output: they are made with, and checked against, exactly
# this triton (on the H200, triton 3.6 changed spills and LDS of several sm90 configs). The CPU
# test env uses it too (>= 3.8 is the first whose interpreter runs dot_scaled), so `isa` and
# `update_baselines -- --isa` run in the same env with the same compiler by construction.
ISA_TRITON_VERSION = "3.9.0"
ISA_TRITON = f"triton=={ISA_TRITON_VERSION}"
CPU_TRITON = ISA_TRITON
# Every extra the torch sessions use between them: one env serves them all.
SHARED_EXTRAS = ("test", "perf", "container", "isa", "history", "mutate")
# The session's own venv only hosts nox's bookkeeping; without pip it is tiny and fast to make.
EMPTY_VENV = ["--without-pip"]


def _has_gpu() -> bool:
    return bool(shutil.which("nvidia-smi") or os.path.exists("/dev/kfd"))


def _extra_requirements(*extras: str) -> list[str]:
    """The requirements of the given optional-dependency groups, read from pyproject.toml."""
    with open("pyproject.toml", "rb") as f:
        optional = tomllib.load(f)["project"]["optional-dependencies"]
    return [req for extra in extras for req in optional[extra]]


def _refuse(session: nox.Session, message: str):
    """Unusable input: one line and exit 2 (``session.error`` would exit 1, a regression's)."""
    print(f"nox > {session.name}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(USAGE)


def _program(cmd: tuple[str, ...]) -> str:
    if Path(cmd[0]).name == "pytest":
        return "pytest"
    return "perfgate" if cmd[1:3] == ("-m", "perfgate") else Path(cmd[0]).name


def _run(session: nox.Session, *cmd: str, **kwargs) -> str | bool | None:
    """``session.run``; a child's exit code that means unusable input (CHILD_USAGE) exits 2."""
    try:
        return session.run(*cmd, **kwargs)
    except nox.command.CommandFailed as exc:
        program = _program(cmd)
        why = CHILD_USAGE.get(program, {}).get(exc.return_code)
        if why is None:
            raise
        _refuse(session, f"{program} exited {exc.return_code}: {why}")


def _in_place(session: nox.Session) -> bool:
    return session.venv_backend == "none"


def _pip(session: nox.Session, *args: str) -> None:
    """pip install into the session's venv, or into the current environment under --no-venv
    (where nox forbids session.install)."""
    if _in_place(session):
        _run(session, "python", "-m", "pip", "install", *args)
    else:
        session.install(*args)


class SharedEnv:
    """The virtualenv the torch sessions share (``location`` None: the current environment)."""

    def __init__(self, kind: str | None, location: Path | None):
        self.kind = kind
        self.location = location

    def run(self, session: nox.Session, *cmd: str, **kwargs) -> str | bool | None:
        """``session.run`` with ``cmd[0]`` taken from this env's bin directory."""
        if self.location is None:
            return _run(session, *cmd, **kwargs)
        bin_dir = self.location / "bin"
        env = {
            "VIRTUAL_ENV": str(self.location),
            "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
            **kwargs.pop("env", {}),
        }
        return _run(session, str(bin_dir / cmd[0]), *cmd[1:], env=env, external=True, **kwargs)


# The byte-for-byte replay test's goldens hold for the numpy, scipy and rich they were recorded
# with (tests/perfgate/test_replay.py); the CPU env (CI's) installs exactly those, so the replay
# runs on every push instead of skipping once a newer release appears.
REPLAY_ENV = Path("tests/perfgate/data/replay/golden/ENV.json")


def _replay_pins() -> list[str]:
    recorded = json.loads(REPLAY_ENV.read_text())
    return [f"{name}=={recorded[name]}" for name in ("numpy", "scipy", "rich")]


def _shared_requirements(kind: str) -> list[list[str]]:
    """The pip install commands that fill an env of ``kind``, in order."""
    torch_first = [[CPU_TORCH, CPU_TRITON]] if kind == "cpu" else []
    pins = _replay_pins() if kind == "cpu" else []
    return [*torch_first, ["-e", "."], [*_extra_requirements(*SHARED_EXTRAS), *pins]]


def _stamp(kind: str) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps(_shared_requirements(kind)).encode())
    digest.update(Path("pyproject.toml").read_bytes())  # editable-install metadata, scripts
    digest.update(sys.version.encode())
    return digest.hexdigest()


def shared_env(session: nox.Session, *extras: str, kind: str | None = None) -> SharedEnv:
    """The env to run ``session``'s commands in, with the suite installed.

    Under ``--no-venv``: the current environment, where only the suite (editable, no dependency
    resolution, no build isolation: works offline) and ``extras`` are installed. Otherwise the
    shared venv of ``kind`` ("cpu", "gpu"; default: whether this machine has a GPU), created and
    filled only when its stamp is missing or stale.
    """
    if _in_place(session):
        _pip(session, "--no-deps", "--no-build-isolation", "-e", ".")
        if extras:
            _pip(session, *_extra_requirements(*extras))
        return SharedEnv(None, None)
    kind = kind or ("gpu" if _has_gpu() else "cpu")
    location = Path(session.virtualenv.location).parent / f"shared-{kind}"
    stamp_file = location / ".mxfp4-stamp"
    stamp = _stamp(kind)
    if stamp_file.is_file() and stamp_file.read_text() == stamp:
        session.log(f"shared {kind} env up to date: {location}")
        return SharedEnv(kind, location)
    if not (location / "bin" / "python").exists():
        session.run(sys.executable, "-m", "venv", str(location), external=True)
    python = str(location / "bin" / "python")
    steps = _shared_requirements(kind)
    session.log(f"filling the shared {kind} env {location} once (a few minutes on 2 cores)")
    for number, requirement in enumerate(steps, 1):
        session.log(f"step {number}/{len(steps)}: pip install {' '.join(requirement)}")
        # pip's own progress (what it collects, downloads and installs), without its bars
        session.run(python, "-m", "pip", "install", "--progress-bar", "off", *requirement,
                    external=True)  # fmt: skip
    stamp_file.parent.mkdir(parents=True, exist_ok=True)
    stamp_file.write_text(stamp)
    return SharedEnv(kind, location)


def _check_isa_triton(session: nox.Session, env: SharedEnv) -> None:
    """Refuse to compare or write ISA baselines with another compiler than they record."""
    found = env.run(
        session, "python", "-c", "import triton; print(triton.__version__)", silent=True
    )
    version = str(found).strip().splitlines()[-1] if found else "unknown"
    if version != ISA_TRITON_VERSION:
        _refuse(
            session,
            f"the ISA baselines are made and checked with triton {ISA_TRITON_VERSION}; this "
            f"environment has triton {version}. Run without --no-venv (the shared CPU env pins it).",
        )


def _no_gpu_message(command: str) -> str:
    return (
        f"{command}: no GPU on this machine (no nvidia-smi on PATH, no /dev/kfd); "
        "nothing installed, ran no benchmarks"
    )


def _xdist_chosen(args: list[str]) -> bool:
    """The pytest arguments already say how to spread the tests (``-n``, ``--dist``, or xdist
    switched off with ``-p no:xdist``)."""
    joined = " ".join(args)
    return "no:xdist" in joined or any(
        a.startswith(("-n", "--numprocesses", "--dist")) for a in args
    )


def _submission_chosen(args: list[str]) -> bool:
    """The pytest arguments already name the contract tests' subject (``--submission FILE``)."""
    return any(a == "--submission" or a.startswith("--submission=") for a in args)


def _submission_option(path: str) -> str:
    """``--submission=PATH`` as one word: pytest declares the option in tests/conftest.py, which
    it finds from the paths among its arguments before it knows the option, so a separate PATH
    outside tests/ would be taken for a test path and the option refused."""
    return f"--submission={path}"


def _one_word_submission(args: list[str]) -> list[str]:
    """``args`` with a ``--submission PATH`` given by the user joined into one word."""
    out, rest = [], list(args)
    while rest:
        arg = rest.pop(0)
        out.append(_submission_option(rest.pop(0)) if arg == "--submission" and rest else arg)
    return out


# where the test session writes the export it tests (ignored, as all of .perfgate/)
TEST_EXPORTS = Path(".perfgate/test")
# The test runs start a fresh Python for many tests (each command end to end, each submission
# in a process of its own); with bytecode writing off (PYTHONDONTWRITEBYTECODE, set in many
# images) every one of them compiles the repository's modules and pytest rewrites their asserts
# anew, about 4 s of CPU each on 2 cores. The test sessions let Python keep its bytecode in
# __pycache__ (ignored by git), so each module is compiled once per checkout.
COMPILE_ONCE = {"PYTHONDONTWRITEBYTECODE": ""}
# The CPU tests allocate and free large tensors again and again: the leaderboard's operands, the
# reference's float64 products, the interpreter's blocks. glibc serves an allocation of more than
# 32 MiB with its own mmap and unmaps it when freed, so each new one page-faults from scratch
# (the kernel's share of the run: docs/measurements.md, "The CPU loop"). The test session asks
# glibc to keep freed memory for the next allocation (no mmap for allocations, no trimming of the
# heap); a process then keeps its peak memory until it exits. Other C libraries ignore these
# variables, and values the user set are kept.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def _keep_freed_memory() -> dict[str, str]:
    return {k: v for k, v in KEEP_FREED_MEMORY.items() if k not in os.environ}


def _export(session: nox.Session, env: SharedEnv, out: Path | str, target: str | None) -> str:
    """The package folded into the one file a user submits (``target``'s configs; None: the
    default, gfx950's); its path."""
    chosen = ["--target", target] if target else []
    env.run(session, "python", "-m", "perfgate", "submission", "export", "--out", str(out), *chosen)
    return str(out)


@nox.session(venv_params=EMPTY_VENV)
def test(session: nox.Session) -> None:
    """Correctness tests (everything but benchmarks), over every core (``-n auto`` unless the
    arguments say otherwise; ``-- -n 0`` runs in one process). On a CPU, Triton runs in its
    interpreter. The contract tests (tests/submission/) run on the package's one-file export."""
    # In place (--no-venv: the ROCm image, a GPU box), only the test and perf extras: the Docker
    # SDK and ziglang tests skip with their reason where those are not installed.
    env = shared_env(session, "test", "perf")
    args = _one_word_submission(session.posargs)
    spread = [] if _xdist_chosen(args) else ["-n", "auto"]
    # The contract tests' subject is the file a user submits: the export holds the package's
    # code with the target's tuned configs (gfx950's on a CPU: the MI355X's, in the interpreter),
    # so one run tests both, as the GPU job's does. `-- --submission FILE` tests another file.
    subject = []
    if not _submission_chosen(args):
        target = _gpu_target(session, env) if _has_gpu() else None
        # not under session.create_tmp(): nox points TMPDIR there, inside the checkout, where
        # the tests' own temporary files would pass for the repository's
        out = TEST_EXPORTS / f"submission-{target or 'default'}.py"
        subject = [_submission_option(_export(session, env, out, target))]
    env.run(session, "pytest", "-m", "not bench", *spread, *subject, *args,
            env=COMPILE_ONCE | _keep_freed_memory())  # fmt: skip


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format check), hadolint on the Dockerfile, actionlint and check-jsonschema on
    the workflows."""
    session.install(*_extra_requirements("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("hadolint", "docker/Dockerfile", "docker/standin/Dockerfile")
    session.run("actionlint", "-config-file", ".github/actionlint.yaml")
    session.run(
        "check-jsonschema",
        "--builtin-schema",
        "vendor.github-workflows",
        *sorted(str(p) for p in Path(".github/workflows").glob("*.yml")),
    )
    # the local composite action(s) the workflows use
    session.run(
        "check-jsonschema",
        "--builtin-schema",
        "vendor.github-actions",
        *sorted(str(p) for p in Path(".github/actions").glob("*/action.yml")),
    )


@nox.session(venv_params=EMPTY_VENV)
def build(session: nox.Session) -> None:
    """Build the native split-K reducer ahead of time (hipcc on ROCm, nvcc on CUDA)."""
    env = shared_env(session)
    env.run(session, "python", "-m", "kernels.reducer.build", *session.posargs)


def _isa_targets(session: nox.Session, env: SharedEnv) -> list[str]:
    from_registry = "from perfgate.isa.collect import TARGETS; print(' '.join(TARGETS))"
    return str(env.run(session, "python", "-c", from_registry, silent=True)).split()


@nox.session(venv_params=EMPTY_VENV)
def isa(session: nox.Session) -> None:
    """Static gate for every target that compiles on a CPU: compile every shipped config and
    compare with the baseline."""
    env = shared_env(session, "perf", "isa", kind="cpu")
    _check_isa_triton(session, env)
    known = _isa_targets(session, env)
    asked, rest = _take_option(session, "--target")
    if asked is not None and asked not in known:
        _refuse(session, f"--target must be one of {', '.join(known)}, got {asked!r}")
    for target in [asked] if asked else known:
        check = ["--check", f"perf_baselines/isa/{target}.json"]
        env.run(session, "python", "-m", "perfgate", "isa", "--target", target, *check, *rest)


def _take_option(
    session: nox.Session, name: str, args: list[str] | None = None
) -> tuple[str | None, list[str]]:
    """``name VALUE`` (or ``name=VALUE``) taken out of ``args`` (the posargs by default):
    (VALUE or None, the rest)."""
    args, rest, value = list(session.posargs if args is None else args), [], None
    while args:
        arg = args.pop(0)
        if arg == name:
            if not args or args[0].startswith("-"):
                _refuse(session, f"{name} needs a value")
            value = args.pop(0)
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return value, rest


def _check_revision(session: nox.Session, rev: str, option: str = "--base") -> None:
    """Before anything is installed or skipped: ``option`` must name a commit of this repository."""
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        _refuse(session, f"{option} needs git on PATH (the revision is read from this repository)")
    if found.returncode != 0:
        _refuse(session, f"{option} {rev!r} is not a commit of this repository (git rev-parse)")


def _skip_without_gpu(session: nox.Session, name: str) -> None:
    """Before anything is installed: no GPU skips the session (exit 0), or refuses it (exit 2)
    where the job demands a GPU (PERFGATE_REQUIRE_GPU on), so a GPU job never passes by
    measuring nothing."""
    try:
        required = flags.flag("PERFGATE_REQUIRE_GPU")
    except flags.FlagError as exc:
        _refuse(session, str(exc))
    if _has_gpu():
        return
    if required:
        _refuse(session, _no_gpu_message(name) + " (PERFGATE_REQUIRE_GPU is on)")
    session.skip(_no_gpu_message(name))


@nox.session(venv_params=EMPTY_VENV)
def bench(session: nox.Session) -> None:
    """Benchmark on this GPU and gate against this device's stored baseline (no GPU: exit 0)."""
    _skip_without_gpu(session, "bench")
    env = shared_env(session, "test", "perf")
    env.run(session, "python", "-m", "perfgate", "bench", *session.posargs)


@nox.session(venv_params=EMPTY_VENV)
def host(session: nox.Session) -> None:
    """Host-path count gate: custom_kernel's launches, allocations, copies, syncs and launcher
    calls per call against perf_baselines/<device-key>/host_counts.json (a CPU: the
    interpreter's, launches stubbed)."""
    env = shared_env(session, "test", "perf")
    # gate by default; `nox -s host -- --update` records this device's counts instead
    gate = [] if {"--update", "--check"} & set(session.posargs) else ["--gate"]
    env.run(session, "python", "-m", "perfgate", "host", *gate, *session.posargs)


@nox.session(venv_params=EMPTY_VENV)
def ab(session: nox.Session) -> None:
    """The head against a base revision, measured interleaved on this GPU in one job
    (``nox -s ab -- --base origin/main``; no GPU: exit 0 unless PERFGATE_REQUIRE_GPU)."""
    base, _ = _take_option(session, "--base")
    if base is None:
        _refuse(session, "ab needs --base REV (the revision to compare the head with)")
    _check_revision(session, base)
    _skip_without_gpu(session, "ab")
    env = shared_env(session, "test", "perf")
    env.run(session, "python", "-m", "perfgate", "ab", *session.posargs)


def _gpu_target(session: nox.Session, env: SharedEnv) -> str:
    """This GPU's registered target (gfx950, sm90), as the kernels see it."""
    query = "from kernels.device import device_info; print(device_info().arch)"
    return str(env.run(session, "python", "-c", query, silent=True)).split()[-1]


# What the GPU job demands: a GPU that torch sees and the native reducer, never a fallback.
GPU_JOB_ENV = {"PERFGATE_REQUIRE_GPU": "1", "MXFP4_REQUIRE_NATIVE_REDUCER": "1"}


def _workers(session: nox.Session, env: SharedEnv, asked: str | None) -> list[str]:
    """pytest-xdist's ``-n``: as asked, else a worker per GPU where there are several (each
    pinned to its own), else one per core on the one GPU."""
    if asked is None:
        query = (
            "from perfgate.measure.pinning import amd_gpu_count, nvidia_gpu_count; "
            "print(amd_gpu_count() or nvidia_gpu_count())"
        )
        gpus = int(str(env.run(session, "python", "-c", query, silent=True)).split()[-1])
        asked = str(gpus if gpus > 1 else os.cpu_count() or 1)
    return ["-n", asked]


def _headline(path: Path) -> str:
    """A written report's verdict line (its summary), or why there is none."""
    try:
        return json.loads(path.read_text())["summary"]["headline"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"no verdict ({path} not written)"


RESULTS = Path(".perfgate/results")


@nox.session(venv_params=EMPTY_VENV)
def gpu(session: nox.Session) -> None:
    """The GPU job: reducer build, the GPU job's tests (tests/gpu_job.py; the contract tests on
    this GPU's one-file export), the export timed, host count gate, the stored baselines'
    verdict and, with ``--base``, the A/B's.

    ``nox -s gpu -- [--base REV | --changed-since REV] [pytest args]``. Without ``--base`` (a
    push) the stored baselines decide. With ``--base`` (a pull request) the same-job A/B against
    REV decides, and the stored baselines' verdict is printed beside it: whether main itself has
    drifted. ``--changed-since REV`` is the inner loop's smoke: the reducer build and the GPU
    tests of the files changed since REV, no gate. No GPU: a message and exit 0, unless
    PERFGATE_REQUIRE_GPU is set (then an error)."""
    base, rest = _take_option(session, "--base")
    changed, pytest_args = _take_option(session, "--changed-since", rest)
    if base is not None and changed is not None:
        _refuse(
            session,
            "--base (the pull-request job) and --changed-since (the smoke) exclude each other",
        )
    for rev, option in ((base, "--base"), (changed, "--changed-since")):
        if rev is not None:
            _check_revision(session, rev, option)
    _skip_without_gpu(session, "gpu")
    env = shared_env(session, "test", "perf")
    required = {"env": GPU_JOB_ENV}
    env.run(session, "python", "-m", "kernels.reducer.build", **required)
    asked, pytest_args = _take_option(session, "-n", pytest_args)
    workers = _workers(session, env, asked)
    # What a user submits is what is tested and gated: the one-file export for this GPU (it
    # lands in .perfgate/results/, which the workflow uploads) is the contract tests' subject
    # in the test step, where a failure of either tier (the leaderboard's checks, the suite's
    # exact semantics) fails the job: the export is the package, so both decide.
    target = _gpu_target(session, env)
    exported = _export(session, env, f".perfgate/results/submission-{target}.py", target)
    selection = ["--gpu-job", *(["--changed-since", changed] if changed else [])]
    pytest_args = _one_word_submission(pytest_args)
    subject = [] if _submission_chosen(pytest_args) else [_submission_option(exported)]
    env.run(session, "pytest", "-m", "not bench", *selection, *workers, *subject, *pytest_args,
            env=GPU_JOB_ENV | COMPILE_ONCE)  # fmt: skip
    if changed is not None:
        session.log(f"smoke against {changed}: the GPU tests of the change passed; no gate ran")
        return
    # ... and timed: leaderboard mode on the ranked shapes (the reducer group has no meaning for
    # a file; bench runs the leaderboard tier first and never times a file it rejects), gated
    # against perf_baselines/<device>/leaderboard-submission.json once one is recorded
    # (update-baselines --submission FILE --mode leaderboard); until then a warning.
    timed = ["bench", "--submission", exported, "--mode", "leaderboard", "--allow-missing-baseline"]
    env.run(session, "python", "-m", "perfgate", *timed, **required)
    env.run(session, "python", "-m", "perfgate", "host", "--gate", **required)
    # The stored baselines: the push's gate; in a pull request, whether main itself has drifted
    # (every pull request comparing slow with slow is how a regression reaches main unseen).
    stored = {} if base is None else {"success_codes": [0, 1]}
    env.run(session, "python", "-m", "perfgate", "bench", **stored, **required)
    stored_verdict = f"stored baselines: {_headline(RESULTS / 'device.compare.json')}"
    if base is None:
        session.log(f"verdicts: {stored_verdict} (decides)")
        return
    session.log(f"{stored_verdict} (beside the A/B, which decides)")
    try:
        env.run(session, "python", "-m", "perfgate", "ab", "--base", base, **required)
    finally:
        ab_verdict = f"A/B against {base} (decides): {_headline(RESULTS / 'ab.json')}"
        session.log(f"verdicts: {ab_verdict}; {stored_verdict}")


@nox.session(venv_params=EMPTY_VENV)
def triage(session: nox.Session) -> None:
    """After a red gate on main: bisect each regression on this GPU and name its culprit
    (``perfgate triage``; the workflow runs it with ``--no-issues`` in the container)."""
    _skip_without_gpu(session, "triage")
    env = shared_env(session, "test", "perf")
    env.run(session, "python", "-m", "perfgate", "triage", *session.posargs, env=GPU_JOB_ENV)


@nox.session
def triage_issues(session: nox.Session) -> None:
    """Open or update the GitHub issues of a triage made in the container, which gets no token
    (``nox -s triage_issues -- TRIAGE.json``; GITHUB_TOKEN in the environment)."""
    _launcher(session)
    _run(session, "python", "-m", "perfgate", "triage", "--publish", *session.posargs)


@nox.session
def history(session: nox.Session) -> None:
    """``perfgate history`` on a runner's host, outside the container (``nox -s history -- add
    RESULTS.json ...``, ``-- migrate --to FILE``): a history server's URL is a secret the
    container never gets, so the GPU job appends its run and copies the history for the triage
    here. The suite without torch, with what the history commands need."""
    _launcher(session, "perf", "history")
    _run(session, "python", "-m", "perfgate", "history", *session.posargs)


@nox.session(venv_params=EMPTY_VENV)
def update_baselines(session: nox.Session) -> None:
    """Rewrite this device's baselines (``-- --isa`` rewrites the static ISA baselines instead)."""
    isa_only = "--isa" in session.posargs
    if isa_only:
        # The same env and compiler as `nox -s isa`, which checks what this writes.
        env = shared_env(session, "test", "perf", "isa", kind="cpu")
        _check_isa_triton(session, env)
    else:
        if not _has_gpu():
            _refuse(session, _no_gpu_message("update_baselines") + "; no baseline written")
        env = shared_env(session, "test", "perf")
    env.run(session, "python", "-m", "perfgate", "update-baselines", *session.posargs)


def _launcher(session: nox.Session, *extras: str) -> None:
    """The suite without its dependencies (and ``extras``): what runs on a GPU runner's host,
    where torch and triton are the image's and never downloaded."""
    isolation = ["--no-build-isolation"] if _in_place(session) else []
    _pip(session, "--no-deps", *isolation, "-e", ".")
    if extras:
        _pip(session, *_extra_requirements(*extras))


# What the nightly mutation run must keep: docs/measurements.md ("Mutation") explains each survivor.
MUTATION_FLOORS = (
    "perfgate.gate.process_ab=95",
    "perfgate.history.steps=95",
    "perfgate.spawn=90",
)


@nox.session(venv_params=EMPTY_VENV)
def mutate(session: nox.Session) -> None:
    """mutmut on perfgate/gate, perfgate/history, perfgate/hunt, perfgate/spawn.py and
    kernels/gemm.py, then the score of each (nightly; ``-- 'perfgate.gate.process_ab*'`` runs
    only the mutants that glob names)."""
    env = shared_env(session, "test", "perf", "history", "mutate", kind="cpu")
    env.run(session, "mutmut", "run", *session.posargs)
    # the floors hold for a whole run; a narrowed one is scored, not judged
    floors = [] if session.posargs else [f"--fail-under={floor}" for floor in MUTATION_FLOORS]
    env.run(session, "python", "-m", "tools.mutation_score", *floors)


@nox.session
def container(session: nox.Session) -> None:
    """Build the ROCm image with the Docker SDK and run ``nox --no-venv -s <session>`` inside."""
    _launcher(session, "container")
    _run(session, "python", "-m", "perfgate", "container", *session.posargs)


@nox.session
def container_rehearsal(session: nox.Session) -> None:
    """docker/Dockerfile on a local Debian stand-in for the ROCm base (no registry, no GPU), then
    the CPU test session inside."""
    _launcher(session, "container")
    rehearsal = ["--stand-in-base", "--allow-no-gpu", "test"]
    _run(session, "python", "-m", "perfgate", "container", *rehearsal, *session.posargs)
