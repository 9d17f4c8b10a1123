"""``python -m perfgate container``: the run specification, the GPU preconditions, the image's GPU
check, and a real build and run on a Docker-API engine where one is reachable.

The real-engine tests build a tiny image FROM scratch holding one static C program installed as
``nox``: it reports what the container saw (argv, cwd, groups, devices, environment) and writes
into the bind-mounted repository and the cache volume, so the whole path, from the spec to the
exit status, runs for real without a network or a GPU. Point them at an engine with
``DOCKER_HOST`` (``bash docker/podman-service.sh`` starts one from Debian's podman).
"""

from __future__ import annotations

import ast
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfgate import container
from perfgate.container import (
    ContainerError,
    GpuAccess,
    build_run_spec,
    container_environment,
    host_gpu_access,
    nox_command,
)

REPO = Path(__file__).resolve().parents[2]


def _require_sdk():
    """The Docker SDK, or a skip naming what is missing (perfgate.container.docker_sdk decides)."""
    try:
        return container.docker_sdk()
    except container.ContainerError as exc:
        pytest.skip(str(exc))


def _group(gid: int) -> SimpleNamespace:
    return SimpleNamespace(gr_gid=gid)


# ---- host preconditions ---------------------------------------------------------------------


def test_gpu_access_uses_numeric_ids_of_video_and_render() -> None:
    groups = {"video": _group(44), "render": _group(992)}
    access = host_gpu_access(exists=lambda path: True, getgrnam=groups.__getitem__)
    assert access == GpuAccess(devices=("/dev/kfd", "/dev/dri"), group_ids=(44, 992))


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        ({"/dev/dri"}, "/dev/kfd"),  # no amdgpu KFD: the usual "no AMD GPU" host
        ({"/dev/kfd"}, "/dev/dri"),  # KFD without render nodes: cannot submit work
        (set(), "/dev/kfd and /dev/dri"),
    ],
)
def test_missing_device_is_a_clear_error(present: set[str], missing: str) -> None:
    def getgrnam(name: str):
        raise AssertionError("groups must not be looked up when a device is missing")

    with pytest.raises(ContainerError, match=f"^{missing} missing on this host"):
        host_gpu_access(exists=present.__contains__, getgrnam=getgrnam)


@pytest.mark.parametrize("absent", ["video", "render"])
def test_missing_group_is_a_clear_error(absent: str) -> None:
    groups = {"video": _group(44), "render": _group(992)}
    del groups[absent]
    with pytest.raises(ContainerError, match=f"no '{absent}' group"):
        host_gpu_access(exists=lambda path: True, getgrnam=groups.__getitem__)


def test_cli_without_kfd_exits_2_before_touching_an_engine(monkeypatch, capsys) -> None:
    # A Docker host that cannot be reached: if the command got as far as the engine the error
    # would be about the engine, not about /dev/kfd.
    if os.path.exists("/dev/kfd"):
        pytest.skip("this machine has /dev/kfd")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert _cli(["test"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfgate container: /dev/kfd")
    assert "missing on this host" in err
    assert "--allow-no-gpu" in err


def test_cli_needs_a_session(capsys) -> None:
    assert _cli([]) == 2
    assert "name a nox session" in capsys.readouterr().err


def test_cli_reports_an_unreachable_engine(monkeypatch, capsys) -> None:
    _require_sdk()
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert _cli(["--allow-no-gpu", "--no-build", "test"]) == 2
    assert (
        "no Docker-API engine reachable at unix:///nonexistent/docker.sock"
        in capsys.readouterr().err
    )


# ---- the run specification ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "posargs", "expected"),
    [
        ("test", [], ["nox", "--no-venv", "-s", "test"]),
        (
            "test",
            ["-n", "8", "-k", "gemm"],
            ["nox", "--no-venv", "-s", "test", "--", "-n", "8", "-k", "gemm"],
        ),
        # A posarg that looks like an option must still reach the session, after "--".
        (
            "bench",
            ["--suite", "device"],
            ["nox", "--no-venv", "-s", "bench", "--", "--suite", "device"],
        ),
    ],
)
def test_nox_command(session: str, posargs: list[str], expected: list[str]) -> None:
    assert nox_command(session, posargs) == expected


@pytest.mark.parametrize("session", ["", "-s", "--no-venv"])
def test_nox_command_rejects_non_session(session: str) -> None:
    with pytest.raises(ValueError, match="session must be a nox session name"):
        nox_command(session, [])


def test_environment_passes_what_the_session_needs_and_nothing_else() -> None:
    host = {
        "CI": "true",
        "PERFGATE_REQUIRE_GPU": "1",
        "MXFP4_REQUIRE_NATIVE_REDUCER": "1",
        "HIP_VISIBLE_DEVICES": "0,1",
        "GITHUB_SHA": "abc123",
        "GITHUB_RUN_ID": "42",
        # host paths and secrets stay outside
        "GITHUB_STEP_SUMMARY": "/home/runner/_work/_temp/summary",
        "GITHUB_TOKEN": "ghs_secret",
        "PERFGATE_HISTORY_URL": "postgresql://runner:secret@db/perf",
        "GITHUB_WORKSPACE": "/home/runner/_work/repo",
        "PERFGATE_HOST_UID": "0",  # must not override the real uid
        # unrelated host state
        "HOME": "/root",
        "PATH": "/usr/bin",
        "LD_LIBRARY_PATH": "/opt/host/lib",
    }
    env = container_environment(host, host_uid=1001, host_gid=1002, skip_gpu_check=False)
    assert env == {
        "CI": "true",
        "GITHUB_RUN_ID": "42",
        "GITHUB_SHA": "abc123",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "/workspace",
        "HIP_VISIBLE_DEVICES": "0,1",
        "MXFP4_REQUIRE_NATIVE_REDUCER": "1",
        "PERFGATE_HOST_GID": "1002",
        "PERFGATE_HOST_UID": "1001",
        "PERFGATE_IN_CONTAINER": "1",
        "PERFGATE_REQUIRE_GPU": "1",
    }


def test_environment_skip_gpu_check_only_when_asked() -> None:
    assert "PERFGATE_SKIP_GPU_CHECK" not in container_environment(
        {}, host_uid=1, host_gid=1, skip_gpu_check=False
    )
    env = container_environment({}, host_uid=1, host_gid=1, skip_gpu_check=True)
    assert env["PERFGATE_SKIP_GPU_CHECK"] == "1"


def test_run_spec_for_an_amd_gpu(tmp_path: Path) -> None:
    spec = build_run_spec(
        image="img:tag",
        repo=tmp_path,
        command=["nox", "--no-venv", "-s", "test"],
        environment={"CI": "true"},
        gpu=GpuAccess(devices=("/dev/kfd", "/dev/dri"), group_ids=(44, 992)),
        cache_volume="cachevol",
    )
    assert spec == {
        "image": "img:tag",
        "command": ["nox", "--no-venv", "-s", "test"],
        "devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"],
        "group_add": ["44", "992"],
        "security_opt": ["seccomp=unconfined"],
        "ipc_mode": "host",
        "volumes": {
            str(tmp_path): {"bind": "/workspace", "mode": "rw"},
            "cachevol": {"bind": "/cache", "mode": "rw"},
        },
        "working_dir": "/workspace",
        "environment": {"CI": "true"},
        "detach": True,
    }


def test_run_spec_without_gpu_drops_only_devices_and_groups(tmp_path: Path) -> None:
    common = {"image": "i", "repo": tmp_path, "command": ["nox"], "environment": {}}
    with_gpu = build_run_spec(**common, gpu=GpuAccess(("/dev/kfd",), (44,)))
    without = build_run_spec(**common, gpu=None)
    assert without["devices"] == [] and without["group_add"] == []
    assert {k: v for k, v in with_gpu.items() if k not in ("devices", "group_add")} == {
        k: v for k, v in without.items() if k not in ("devices", "group_add")
    }


def test_run_spec_needs_an_absolute_repo() -> None:
    with pytest.raises(ValueError, match="repo must be an absolute path"):
        build_run_spec(image="i", repo=Path("rel"), command=["nox"], environment={}, gpu=None)


def test_build_error_is_reported() -> None:
    class FakeApi:
        def build(self, **kwargs):
            assert kwargs["dockerfile"] == "docker/Dockerfile" and kwargs["decode"] is True
            assert kwargs["buildargs"] == {"BASE_IMAGE": "rocm/pytorch:other"}
            yield {"stream": "Step 1/2 : FROM x\n"}
            yield {"error": "pull access denied for x\n"}

    out = io.StringIO()
    with pytest.raises(ContainerError, match=r"failed: pull access denied for x$"):
        container.build_image(
            SimpleNamespace(api=FakeApi()),
            REPO,
            "t:1",
            buildargs={"BASE_IMAGE": "rocm/pytorch:other"},
            out=out,
        )
    assert out.getvalue() == "Step 1/2 : FROM x\n"


class _FakeContainer:
    def __init__(self, fail_start: bool) -> None:
        self.fail_start = fail_start
        self.removed = False

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError("error gathering device information")

    def logs(self, stream: bool, follow: bool):
        assert stream and follow  # output is streamed while the session runs
        yield b"line 1\n"
        yield b"line \xff2\n"  # undecodable bytes must not kill the log stream

    def wait(self) -> dict:
        return {"StatusCode": 7}

    def remove(self, force: bool) -> None:
        assert force
        self.removed = True


def _fake_client(fake: _FakeContainer, seen: dict) -> SimpleNamespace:
    def create(**kwargs):
        seen.update(kwargs)
        return fake

    return SimpleNamespace(containers=SimpleNamespace(create=create))


def test_run_container_streams_returns_status_and_removes(tmp_path: Path) -> None:
    fake, seen, out = _FakeContainer(fail_start=False), {}, io.StringIO()
    spec = build_run_spec(image="i", repo=tmp_path, command=["nox"], environment={}, gpu=None)
    assert container.run_container(_fake_client(fake, seen), spec, out=out) == 7
    assert seen == spec
    assert out.getvalue() == "line 1\nline \ufffd2\n"
    assert fake.removed


def test_run_container_removes_a_container_that_failed_to_start(tmp_path: Path) -> None:
    fake = _FakeContainer(fail_start=True)
    spec = build_run_spec(image="i", repo=tmp_path, command=["nox"], environment={}, gpu=None)
    with pytest.raises(RuntimeError, match="device information"):
        container.run_container(_fake_client(fake, {}), spec, out=io.StringIO())
    assert fake.removed


class _HangingLogs:
    """A follow stream that the engine never ends (Podman at times), until it is closed."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def __iter__(self):
        yield b"line 1\n"
        self.closed.wait(30)

    def close(self) -> None:
        self.closed.set()


def test_run_container_ends_with_the_container_not_with_its_log_stream(tmp_path, monkeypatch):
    monkeypatch.setattr(container, "LOG_DRAIN_S", 0.2)
    fake, out, logs = _FakeContainer(fail_start=False), io.StringIO(), _HangingLogs()
    fake.logs = lambda stream, follow: logs
    spec = build_run_spec(image="i", repo=tmp_path, command=["nox"], environment={}, gpu=None)
    started = time.monotonic()
    assert container.run_container(_fake_client(fake, {}), spec, out=out) == 7
    assert time.monotonic() - started < 10  # not the 30 s the stream would hang
    assert logs.closed.is_set() and fake.removed
    assert out.getvalue() == "line 1\n"


# ---- the stand-in base ----------------------------------------------------------------------

TAG_FORMAT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


@pytest.mark.parametrize(
    ("image", "base", "expected"),
    [
        ("mine:1", "rocm/pytorch:other", "mine:1"),  # an explicit --image always wins
        (None, None, container.DEFAULT_IMAGE),
        (
            None,
            "docker.io/rocm/pytorch:rocm7.1_ubuntu24.04_py3.12_pytorch_release_2.10.0",
            "mxfp4-gemm-suite:on-docker.io-rocm-pytorch-rocm7.1_ubuntu24.04_py3.12_pytorch_release_2.10.0",
        ),
        (
            None,
            "localhost/mxfp4-gemm-suite-standin:8afaeb69300de7de",
            "mxfp4-gemm-suite:on-localhost-mxfp4-gemm-suite-standin-8afaeb69300de7de",
        ),
        (None, "rocm/pytorch@sha256:ab12", "mxfp4-gemm-suite:on-rocm-pytorch-sha256-ab12"),
    ],
)
def test_image_tag_never_reuses_the_rocm_images_tag_for_another_base(image, base, expected):
    assert container.image_tag(image, base) == expected


def test_image_tag_of_long_bases_is_valid_and_distinct():
    bases = ["registry.example/" + "x" * 200 + suffix for suffix in (":a", ":b")]
    tags = [container.image_tag(None, base).split(":", 1)[1] for base in bases]
    assert all(TAG_FORMAT.fullmatch(tag) for tag in tags), tags
    assert tags[0] != tags[1]


def _recipe(root: Path) -> tuple[Path, Path]:
    recipe = root / "docker" / "standin"
    recipe.mkdir(parents=True)
    (recipe / "Dockerfile").write_text("FROM scratch\n")
    (recipe / "debian-packages.txt").write_text("python3\n")
    (recipe / "requirements.txt").write_text("torch==2.13.0+cpu\n")
    ca = root / "ca"
    ca.mkdir()
    return root, ca


def test_standin_files_are_the_recipe_and_the_hosts_extra_authorities(tmp_path):
    repo, ca = _recipe(tmp_path)
    (ca / "proxy.crt").write_text("PEM\n")
    (ca / "notes.txt").write_text("not a certificate\n")  # update-ca-certificates reads *.crt
    assert container.standin_files(repo, ca) == {
        "Dockerfile": b"FROM scratch\n",
        "debian-packages.txt": b"python3\n",
        "wheels/requirements.txt": b"torch==2.13.0+cpu\n",
        "local-ca/proxy.crt": b"PEM\n",
    }
    assert "local-ca/proxy.crt" not in container.standin_files(repo, tmp_path / "no-such-dir")


def test_standin_tag_follows_every_input_and_nothing_else(tmp_path):
    repo, ca = _recipe(tmp_path)
    recipe = repo / "docker" / "standin"

    def tag() -> str:
        return container.standin_tag(container.standin_files(repo, ca))

    first = tag()
    assert re.fullmatch(r"localhost/mxfp4-gemm-suite-standin:[0-9a-f]{16}", first)
    assert tag() == first  # nothing of the moment (time, paths) goes in
    seen = {first}
    for change in (
        lambda: (recipe / "Dockerfile").write_text("FROM scratch\nADD rootfs.tar /\n"),
        lambda: (recipe / "debian-packages.txt").write_text("python3\ngit\n"),
        lambda: (recipe / "requirements.txt").write_text("torch==2.13.0+cpu\ntriton==3.9.0\n"),
        lambda: (ca / "proxy.crt").write_text("PEM\n"),
        lambda: (ca / "proxy.crt").write_text("PEM 2\n"),
        lambda: (ca / "proxy.crt").rename(ca / "other.crt"),
    ):
        change()
        seen.add(tag())
    assert len(seen) == 7  # each change gave a tag of its own
    (ca / "other.crt").unlink()
    (ca / "unrelated.txt").write_text("x")  # only *.crt files count
    assert tag() == container.standin_tag(container.standin_files(repo, tmp_path / "none"))


def _noxfile_constants() -> dict[str, str]:
    tree = ast.parse((REPO / "noxfile.py").read_text())
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }


def test_standin_pins_the_cpu_test_envs_torch_and_triton():
    pins = container.debian_packages(
        (REPO / container.STANDIN_RECIPE / "requirements.txt").read_text()
    )
    nox = _noxfile_constants()
    # The CPU build (the +cpu local version: PyPI's Linux torch is the multi-GB CUDA build) of
    # the torch the CPU env pins, and the ISA/CPU env's triton: never unpinned.
    assert pins == [f"{nox['CPU_TORCH']}+cpu", f"triton=={nox['ISA_TRITON_VERSION']}"]


def test_debian_packages_reads_names_and_skips_comments():
    text = (
        "# what the image gives\npython3\n  git   # for the fingerprint\n\n#g++\nca-certificates\n"
    )
    assert container.debian_packages(text) == ["python3", "git", "ca-certificates"]
    shipped = container.debian_packages(
        (REPO / container.STANDIN_RECIPE / "debian-packages.txt").read_text()
    )
    # what docker/standin/Dockerfile and docker/Dockerfile run: venv, update-ca-certificates,
    # git for the result fingerprint
    assert {"python3", "python3-venv", "ca-certificates", "git"} <= set(shipped)


def test_standin_steps_make_the_rootfs_and_download_wheels_for_the_stand_ins_python(tmp_path):
    steps = container.standin_steps(["python3", "git"], tmp_path, "/venv/bin/python")
    assert steps == [
        (
            "mmdebstrap: the Debian root file system",
            [
                "mmdebstrap",
                "--variant=minbase",
                "--include=python3,git",
                "bookworm",
                str(tmp_path / "rootfs.tar"),
                "http://deb.debian.org/debian",
            ],
        ),
        (
            "pip download: torch and triton",
            [
                "/venv/bin/python",
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--only-binary=:all:",
                "--python-version=3.11",
                "--implementation=cp",
                "--abi=cp311",
                "--platform=manylinux_2_28_x86_64",
                f"--dest={tmp_path / 'wheels'}",
                "--requirement",
                str(tmp_path / "wheels" / "requirements.txt"),
            ],
        ),
    ]


class _FakeImages:
    def __init__(self, present: set[str]) -> None:
        self.present = present

    def list(self, name: str):
        return [SimpleNamespace(tags=[name])] if name in self.present else []


def test_build_standin_reuses_the_image_of_an_unchanged_recipe(monkeypatch):
    tag = container.standin_tag(container.standin_files(REPO))

    def never(*args, **kwargs):
        raise AssertionError("nothing is made when the image of this recipe exists")

    monkeypatch.setattr(container, "run_step", never)
    monkeypatch.setattr(container, "build_image", never)
    out = io.StringIO()
    client = SimpleNamespace(images=_FakeImages({tag}))
    assert container.build_standin(client, REPO, out=out) == tag
    assert out.getvalue() == f"stand-in base up to date: {tag}\n"


def test_build_standin_names_the_missing_mmdebstrap(monkeypatch):
    monkeypatch.setattr(container.shutil, "which", lambda name: None)
    client = SimpleNamespace(images=_FakeImages(set()))
    with pytest.raises(ContainerError, match=r"\(apt-get install mmdebstrap\)$"):
        container.build_standin(client, REPO, out=io.StringIO())


@pytest.mark.parametrize("build_fails", [False, True])
def test_build_standin_makes_the_context_then_builds_and_cleans_up(
    monkeypatch, tmp_path, build_fails
):
    repo, ca = _recipe(tmp_path)
    (ca / "proxy.crt").write_text("PEM\n")
    monkeypatch.setattr(container.shutil, "which", lambda name: f"/usr/bin/{name}")
    ran: list[str] = []

    def fake_step(what, command, out):
        ran.append(what)
        if command[0] == "mmdebstrap":
            Path(command[4]).write_bytes(b"rootfs")
        else:
            dest = Path(next(a for a in command if a.startswith("--dest=")).split("=", 1)[1])
            (dest / "torch-2.13.0+cpu.whl").write_bytes(b"wheel")

    built = {}

    def fake_build(client, context, tag, *, dockerfile, out):
        built.update(
            context=context,
            tag=tag,
            dockerfile=dockerfile,
            files={
                str(p.relative_to(context)): p.read_bytes()
                for p in sorted(context.rglob("*"))
                if p.is_file()
            },
        )
        if build_fails:
            raise ContainerError("building failed")

    monkeypatch.setattr(container, "run_step", fake_step)
    monkeypatch.setattr(container, "build_image", fake_build)
    client = SimpleNamespace(images=_FakeImages(set()))
    expected_tag = container.standin_tag(container.standin_files(repo, ca))
    if build_fails:
        with pytest.raises(ContainerError, match="building failed"):
            container.build_standin(client, repo, out=io.StringIO(), ca_dir=ca, python="py")
    else:
        assert (
            container.build_standin(client, repo, out=io.StringIO(), ca_dir=ca, python="py")
            == expected_tag
        )
    assert ran == ["mmdebstrap: the Debian root file system", "pip download: torch and triton"]
    assert built["tag"] == expected_tag and built["dockerfile"] == "Dockerfile"
    assert built["files"] == {
        "Dockerfile": b"FROM scratch\n",
        "debian-packages.txt": b"python3\n",
        "local-ca/proxy.crt": b"PEM\n",
        "rootfs.tar": b"rootfs",
        "wheels/requirements.txt": b"torch==2.13.0+cpu\n",
        "wheels/torch-2.13.0+cpu.whl": b"wheel",
    }
    assert not built["context"].exists()  # the ~1 GB context is gone, built or not


def test_build_standin_context_has_local_ca_even_without_extra_authorities(monkeypatch, tmp_path):
    repo, ca = _recipe(tmp_path)  # no *.crt: `COPY local-ca/` must still find its folder
    monkeypatch.setattr(container.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(container, "run_step", lambda what, command, out: None)
    seen = []
    monkeypatch.setattr(
        container,
        "build_image",
        lambda client, context, tag, **kw: seen.append((context / "local-ca").is_dir()),
    )
    container.build_standin(
        SimpleNamespace(images=_FakeImages(set())), repo, out=io.StringIO(), ca_dir=ca
    )
    assert seen == [True]


def test_run_step_streams_and_names_a_failed_step():
    out = io.StringIO()
    container.run_step("ok", ["sh", "-c", "echo one; echo two >&2"], out)
    assert out.getvalue() == "one\ntwo\n"
    with pytest.raises(ContainerError, match=r"^mmdebstrap: x failed \(exit 3\): E: no space$"):
        container.run_step(
            "mmdebstrap: x",
            ["sh", "-c", "echo I: working; echo 'E: no space' >&2; echo; exit 3"],
            out,
        )
    with pytest.raises(ContainerError, match=r"^pip download: cannot run /no/such/python: "):
        container.run_step("pip download", ["/no/such/python", "-m", "pip"], out)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # killed, waiting for init to reap it


def test_run_step_interrupted_kills_the_whole_step(tmp_path):
    # A step whose child outlives its first line (mmdebstrap's apt, say): the interruption must
    # take the child with it, not only the step's own process.
    class Interrupting(io.StringIO):
        def write(self, text):
            self.pid = int(text)
            raise KeyboardInterrupt

    out = Interrupting()
    with pytest.raises(KeyboardInterrupt):
        container.run_step("step", ["sh", "-c", "sleep 300 & echo $!; wait"], out)
    deadline = time.monotonic() + 10
    while not _gone(out.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(out.pid), f"the step's child {out.pid} outlived the interruption"


def test_cli_refuses_two_bases(capsys):
    assert _cli(["--stand-in-base", "--base-image", "x:1", "--allow-no-gpu", "test"]) == 2
    err = capsys.readouterr().err
    assert (
        err == "perfgate container: --stand-in-base and --base-image each name the base: give one\n"
    )


def _fake_launch(monkeypatch) -> dict:
    """Replace the engine: record what the command builds and runs."""
    seen: dict = {"builds": []}
    standin = container.standin_tag(container.standin_files(REPO))

    def fake_standin(client, repo):
        seen["standin_built"] = True
        return standin

    def fake_build(client, repo, tag, *, buildargs):
        seen["builds"].append((tag, buildargs))

    def fake_run(client, spec):
        seen["spec"] = spec
        return 0

    monkeypatch.setattr(container, "connect_engine", lambda: object())
    monkeypatch.setattr(container, "build_standin", fake_standin)
    monkeypatch.setattr(container, "build_image", fake_build)
    monkeypatch.setattr(container, "run_container", fake_run)
    seen["standin"] = standin
    return seen


def test_cli_stand_in_base_builds_the_dockerfile_on_it_under_its_own_tag(monkeypatch):
    seen = _fake_launch(monkeypatch)
    assert _cli(["--stand-in-base", "--allow-no-gpu", "test", "-x"]) == 0
    image = "mxfp4-gemm-suite:on-" + seen["standin"].replace("/", "-").replace(":", "-")
    assert seen["standin_built"]
    assert seen["builds"] == [(image, {"BASE_IMAGE": seen["standin"]})]
    spec = seen["spec"]
    assert spec["image"] == image and spec["command"] == [
        "nox",
        "--no-venv",
        "-s",
        "test",
        "--",
        "-x",
    ]
    assert spec["devices"] == [] and spec["environment"]["PERFGATE_SKIP_GPU_CHECK"] == "1"
    # the CPU stand-in's caches are never the ROCm image's
    assert container.STANDIN_CACHE_VOLUME in spec["volumes"]
    assert container.DEFAULT_CACHE_VOLUME not in spec["volumes"]


def test_cli_base_image_never_overwrites_the_rocm_image(monkeypatch):
    seen = _fake_launch(monkeypatch)
    assert _cli(["--base-image", "rocm/pytorch:other", "--allow-no-gpu", "test"]) == 0
    assert seen["builds"] == [
        ("mxfp4-gemm-suite:on-rocm-pytorch-other", {"BASE_IMAGE": "rocm/pytorch:other"})
    ]
    assert "standin_built" not in seen
    assert container.DEFAULT_CACHE_VOLUME in seen["spec"]["volumes"]


def test_cli_stand_in_base_without_build_runs_the_image_built_before(monkeypatch):
    seen = _fake_launch(monkeypatch)
    assert _cli(["--stand-in-base", "--no-build", "--allow-no-gpu", "isa"]) == 0
    assert seen["builds"] == [] and "standin_built" not in seen
    assert seen["spec"]["image"].startswith(
        "mxfp4-gemm-suite:on-localhost-mxfp4-gemm-suite-standin-"
    )


# ---- the image's GPU check (docker/gpu_check.py) --------------------------------------------


def _load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "docker" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_torch(archs: list[str], hip: str | None = "7.2.0") -> SimpleNamespace:
    props = [SimpleNamespace(name="AMD Instinct MI355X", gcnArchName=a) for a in archs]
    cuda = SimpleNamespace(
        is_available=lambda: bool(archs),
        device_count=lambda: len(archs),
        get_device_properties=props.__getitem__,
    )
    return SimpleNamespace(__version__="2.10.0", version=SimpleNamespace(hip=hip), cuda=cuda)


def test_gpu_check_passes_on_gfx950() -> None:
    gpu_check = _load_gpu_check()
    # gcnArchName carries feature suffixes on ROCm: only the part before ':' is the arch.
    summary = gpu_check.check(_fake_torch(["gfx950:sramecc+:xnack-"] * 2), "gfx950", True)
    assert summary.startswith("GPU check passed: 2 x AMD Instinct MI355X (gfx950)")


@pytest.mark.parametrize(
    ("torch_", "kfd", "message"),
    [
        (_fake_torch(["gfx950"]), False, "/dev/kfd is missing"),
        (_fake_torch(["gfx950"], hip=None), True, "is not a ROCm build"),
        (_fake_torch([]), True, "torch sees no GPU"),
        # one MI300X among MI355Xs: the whole container is refused, naming the odd one out
        (
            _fake_torch(["gfx950", "gfx942:sramecc+:xnack-"]),
            True,
            "GPU 1: AMD Instinct MI355X is gfx942",
        ),
    ],
)
def test_gpu_check_refuses(torch_, kfd: bool, message: str) -> None:
    gpu_check = _load_gpu_check()
    with pytest.raises(gpu_check.GpuCheckError, match=message):
        gpu_check.check(torch_, "gfx950", kfd)


def test_gpu_check_script_fails_here_with_exit_3() -> None:
    # This machine has no /dev/kfd: the script must say so and exit 3, not 0.
    if os.path.exists("/dev/kfd"):
        pytest.skip("this machine has /dev/kfd")
    proc = subprocess.run(
        [sys.executable, str(REPO / "docker" / "gpu_check.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3
    assert "perfgate GPU check FAILED: /dev/kfd is missing" in proc.stderr


# ---- a real Docker-API engine ---------------------------------------------------------------

PROBE_C = r"""
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
extern char **environ;

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) { printf("cannot-write=%s\n", path); return 1; }
    fputs(text, f);
    return fclose(f) != 0;
}

int main(int argc, char **argv) {
    char buf[4096];
    printf("argv=");
    for (int i = 0; i < argc; i++) printf(i ? "|%s" : "%s", argv[i]);
    printf("\ncwd=%s\n", getcwd(buf, sizeof buf) ? buf : "?");
    gid_t groups[64];
    int n = getgroups(64, groups);
    for (int i = 0; i < n; i++) printf("group=%u\n", (unsigned)groups[i]);
    struct stat st;
    printf("kfd=%s\n", stat("/dev/kfd", &st) == 0 && S_ISCHR(st.st_mode) ? "char" : "missing");
    for (char **e = environ; *e; e++) printf("env=%s\n", *e);
    FILE *m = fopen("marker.txt", "r");
    if (m && fgets(buf, sizeof buf, m)) printf("marker=%s", buf);
    mkdir(".perfgate", 0755);
    mkdir(".perfgate/results", 0755);
    int bad = write_file(".perfgate/results/probe.txt", "written in the container\n")
            + write_file("/cache/probe.txt", "cache\n");
    const char *code = getenv("PERFGATE_PROBE_EXIT");
    return bad ? 99 : (code ? atoi(code) : 0);
}
"""


class _FakeDockerError(Exception):
    pass


def _sdk_without_engine(message: str) -> SimpleNamespace:
    def from_env():
        raise _FakeDockerError(message)

    return SimpleNamespace(
        from_env=from_env, errors=SimpleNamespace(DockerException=_FakeDockerError)
    )


@pytest.mark.parametrize(
    ("docker_host", "where"),
    [
        (None, "unix:///var/run/docker.sock (DOCKER_HOST is unset)"),  # the SDK's default
        ("unix:///tmp/podman.sock", "unix:///tmp/podman.sock"),  # what the user pointed at
    ],
)
def test_no_engine_names_the_socket_and_the_podman_script(monkeypatch, docker_host, where):
    if docker_host is None:
        monkeypatch.delenv("DOCKER_HOST", raising=False)
    else:
        monkeypatch.setenv("DOCKER_HOST", docker_host)
    # The SDK's own error spans lines (a urllib3 chain); only its first line is kept.
    sdk = _sdk_without_engine("Error while fetching server API version\n  (long chain)")
    monkeypatch.setattr(container, "docker_sdk", lambda: sdk)
    with pytest.raises(ContainerError) as info:
        container.connect_engine()
    message = str(info.value)
    assert "\n" not in message
    assert f"reachable at {where} (_FakeDockerError: Error while fetching" in message
    assert (
        "`bash docker/podman-service.sh`" in message
        and "DOCKER_HOST=unix:///tmp/podman.sock" in message
    )


@pytest.fixture(scope="module")
def engine():
    docker = _require_sdk()
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(container.engine_unreachable(exc))
    yield client
    client.close()


@pytest.fixture(scope="module")
def probe_image(engine, tmp_path_factory):
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the static probe program for the test image")
    context = tmp_path_factory.mktemp("probe-context")
    (context / "probe.c").write_text(PROBE_C)
    subprocess.run(
        [cc, "-static", "-Os", "-o", str(context / "nox"), str(context / "probe.c")],
        check=True,
        timeout=120,
    )
    (context / "Dockerfile").write_text(
        "FROM scratch\nCOPY nox /usr/local/bin/nox\nENV PATH=/usr/local/bin\n"
    )
    tag = f"perfgate-probe:{uuid.uuid4().hex[:12]}"
    log = io.StringIO()
    container.build_image(engine, context, tag, dockerfile="Dockerfile", out=log)
    assert "COPY nox /usr/local/bin/nox" in log.getvalue()  # the build log was streamed
    yield tag
    engine.images.remove(tag, force=True)


@pytest.fixture
def cache_volume(engine):
    name = f"perfgate-probe-cache-{uuid.uuid4().hex[:12]}"
    yield name
    for volume in engine.volumes.list(filters={"name": name}):
        volume.remove(force=True)


def _probe_lines(output: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in output.splitlines() if line.startswith(key + "=")]


def test_real_engine_run_follows_the_spec(
    engine, probe_image, cache_volume, tmp_path: Path
) -> None:
    (tmp_path / "marker.txt").write_text("from the host\n")
    env = container_environment(
        {"PERFGATE_PROBE_EXIT": "5", "PERFGATE_REQUIRE_GPU": "1", "GITHUB_TOKEN": "secret"},
        host_uid=os.getuid(),
        host_gid=os.getgid(),
        skip_gpu_check=False,
    )
    spec = build_run_spec(
        image=probe_image,
        repo=tmp_path,
        command=nox_command("probe", ["-k", "a b"]),
        environment=env,
        # 4242 is in no group file: group_add must pass numbers through untranslated.
        gpu=GpuAccess(devices=("/dev/null",), group_ids=(44, 4242)),
        cache_volume=cache_volume,
    )
    # This machine has no /dev/kfd: hand the engine the same device syntax with the host's
    # /dev/null standing in for it, so the device path is exercised for real.
    assert spec["devices"] == ["/dev/null:/dev/null:rwm"]
    spec["devices"] = ["/dev/null:/dev/kfd:rwm"]
    out = io.StringIO()

    status = container.run_container(engine, spec, out=out)

    text = out.getvalue()
    assert status == 5, text  # the container's exit status, not a generic failure
    assert _probe_lines(text, "argv") == ["nox|--no-venv|-s|probe|--|-k|a b"]
    assert _probe_lines(text, "cwd") == ["/workspace"]
    assert {"44", "4242"} <= set(_probe_lines(text, "group"))
    assert _probe_lines(text, "kfd") == ["char"]
    assert _probe_lines(text, "marker") == ["from the host"]
    seen_env = set(_probe_lines(text, "env"))
    assert {
        "PERFGATE_REQUIRE_GPU=1",
        "PERFGATE_IN_CONTAINER=1",
        "GIT_CONFIG_VALUE_0=/workspace",
    } <= seen_env
    assert not any(e.startswith("GITHUB_TOKEN=") for e in seen_env)
    # results written in the container are in the host's checkout: nothing to copy back
    assert (tmp_path / ".perfgate/results/probe.txt").read_text() == "written in the container\n"
    # the container was removed after the run
    assert not engine.containers.list(all=True, filters={"ancestor": probe_image})


def test_real_engine_cli_end_to_end(
    engine, probe_image, cache_volume, tmp_path: Path, monkeypatch, capfd
) -> None:
    monkeypatch.setattr(container, "repo_root", lambda: tmp_path)
    monkeypatch.setenv("PERFGATE_PROBE_EXIT", "0")
    args = ["--no-build", "--allow-no-gpu", "--image", probe_image, "--cache-volume", cache_volume]
    status = _cli([*args, "--", "probe", "-x"])
    text = capfd.readouterr().out
    assert status == 0, text
    assert "argv=nox|--no-venv|-s|probe|--|-x" in text
    assert "env=PERFGATE_SKIP_GPU_CHECK=1" in text  # --allow-no-gpu also skips the image's check
    assert "kfd=missing" in text
    assert (tmp_path / ".perfgate/results/probe.txt").is_file()


def _cli(argv: list[str]) -> int:
    from perfgate.__main__ import main

    return main(["container", *argv])


# ---- the container rehearsal: docker/Dockerfile on the stand-in base, the CPU session inside ----


def _checkout_of_this_tree(dest: Path) -> Path:
    """A clone of this repository at HEAD with the working tree's changes on top: what the real
    run mounts (a checkout with its own .git, which a `git worktree`'s .git file is not inside a
    container), without the session inside writing into this tree."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (a copied tree): the rehearsal mounts a clone of it")
    git = ["git", "-c", "safe.directory=*"]
    head = subprocess.run(
        [*git, "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run([*git, "clone", "--quiet", "--no-checkout", str(REPO), str(dest)], check=True)
    subprocess.run([*git, "-C", str(dest), "checkout", "--quiet", "--detach", head], check=True)
    changed = subprocess.run(
        [*git, "-C", str(REPO), "ls-files", "-z", "--modified", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, changed):
        source, target = REPO / name, dest / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.is_file():  # deleted in the working tree
            target.unlink()
    return dest


# What the rehearsal runs of the CPU session inside the image: every test module is collected
# (imported: a package the image lacks fails here), and these run, one or more per layer the
# image adds (its Python and extras, the kernels in its triton's interpreter, pytest-benchmark,
# scipy and rich, SQLite, the submission loader). The rest of the session is the same code on
# the same torch and triton (test_standin_pins_the_cpu_test_envs_torch_and_triton), and the CPU
# job runs it outside the image: running it twice on one runner doubled CI's time.
IMAGE_SMOKE = (
    "test_layout or test_configs or test_reference or test_splitk or test_compare or "
    "test_bench_cli or test_plugin or test_history_store or test_submission_load"
)


@pytest.mark.slow
def test_rehearsal_builds_the_dockerfile_on_the_stand_in_and_passes_the_cpu_session(
    engine, tmp_path, monkeypatch, capfd
):
    """`python -m perfgate container --stand-in-base --allow-no-gpu test -- -k IMAGE_SMOKE`, for
    real: every layer of docker/Dockerfile but the base, the entrypoint, the mounts, and the CPU
    test session inside, every module collected and :data:`IMAGE_SMOKE` run. The stand-in image,
    the suite's image on it and their cache volume are kept for the next run."""
    standin = container.standin_tag(container.standin_files(REPO))
    if shutil.which("mmdebstrap") is None and not engine.images.list(name=standin):
        pytest.skip("no mmdebstrap to make the stand-in base (apt-get install mmdebstrap)")
    checkout = _checkout_of_this_tree(tmp_path / "checkout")
    monkeypatch.setattr(container, "repo_root", lambda: checkout)
    # The session inside is the plain CPU one, whatever job runs this test.
    for name in list(os.environ):
        if name.startswith(("PERFGATE_", "MXFP4_")) or name == "PYTEST_ADDOPTS":
            monkeypatch.delenv(name)

    smoke = ["-k", IMAGE_SMOKE]
    status = _cli(["--stand-in-base", "--allow-no-gpu", "test", *smoke])

    text = capfd.readouterr().out
    tail = "\n".join(text.splitlines()[-40:])
    assert status == 0, tail
    image = container.image_tag(None, standin)
    command = " ".join(container.nox_command("test", smoke))
    assert f"perfgate container: {command} in {image}\n" in text, tail
    # every step of docker/Dockerfile ran (built or taken from the cache of an identical build)
    steps = [(int(a), int(b)) for a, b in re.findall(r"(?i)^step (\d+)/(\d+)", text, re.M)]
    assert steps and steps[-1][0] == steps[-1][1], tail
    summary = re.findall(r"^=+ (.*\bpassed\b.*) in [\d.]+s", text, re.M)
    assert len(summary) == 1, tail
    assert not re.search(r"\b(failed|errors?)\b", summary[0]), summary[0]
    # exit 0: every module of the tree was collected (-k imports them all; a collection error
    # fails the session); the smoke is over 400 tests, far fewer would mean the wrong tree
    assert int(re.search(r"(\d+) passed", summary[0]).group(1)) > 300, summary[0]
    assert "nox > Session test was successful" in text, tail
