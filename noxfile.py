"""nox sessions of the MXFP4 GEMM regression suite.

Every session is small and passes ``session.posargs`` through. ``nox --no-venv -s SESSION``
runs in the current environment (the ROCm container, a GPU box with torch and triton already
installed) and installs nothing into it except the suite itself in editable mode.

On a machine without a GPU, ``test`` builds a virtualenv with the CPU build of torch 2.13.0 and
triton >= 3.8, whose interpreter (``TRITON_INTERPRET=1``) runs ``tl.dot_scaled``.
"""

from __future__ import annotations

import os
import shutil
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

# The CPU build of torch 2.13.0 is what these machines cache; an unpinned torch pulls a
# multi-gigabyte CUDA build. Triton >= 3.8 is the first whose interpreter runs dot_scaled.
CPU_TORCH = "torch==2.13.0"
CPU_TRITON = "triton>=3.8,<3.10"
# The static ISA baselines are compiler output: they are made with, and checked against, exactly
# this triton (on the H200, triton 3.6 changed spills and LDS of several sm90 configs).
ISA_TRITON = "triton==3.9.0"


def _has_gpu() -> bool:
    return bool(shutil.which("nvidia-smi") or os.path.exists("/dev/kfd"))


def _extra_requirements(*extras: str) -> list[str]:
    """The requirements of the given optional-dependency groups, read from pyproject.toml."""
    with open("pyproject.toml", "rb") as f:
        optional = tomllib.load(f)["project"]["optional-dependencies"]
    return [req for extra in extras for req in optional[extra]]


def _pip(session: nox.Session, *args: str) -> None:
    """pip install into the session's venv, or into the current environment under --no-venv
    (where nox forbids session.install)."""
    if session.venv_backend == "none":
        session.run("python", "-m", "pip", "install", *args)
    else:
        session.install(*args)


def _install(
    session: nox.Session, *extras: str, with_torch: bool = True, triton: str = CPU_TRITON
) -> None:
    """Install the suite (editable) and the requirements of ``extras``.

    In a fresh venv on a machine without a GPU, the CPU build of torch and a triton whose
    interpreter runs dot_scaled come first. Under ``--no-venv`` the environment owns torch and
    triton (the ROCm container ships triton under another distribution name, and GPU boxes may be
    offline), so the suite goes in without resolving dependencies or fetching a build backend.
    ``with_torch=False`` is for host-side launchers that never import torch.
    """
    in_place = session.venv_backend == "none"
    if with_torch and not in_place and not _has_gpu():
        _pip(session, CPU_TORCH, triton)
    if in_place:
        _pip(session, "--no-deps", "--no-build-isolation", "-e", ".")
    else:
        _pip(session, *([] if with_torch else ["--no-deps"]), "-e", ".")
    if extras:
        _pip(session, *_extra_requirements(*extras))


@nox.session
def test(session: nox.Session) -> None:
    """Correctness tests (everything but benchmarks). On a CPU, Triton runs in its interpreter."""
    # In place (--no-venv: the ROCm image, a GPU box), only the test and perf extras: the Docker
    # SDK and ziglang tests skip with their reason where those are not installed.
    extras = (
        ("test", "perf") if session.venv_backend == "none" else ("test", "perf", "container", "isa")
    )
    _install(session, *extras)
    session.run("pytest", "-m", "not bench", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format check), hadolint on the Dockerfile, actionlint and check-jsonschema on
    the workflows."""
    session.install(*_extra_requirements("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("hadolint", "docker/Dockerfile")
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


@nox.session
def build(session: nox.Session) -> None:
    """Build the native split-K reducer ahead of time (hipcc on ROCm, nvcc on CUDA)."""
    _install(session)
    session.run("python", "-m", "kernels.reducer.build", *session.posargs)


@nox.session
def isa(session: nox.Session) -> None:
    """Static gate for every target that compiles on a CPU: compile every shipped config and
    compare with the baseline."""
    _install(session, "perf", "isa", triton=ISA_TRITON)
    from_registry = "from perfgate.isa.collect import TARGETS; print(' '.join(TARGETS))"
    targets = session.run("python", "-c", from_registry, silent=True).split()
    for target in targets:
        session.run(
            "python",
            "-m",
            "perfgate",
            "isa",
            "--target",
            target,
            "--check",
            f"perf_baselines/isa/{target}.json",
            *session.posargs,
        )


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmark on this GPU and gate against this device's stored baseline (no GPU: exit 0)."""
    _install(session, "test", "perf")
    session.run("python", "-m", "perfgate", "bench", *session.posargs)


@nox.session
def update_baselines(session: nox.Session) -> None:
    """Rewrite this device's baselines (``-- --isa`` rewrites the static ISA baselines instead)."""
    # ziglang only for --isa: GPU boxes that refresh timing baselines may be offline without it
    _install(session, "test", "perf", *(("isa",) if "--isa" in session.posargs else ()))
    session.run("python", "-m", "perfgate", "update-baselines", *session.posargs)


@nox.session
def container(session: nox.Session) -> None:
    """Build the ROCm image with the Docker SDK and run ``nox --no-venv -s <session>`` inside."""
    # Only the launcher runs on the host: torch and triton are the image's, so the runner never
    # downloads a multi-GB torch.
    _install(session, "container", with_torch=False)
    session.run("python", "-m", "perfgate.container", *session.posargs)
