"""The ROCm container: image builds (Docker SDK, any Docker-API engine), the run spec, the local
Debian stand-in base, and a run that ends with the container's exit status.

``build_run_spec`` is a pure function from facts to the keyword arguments of
``client.containers.run``: the unit tests check it without an engine. The command is
``python -m perfgate container`` (:mod:`perfgate.commands.container`).
"""

from __future__ import annotations

import grp
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

DEFAULT_IMAGE = "mxfp4-gemm-suite:rocm-gfx950"
DEFAULT_CACHE_VOLUME = "mxfp4-gemm-suite-cache"
DOCKERFILE = "docker/Dockerfile"
# How long the log stream may run on after the container exited (the output still in flight)
LOG_DRAIN_S = 10.0
WORKSPACE = "/workspace"
CACHE_DIR = "/cache"
GPU_DEVICES = ("/dev/kfd", "/dev/dri")
GPU_GROUPS = ("video", "render")
EXIT_SETUP = 2  # could not get as far as running the session

# Host variables the session inside needs. GITHUB_* are passed too (commit, run id and ref for
# the result fingerprint and report), except the ones naming host paths or secrets.
PASSTHROUGH = (
    "CI",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "PYTEST_ADDOPTS",
)
PASSTHROUGH_PREFIXES = ("PERFGATE_", "MXFP4_", "GITHUB_")
NOT_PASSED = frozenset(
    {
        "GITHUB_TOKEN",
        "GITHUB_ENV",
        "GITHUB_OUTPUT",
        "GITHUB_PATH",
        "GITHUB_STATE",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_EVENT_PATH",
        "GITHUB_WORKSPACE",
        "GITHUB_ACTION_PATH",
        # the history server's URL holds its password; the container reads a copy of the history
        # the runner exported (docs/history.md, "A history server")
        "PERFGATE_HISTORY_URL",
        # Set by this module for the entrypoint; a host value must not override it.
        "PERFGATE_HOST_UID",
        "PERFGATE_HOST_GID",
    }
)


class ContainerError(Exception):
    """The session cannot be started; the message says why and what to do."""


@dataclass(frozen=True)
class GpuAccess:
    """What the container needs from the host to reach its AMD GPUs."""

    devices: tuple[str, ...]
    group_ids: tuple[int, ...]


def host_gpu_access(
    exists: Callable[[str], bool] = os.path.exists,
    getgrnam: Callable[[str], Any] = grp.getgrnam,
) -> GpuAccess:
    """The GPU device nodes and the numeric ids of the groups that own them on this host.

    Numeric ids, because the image's ``/etc/group`` need not agree with the host's: ``render``
    in particular has a different id on every distribution.
    """
    missing = [dev for dev in GPU_DEVICES if not exists(dev)]
    if missing:
        raise ContainerError(
            f"{' and '.join(missing)} missing on this host: the ROCm container needs an AMD GPU "
            "with the amdgpu driver loaded (use --allow-no-gpu only to test the container itself)"
        )
    ids = []
    for name in GPU_GROUPS:
        try:
            ids.append(int(getgrnam(name).gr_gid))
        except KeyError:
            raise ContainerError(
                f"this host has no {name!r} group: ROCm needs the group that owns /dev/kfd and "
                f"/dev/dri/renderD* (create it, e.g. `groupadd -r {name}`, and let udev own the "
                "devices by it)"
            ) from None
    return GpuAccess(devices=GPU_DEVICES, group_ids=tuple(ids))


def container_environment(
    environ: Mapping[str, str], *, host_uid: int, host_gid: int, skip_gpu_check: bool
) -> dict[str, str]:
    """The variables passed into the container (sorted, for stable specs and logs)."""
    env = {
        name: value
        for name, value in environ.items()
        if (name in PASSTHROUGH or name.startswith(PASSTHROUGH_PREFIXES)) and name not in NOT_PASSED
    }
    env["PERFGATE_HOST_UID"] = str(host_uid)
    env["PERFGATE_HOST_GID"] = str(host_gid)
    env["PERFGATE_IN_CONTAINER"] = "1"
    # git (for the commit in result fingerprints) refuses a repository owned by another user
    # unless it is declared safe; root inside the container is "another user".
    env["GIT_CONFIG_COUNT"] = "1"
    env["GIT_CONFIG_KEY_0"] = "safe.directory"
    env["GIT_CONFIG_VALUE_0"] = WORKSPACE
    if skip_gpu_check:
        env["PERFGATE_SKIP_GPU_CHECK"] = "1"
    return dict(sorted(env.items()))


def nox_command(session: str, posargs: Iterable[str]) -> list[str]:
    """``nox --no-venv -s SESSION [-- ARGS]``: the image's torch and triton, no virtualenv."""
    if not session or session.startswith("-"):
        raise ValueError(f"session must be a nox session name, got {session!r}")
    posargs = list(posargs)
    return ["nox", "--no-venv", "-s", session, *(["--", *posargs] if posargs else [])]


def build_run_spec(
    *,
    image: str,
    repo: Path,
    command: list[str],
    environment: Mapping[str, str],
    gpu: GpuAccess | None,
    cache_volume: str = DEFAULT_CACHE_VOLUME,
) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.run`` (detached; the caller streams the logs).

    ``gpu=None`` (``--allow-no-gpu``) leaves the devices and groups out and nothing else.
    """
    if not repo.is_absolute():
        raise ValueError(f"repo must be an absolute path, got {str(repo)!r}")
    devices = [f"{dev}:{dev}:rwm" for dev in gpu.devices] if gpu else []
    group_add = [str(gid) for gid in gpu.group_ids] if gpu else []
    return {
        "image": image,
        "command": list(command),
        "devices": devices,
        "group_add": group_add,
        "security_opt": ["seccomp=unconfined"],
        # The host IPC namespace gives PyTorch the host's /dev/shm (the 64 MB default is too
        # small for its shared-memory tensors and RCCL).
        "ipc_mode": "host",
        "volumes": {
            str(repo): {"bind": WORKSPACE, "mode": "rw"},
            cache_volume: {"bind": CACHE_DIR, "mode": "rw"},
        },
        "working_dir": WORKSPACE,
        "environment": dict(environment),
        "detach": True,
    }


def build_image(
    client: Any,
    repo: Path,
    tag: str,
    *,
    dockerfile: str = DOCKERFILE,
    buildargs: Mapping[str, str] | None = None,
    out: TextIO | None = None,
) -> None:
    """Build ``dockerfile`` (relative to ``repo``, the build context) as ``tag``, streaming the log.

    The low-level ``client.api.build`` streams; ``client.images.build`` would print nothing until
    the (long, first-time) base-image pull and install are over.
    """
    out = out or sys.stdout
    for chunk in client.api.build(
        path=str(repo),
        dockerfile=dockerfile,
        tag=tag,
        buildargs=dict(buildargs or {}),
        rm=True,
        forcerm=True,
        decode=True,
    ):
        if "error" in chunk:
            raise ContainerError(
                f"building {tag} from {dockerfile} failed: {chunk['error'].strip()}"
            )
        text = chunk.get("stream") or chunk.get("status")
        if text:
            out.write(text if text.endswith("\n") else text + "\n")
            out.flush()


def run_container(client: Any, spec: Mapping[str, Any], *, out: TextIO | None = None) -> int:
    """Start the container, stream its output, remove it, and return its exit status.

    Created and started in two steps (what ``containers.run`` does in one) so that a container
    whose start fails (a device the engine cannot map, say) is removed too.
    """
    out = out or sys.stdout
    container = client.containers.create(**spec)
    try:
        container.start()
        logs = container.logs(stream=True, follow=True)

        def pump() -> None:
            for chunk in logs:
                out.write(chunk.decode("utf-8", errors="replace"))
                out.flush()

        pumping = threading.Thread(target=pump, daemon=True)
        pumping.start()
        status = int(container.wait()["StatusCode"])
        # The engine ends the log stream when the container exits; Podman's Docker API at times
        # does not (seen in CI: a follow stream open 15 minutes after its container exited), so
        # the exit status, not the stream, ends the run.
        pumping.join(timeout=LOG_DRAIN_S)
        if pumping.is_alive():
            logs.close()
        return status
    finally:
        container.remove(force=True)  # also stops it after Ctrl-C


def image_tag(image: str | None, base_image: str | None) -> str:
    """The tag to build and run: ``--image``, else one named after ``--base-image`` (so that a
    build on another base never overwrites the ROCm image's tag), else the default."""
    if image:
        return image
    if not base_image:
        return DEFAULT_IMAGE
    name = DEFAULT_IMAGE.split(":", 1)[0]
    tag = "on-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", base_image)
    if len(tag) > 128:  # the longest tag an engine accepts
        tag = f"{tag[:111]}-{hashlib.sha256(base_image.encode()).hexdigest()[:16]}"
    return f"{name}:{tag}"


# ---- the stand-in base ------------------------------------------------------------------------
# docker/Dockerfile built on a local Debian base with the CPU builds of torch and triton, where
# the ROCm base cannot be pulled: every layer but the base is then built and run for real.

STANDIN_RECIPE = "docker/standin"
STANDIN_REPOSITORY = "localhost/mxfp4-gemm-suite-standin"
# Its own caches: what the CPU stand-in compiles must never be found by a run on the ROCm image.
STANDIN_CACHE_VOLUME = "mxfp4-gemm-suite-cache-stand-in"
# Debian 12, whose python3 (CPython 3.11) is the interpreter the CPU torch wheel is built for.
STANDIN_SUITE = "bookworm"
STANDIN_MIRROR = "http://deb.debian.org/debian"
STANDIN_WHEELS_FOR = (
    "--python-version=3.11",
    "--implementation=cp",
    "--abi=cp311",
    "--platform=manylinux_2_28_x86_64",
)
# Authorities this host trusts beyond Debian's own (a TLS-inspecting proxy's, say): the stand-in
# trusts them too, or pip inside it could not reach PyPI from where the host can.
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")


def standin_files(repo: Path, ca_dir: Path = LOCAL_CA_DIR) -> dict[str, bytes]:
    """The stand-in's build-context files (path in the context: content) but the two that are
    made from them, ``rootfs.tar`` and the wheels."""
    recipe = repo / STANDIN_RECIPE
    files = {
        "Dockerfile": (recipe / "Dockerfile").read_bytes(),
        "debian-packages.txt": (recipe / "debian-packages.txt").read_bytes(),
        "wheels/requirements.txt": (recipe / "requirements.txt").read_bytes(),
    }
    if ca_dir.is_dir():
        for cert in sorted(ca_dir.glob("*.crt")):
            files[f"local-ca/{cert.name}"] = cert.read_bytes()
    return files


def standin_tag(files: Mapping[str, bytes]) -> str:
    """The stand-in's tag: a digest of everything it is made from, so that an unchanged recipe
    reuses the image built before and a changed one builds a new image."""
    digest = hashlib.sha256()
    for part in (STANDIN_SUITE, STANDIN_MIRROR, *STANDIN_WHEELS_FOR):
        digest.update(part.encode() + b"\0")
    for name, content in sorted(files.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return f"{STANDIN_REPOSITORY}:{digest.hexdigest()[:16]}"


def debian_packages(text: str) -> list[str]:
    """The package names of ``debian-packages.txt`` (one a line, ``#`` comments)."""
    names = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [name for name in names if name]


def standin_steps(packages: list[str], context: Path, python: str) -> list[tuple[str, list[str]]]:
    """(what, command) for the two files made on the host: the Debian root file system and the
    wheels, which the host's pip downloads for the stand-in's Python (it finds the CPU torch
    where this host's pip configuration points)."""
    return [
        (
            "mmdebstrap: the Debian root file system",
            [
                "mmdebstrap",
                "--variant=minbase",
                f"--include={','.join(packages)}",
                STANDIN_SUITE,
                str(context / "rootfs.tar"),
                STANDIN_MIRROR,
            ],
        ),
        (
            "pip download: torch and triton",
            [
                python,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--only-binary=:all:",
                *STANDIN_WHEELS_FOR,
                f"--dest={context / 'wheels'}",
                "--requirement",
                str(context / "wheels" / "requirements.txt"),
            ],
        ),
    ]


def run_step(what: str, command: list[str], out: TextIO) -> None:
    """Run one step, streaming its output; ContainerError naming the step if it fails.

    In a process group of its own, killed whole if this process is interrupted: mmdebstrap's apt
    and dpkg children never outlive the command.
    """
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise ContainerError(f"{what}: cannot run {command[0]}: {exc}") from None
    last = ""
    try:
        for line in proc.stdout:
            out.write(line)
            last = line.strip() or last
        status = proc.wait()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    if status != 0:
        raise ContainerError(f"{what} failed (exit {status}): {last}")


def build_standin(
    client: Any,
    repo: Path,
    *,
    out: TextIO | None = None,
    ca_dir: Path = LOCAL_CA_DIR,
    python: str = sys.executable,
) -> str:
    """Build the stand-in base unless an image of its recipe exists; its tag."""
    out = out or sys.stdout
    files = standin_files(repo, ca_dir)
    tag = standin_tag(files)
    if client.images.list(name=tag):
        out.write(f"stand-in base up to date: {tag}\n")
        return tag
    if shutil.which("mmdebstrap") is None:
        raise ContainerError(
            "the stand-in base is made from Debian packages by mmdebstrap, which is not "
            "installed (apt-get install mmdebstrap)"
        )
    # The context (about 1 GB) is deleted however this ends; the tag exists only once the
    # build has committed, so an interrupted build leaves nothing that looks finished.
    with tempfile.TemporaryDirectory(prefix="mxfp4-standin-") as tmp:
        context = Path(tmp)
        (context / "local-ca").mkdir()
        for name, content in files.items():
            (context / name).parent.mkdir(parents=True, exist_ok=True)
            (context / name).write_bytes(content)
        packages = debian_packages(files["debian-packages.txt"].decode())
        for what, command in standin_steps(packages, context, python):
            out.write(f"stand-in base: {what}\n")
            out.flush()
            run_step(what, command, out)
        build_image(client, context, tag, dockerfile="Dockerfile", out=out)
    return tag


def repo_root() -> Path:
    # perfgate/ sits at the repository root; the Dockerfile path is relative to it.
    return Path(__file__).resolve().parent.parent


def docker_sdk() -> Any:
    """The Docker SDK module, or a ContainerError saying it is missing.

    A plain ``import docker`` is not enough: run from the repository root, it finds this
    repository's ``docker/`` folder as a namespace package when the SDK is not installed.
    """
    try:
        import docker  # the `container` extra; imported here so `--help` needs no Docker SDK
    except ImportError:
        docker = None
    if docker is None or not hasattr(docker, "from_env"):
        raise ContainerError(
            "the Docker SDK for Python is not installed (pip install docker: the `container` extra)"
        )
    return docker


# The Docker SDK's socket when DOCKER_HOST is unset, and how to get an engine without Docker.
DEFAULT_DOCKER_SOCKET = "unix:///var/run/docker.sock"
PODMAN_HINT = (
    "start Docker, or Podman's Docker-API service with `bash docker/podman-service.sh` "
    "and export DOCKER_HOST=unix:///tmp/podman.sock"
)


def engine_unreachable(exc: BaseException) -> str:
    """One line: which socket was tried, why it failed (first line of the SDK's error), and how
    to start an engine. Shared by the command and the tests' skip reason."""
    host = os.environ.get("DOCKER_HOST")
    where = host if host else f"{DEFAULT_DOCKER_SOCKET} (DOCKER_HOST is unset)"
    reason = (str(exc).strip().splitlines() or [""])[0]
    return (
        f"no Docker-API engine reachable at {where} ({type(exc).__name__}: {reason}); {PODMAN_HINT}"
    )


def connect_engine() -> Any:
    docker = docker_sdk()
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise ContainerError(engine_unreachable(exc)) from exc
    return client
