"""``python -m perfgate container [options] [--] SESSION [ARGS...]``: a nox session in the ROCm image.

Builds ``docker/Dockerfile`` with the Docker SDK (any Docker-API engine: Docker, or Podman's
``podman system service``), then runs ``nox --no-venv -s SESSION -- ARGS`` inside it with the AMD
GPU passed through: ``/dev/kfd`` and ``/dev/dri``, the host's numeric ``video`` and ``render``
group ids, ``seccomp=unconfined`` and the host IPC namespace (PyTorch's shared memory).

The repository is bind-mounted read-write at ``/workspace``, so results (``.perfgate/results``,
rewritten baselines) land in the checkout directly: nothing needs copying back. The image's
entrypoint then hands files it created back to the calling user (``PERFGATE_HOST_UID/GID``).
Caches (Triton, torch extensions, pip) live on a named volume mounted at ``/cache``.

``build_run_spec`` is a pure function from facts to the keyword arguments of
``client.containers.run``: the unit tests check it without an engine.
"""

from __future__ import annotations

import argparse
import os
import sys

from perfgate import container


def _run(args: argparse.Namespace) -> int:
    try:
        if args.stand_in_base and args.base_image:
            raise container.ContainerError(
                "--stand-in-base and --base-image each name the base: give one"
            )
        gpu = None if args.allow_no_gpu else container.host_gpu_access()
        repo = container.repo_root()
        base_image = (
            container.standin_tag(container.standin_files(repo))
            if args.stand_in_base
            else args.base_image
        )
        image = container.image_tag(args.image, base_image)
        command = (
            ["perfgate-gpu-check"]
            if args.check_gpu
            else container.nox_command(args.session, args.args)
        )
        environment = container.container_environment(
            os.environ,
            host_uid=os.getuid(),
            host_gid=os.getgid(),
            skip_gpu_check=args.allow_no_gpu,
        )
        spec = container.build_run_spec(
            image=image,
            repo=repo,
            command=command,
            environment=environment,
            gpu=gpu,
            cache_volume=args.cache_volume
            or (
                container.STANDIN_CACHE_VOLUME
                if args.stand_in_base
                else container.DEFAULT_CACHE_VOLUME
            ),
        )
        client = container.connect_engine()
        if not args.no_build:
            if args.stand_in_base:
                base_image = container.build_standin(client, repo)
            buildargs = {"BASE_IMAGE": base_image} if base_image else {}
            container.build_image(client, repo, image, buildargs=buildargs)
        print(f"perfgate container: {' '.join(command)} in {image}", flush=True)
        return container.run_container(client, spec)
    except (container.ContainerError, ValueError) as exc:
        print(f"perfgate container: {exc}", file=sys.stderr)
        return container.EXIT_SETUP
    except Exception as exc:
        # The engine refused the container (docker.errors.APIError and friends): one line, not
        # a traceback, and the setup exit status so CI does not read it as a test failure.
        if type(exc).__module__.startswith("docker."):
            print(f"perfgate container: the engine refused: {exc}", file=sys.stderr)
            return container.EXIT_SETUP
        raise


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "container",
        help="run a nox session inside the ROCm gfx950 image",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--image",
        help=f"image tag to build and run (default {container.DEFAULT_IMAGE}; on another base, "
        f"{container.DEFAULT_IMAGE.split(':')[0]}:on-<base>)",
    )
    parser.add_argument("--no-build", action="store_true", help="run the existing image as is")
    parser.add_argument(
        "--base-image",
        help="build on another base image, e.g. another rocm/pytorch ROCm/torch pair",
    )
    parser.add_argument(
        "--stand-in-base",
        action="store_true",
        help="build on a local Debian stand-in for the ROCm base (CPU torch and triton, made "
        "from Debian packages and PyPI, reused while docker/standin/ is unchanged): rehearses "
        "every layer but the base where the ROCm registry cannot be reached; with --allow-no-gpu",
    )
    parser.add_argument(
        "--cache-volume",
        help=f"named volume for the Triton/extension/pip caches (default {container.DEFAULT_CACHE_VOLUME}; "
        f"with --stand-in-base, {container.STANDIN_CACHE_VOLUME})",
    )
    parser.add_argument(
        "--check-gpu",
        action="store_true",
        help="only run the image's GPU check (exit 0 when a gfx950 GPU is visible)",
    )
    parser.add_argument(
        "--allow-no-gpu",
        action="store_true",
        help="run without /dev/kfd and skip the image's GPU check (GPU-less sessions, testing)",
    )
    parser.add_argument("session", nargs="?", help="nox session to run inside (test, bench, ...)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the session")
    parser.set_defaults(func=_command)


def _command(args: argparse.Namespace) -> int:
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]
    if args.session is None and not args.check_gpu:
        print("perfgate container: name a nox session (or use --check-gpu)", file=sys.stderr)
        return container.EXIT_SETUP
    return _run(args)
