"""noxfile.py with a stand-in for nox: which sessions share one venv, what is installed when,
that the ISA refresh and check use one compiler, and which exit code each refusal gives. Nothing
is installed or run, except the real nox on refusals that come before any install."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


class Skipped(Exception):
    pass


class Errored(Exception):
    pass


class CommandFailed(Exception):
    """nox.command.CommandFailed: a command's exit code that is not a success."""

    def __init__(self, reason=None, *, return_code=None):
        super().__init__(reason)
        self.return_code = return_code


class FakeSession:
    """Records every command; answers the triton version query with ``triton``."""

    def __init__(self, envdir: Path, name: str, *posargs: str, in_place=False, triton="3.9.0",
                 exits=None, gpus=1):  # fmt: skip
        self.name = name
        self.gpus = gpus
        self.exits = exits or {}  # the exit code of each command that starts with the key
        self.posargs = list(posargs)
        self.venv_backend = "none" if in_place else "venv"
        self.virtualenv = SimpleNamespace(location=str(envdir / name))
        self.triton = triton
        self.runs: list[tuple[str, ...]] = []
        self.installs: list[tuple[str, ...]] = []

    def run(self, *args, **kwargs):
        self.runs.append(tuple(str(a) for a in args))
        for key, code in self.exits.items():
            if " ".join(self.runs[-1]).startswith(key):
                raise CommandFailed(f"Returned code {code}", return_code=code)
        if "triton.__version__" in " ".join(args):
            return f"{self.triton}\n"
        if "TARGETS" in " ".join(args):
            return "gfx950 sm90\n"
        if "device_info().arch" in " ".join(args):
            return "sm90\n"
        if "nvidia_gpu_count()" in " ".join(args):
            return f"{self.gpus}\n"
        return True

    def install(self, *args, **kwargs):
        self.installs.append(args)

    def log(self, *args, **kwargs):
        pass

    def skip(self, reason):
        raise Skipped(reason)

    def error(self, reason):
        raise Errored(reason)


@pytest.fixture
def noxfile(monkeypatch):
    fake_nox = types.ModuleType("nox")
    fake_nox.options = SimpleNamespace()
    fake_nox.Session = FakeSession
    fake_nox.command = SimpleNamespace(CommandFailed=CommandFailed)
    fake_nox.session = lambda func=None, **kwargs: func if func is not None else (lambda f: f)
    monkeypatch.setitem(sys.modules, "nox", fake_nox)
    monkeypatch.chdir(ROOT)  # the noxfile reads pyproject.toml from the project root
    monkeypatch.delenv("PERFGATE_REQUIRE_GPU", raising=False)
    spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "_has_gpu", lambda: False)
    return module


@contextlib.contextmanager
def exits_2(capsys, pattern: str):
    """The block ends in SystemExit(2) (nox exits 2) after one line on stderr matching ``pattern``."""
    with pytest.raises(SystemExit) as stop:
        yield
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(pattern, err), err


def _pip_installs(session: FakeSession) -> list[tuple[str, ...]]:
    return [r for r in session.runs if r[1:4] == ("-m", "pip", "install")]


def test_bench_without_gpu_installs_nothing(noxfile, tmp_path):
    session = FakeSession(tmp_path, "bench")
    with pytest.raises(Skipped, match=r"no GPU on this machine.*nothing installed"):
        noxfile.bench(session)
    assert session.runs == [] and session.installs == []


def test_bench_without_gpu_is_exit_2_when_a_gpu_is_required(noxfile, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", "1")
    session = FakeSession(tmp_path, "bench")
    with exits_2(capsys, "PERFGATE_REQUIRE_GPU"):
        noxfile.bench(session)
    assert session.runs == []


def test_update_baselines_without_gpu_fails_before_installing(noxfile, tmp_path, capsys):
    session = FakeSession(tmp_path, "update_baselines")
    with exits_2(capsys, r"no GPU.*no baseline written"):
        noxfile.update_baselines(session)
    assert session.runs == [] and session.installs == []


def test_torch_sessions_share_one_env_filled_once(noxfile, tmp_path):
    first = FakeSession(tmp_path, "test")
    noxfile.test(first)
    shared = tmp_path / "shared-cpu"
    assert first.runs[0][-1] == str(shared)  # python -m venv <shared>
    assert _pip_installs(first)[0][-2:] == (noxfile.CPU_TORCH, noxfile.ISA_TRITON)
    exported = ".perfgate/test/submission-default.py"
    assert first.runs[-2][-4:] == ("submission", "export", "--out", exported)
    assert first.runs[-1] == (str(shared / "bin" / "pytest"), "-m", "not bench", "-n", "auto",
                              f"--submission={exported}")  # fmt: skip
    for name, call in [("isa", noxfile.isa), ("build", noxfile.build)]:
        later = FakeSession(tmp_path, name)
        call(later)
        assert _pip_installs(later) == [], f"{name} reinstalled the shared env"
        assert all(r[0].startswith(str(shared / "bin")) for r in later.runs), name


def test_stale_stamp_refills_the_env(noxfile, tmp_path):
    noxfile.test(FakeSession(tmp_path, "test"))
    (tmp_path / "shared-cpu" / ".mxfp4-stamp").write_text("made from another pyproject.toml")
    again = FakeSession(tmp_path, "test")
    noxfile.test(again)
    assert len(_pip_installs(again)) == 3  # torch+triton, the suite, the extras


def test_isa_refresh_and_check_use_one_compiler(noxfile, tmp_path, monkeypatch):
    monkeypatch.setattr(noxfile, "_has_gpu", lambda: True)  # a GPU box refreshing ISA baselines
    check = FakeSession(tmp_path, "isa")
    noxfile.isa(check)
    refresh = FakeSession(tmp_path, "update_baselines", "--isa")
    noxfile.update_baselines(refresh)
    # Both run from the CPU env, which pins triton to the version the baselines record.
    assert _pip_installs(check)[0][-1] == "triton==" + noxfile.ISA_TRITON_VERSION
    commands = [r for r in check.runs + refresh.runs if r[0] != sys.executable]  # but the venv's
    assert all(r[0].startswith(str(tmp_path / "shared-cpu" / "bin")) for r in commands)
    assert refresh.runs[-1][-3:] == ("perfgate", "update-baselines", "--isa")


@pytest.mark.parametrize("session_name", ["isa", "update_baselines"])
def test_isa_with_another_triton_in_place_is_refused(noxfile, tmp_path, session_name, capsys):
    posargs = ("--isa",) if session_name == "update_baselines" else ()
    session = FakeSession(tmp_path, session_name, *posargs, in_place=True, triton="3.6.0")
    with exits_2(capsys, r"made and checked with triton 3\.9\.0.*has triton 3\.6\.0"):
        getattr(noxfile, session_name)(session)
    assert not any("perfgate" in r for r in session.runs)


def test_no_venv_installs_only_the_suite_in_place(noxfile, tmp_path):
    session = FakeSession(tmp_path, "test", "-x", in_place=True)
    noxfile.test(session)
    assert session.runs[0] == (
        "python", "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", ".",
    )  # fmt: skip
    assert not any("torch" in " ".join(r) or "venv" in r for r in session.runs)
    # the README's command, over every core, the contract tests on the one-file export
    exported = ".perfgate/test/submission-default.py"
    export = ("python", "-m", "perfgate", "submission", "export", "--out", exported)
    assert session.runs[-2] == export
    assert session.runs[-1] == ("pytest", "-m", "not bench", "-n", "auto", f"--submission={exported}",
                                "-x")  # fmt: skip
    assert not (tmp_path / "shared-cpu").exists()


@pytest.mark.parametrize(
    "posargs", [("-n", "0"), ("-n4",), ("--numprocesses=3",), ("-p", "no:xdist"), ("--dist", "no")]
)
def test_the_tests_spread_over_the_cores_unless_the_arguments_say(noxfile, tmp_path, posargs):
    session = FakeSession(tmp_path, "test", *posargs, in_place=True)
    noxfile.test(session)
    assert session.runs[-1][:3] == ("pytest", "-m", "not bench")
    assert session.runs[-1][-len(posargs) :] == posargs and "auto" not in session.runs[-1]


@pytest.mark.parametrize("chosen", [("--submission", "mine.py"), ("--submission=mine.py",)])
def test_a_submission_given_is_the_contract_tests_subject(noxfile, tmp_path, chosen):
    session = FakeSession(tmp_path, "test", *chosen, "-x", in_place=True)
    noxfile.test(session)
    assert not any("export" in r for r in session.runs)
    # one word: pytest would take a separate path for a test path before it knows the option
    assert session.runs[-1] == ("pytest", "-m", "not bench", "-n", "auto", "--submission=mine.py",
                                "-x")  # fmt: skip


def test_nox_test_with_a_submission_outside_tests_reaches_the_option(tmp_path):
    # the real pytest: the option is declared in tests/conftest.py, found before it is parsed
    # (the subfolders are left out only to collect less; the root conftest is the testpaths')
    subject = tmp_path / "mine.py"
    subject.write_text("def custom_kernel(data):\n    return data\n")
    skipped = [f"--ignore=tests/{d}" for d in ("lab", "perf", "perfgate", "submission")]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         f"--submission={subject}", *skipped, "-k", "test_at_most_one_target"],  # no path
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]


def test_the_test_sessions_tests_compile_each_module_once(noxfile, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    session = FakeSession(tmp_path, "test")
    envs = []
    original = session.run
    session.run = lambda *a, **k: envs.append((a[0], k.get("env"))) or original(*a, **k)
    noxfile.test(session)
    program, env = envs[-1]
    assert program.endswith("pytest") and env["PYTHONDONTWRITEBYTECODE"] == ""


@pytest.mark.parametrize("users", [None, "65536"])
def test_the_test_sessions_processes_keep_freed_memory(noxfile, tmp_path, monkeypatch, users):
    for name in noxfile.KEEP_FREED_MEMORY:
        monkeypatch.delenv(name, raising=False)
    if users is not None:  # a value the user set is theirs
        monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", users)
    session = FakeSession(tmp_path, "test")
    envs = []
    original = session.run
    session.run = lambda *a, **k: envs.append(k.get("env")) or original(*a, **k)
    noxfile.test(session)
    want = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}
    if users is not None:
        del want["MALLOC_TRIM_THRESHOLD_"]
    assert {k: v for k, v in envs[-1].items() if k.startswith("MALLOC_")} == want


# a fresh process allocates 64 MiB, frees it, and allocates it again: the page faults of the
# second allocation
_REFAULTS = """
import ctypes, resource
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 64 << 20
def touch_and_free():
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(p)
touch_and_free()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
touch_and_free()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the variables are glibc's")
def test_with_the_sessions_settings_glibc_reuses_freed_memory_without_faults(noxfile):
    def refaults(env):
        done = subprocess.run([sys.executable, "-c", _REFAULTS], capture_output=True, text=True,
                              env=env, check=True)  # fmt: skip
        return int(done.stdout)

    plain = {k: v for k, v in os.environ.items() if k not in noxfile.KEEP_FREED_MEMORY}
    assert refaults(plain) > 8000  # 64 MiB mapped anew: about 16384 pages
    assert refaults(plain | noxfile.KEEP_FREED_MEMORY) < 100


def test_on_a_gpu_box_the_contract_tests_take_this_gpus_export(noxfile, tmp_path, monkeypatch):
    monkeypatch.setattr(noxfile, "_has_gpu", lambda: True)
    session = FakeSession(tmp_path, "test", in_place=True)
    noxfile.test(session)
    exported = ".perfgate/test/submission-sm90.py"
    assert session.runs[-2][-5:] == ("export", "--out", exported, "--target", "sm90")
    assert session.runs[-1][-1] == f"--submission={exported}"


# ---- the GPU job and the sessions' own argument checks ------------------------------------------


def test_gpu_without_gpu_skips_before_installing(noxfile, tmp_path):
    session = FakeSession(tmp_path, "gpu")
    with pytest.raises(Skipped, match=r"gpu: no GPU on this machine"):
        noxfile.gpu(session)
    assert session.runs == [] and session.installs == []


def test_gpu_without_gpu_is_exit_2_when_a_gpu_is_required(noxfile, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", "1")
    session = FakeSession(tmp_path, "gpu")
    with exits_2(capsys, "PERFGATE_REQUIRE_GPU"):
        noxfile.gpu(session)
    assert session.runs == []


@pytest.mark.parametrize("session_name", ["gpu", "ab"])
@pytest.mark.parametrize("has_gpu", [False, True])
def test_a_bad_base_is_refused_before_anything_else(noxfile, tmp_path, monkeypatch, session_name,
                                                    has_gpu, capsys):  # fmt: skip
    # Refused whether or not a GPU is here: a no-GPU skip must not hide a typo in --base.
    monkeypatch.setattr(noxfile, "_has_gpu", lambda: has_gpu)
    session = FakeSession(tmp_path, session_name, "--base", "no-such-revision-xyz")
    with exits_2(capsys, r"--base 'no-such-revision-xyz' is not a commit"):
        getattr(noxfile, session_name)(session)
    assert session.runs == []


def test_ab_without_base_is_refused(noxfile, tmp_path, capsys):
    with exits_2(capsys, r"ab needs --base REV"):
        noxfile.ab(FakeSession(tmp_path, "ab"))


EXPORTED = ".perfgate/results/submission-sm90.py"
REQUIRED = {"PERFGATE_REQUIRE_GPU": "1", "MXFP4_REQUIRE_NATIVE_REDUCER": "1"}
# the tests' many fresh interpreters reuse the bytecode of the first, wherever the image set
# PYTHONDONTWRITEBYTECODE (an empty value is unset, for Python)
COMPILED_ONCE = {"PYTHONDONTWRITEBYTECODE": ""}


def _gpu_job(noxfile, tmp_path, monkeypatch, *posargs, gpus=1, exits=None):
    """The gpu session on a stand-in GPU box: its commands (pip installs left out), each with
    the environment and success codes it was given."""
    monkeypatch.setattr(noxfile, "_has_gpu", lambda: True)
    calls = []
    session = FakeSession(tmp_path, "gpu", *posargs, in_place=True, gpus=gpus, exits=exits)
    original = session.run

    def run(*args, **kwargs):
        if args[:4] != ("python", "-m", "pip", "install"):
            calls.append((tuple(args), kwargs.get("env"), kwargs.get("success_codes")))
        return original(*args, **kwargs)

    session.run = run
    noxfile.gpu(session)
    return calls


TARGET_QUERY = ("python", "-c", "from kernels.device import device_info; print(device_info().arch)")
EXPORT = ("python", "-m", "perfgate", "submission", "export", "--out", EXPORTED, "--target", "sm90")


def _job_steps(workers: tuple[str, ...], pytest_args: tuple[str, ...] = ()) -> list[tuple]:
    return [
        ("python", "-m", "kernels.reducer.build"),
        TARGET_QUERY,
        EXPORT,
        # tests/gpu_job.py's tests; the contract tests on the export (both tiers decide)
        ("pytest", "-m", "not bench", "--gpu-job", *workers, f"--submission={EXPORTED}",
         *pytest_args),
        ("python", "-m", "perfgate", "bench", "--submission", EXPORTED, "--mode", "leaderboard",
         "--allow-missing-baseline"),
        ("python", "-m", "perfgate", "host", "--gate"),
        ("python", "-m", "perfgate", "bench"),  # the stored baselines
    ]  # fmt: skip


def test_the_push_job_is_gated_by_the_stored_baselines(noxfile, tmp_path, monkeypatch):
    calls = _gpu_job(noxfile, tmp_path, monkeypatch, "-n", "8", "-q")
    assert [c[0] for c in calls] == _job_steps(("-n", "8"), ("-q",))
    # every step that runs the code under test demands the GPU and the native reducer (the
    # export only writes a file)
    envs = [c[1] for c in calls if c[0][:2] != ("python", "-c")]
    assert envs == [REQUIRED, None, REQUIRED | COMPILED_ONCE, *[REQUIRED] * 3]
    assert calls[-1][2] is None  # the stored verdict decides: exit 1 fails the job


@pytest.mark.parametrize("base", [("--base", "HEAD"), ("--base=HEAD",)])
def test_the_pull_request_job_gives_both_verdicts_and_the_ab_decides(
    noxfile, tmp_path, monkeypatch, base
):
    calls = _gpu_job(noxfile, tmp_path, monkeypatch, *base, "-n", "8")
    ab = ("python", "-m", "perfgate", "ab", "--base", "HEAD")
    assert [c[0] for c in calls] == [*_job_steps(("-n", "8")), ab]
    assert calls[-2][2] == [0, 1]  # the stored baselines: printed beside, never deciding
    assert calls[-1][1] == REQUIRED and calls[-1][2] is None


def test_a_regression_in_the_ab_fails_the_pull_request_job(noxfile, tmp_path, monkeypatch):
    with pytest.raises(CommandFailed):
        _gpu_job(noxfile, tmp_path, monkeypatch, "--base", "HEAD",
                 exits={"python -m perfgate ab": 1})  # fmt: skip


@pytest.mark.parametrize(("gpus", "workers"), [(1, str(os.cpu_count())), (4, "4")])
def test_the_job_uses_the_machines_cores_or_a_worker_per_gpu(
    noxfile, tmp_path, monkeypatch, gpus, workers
):
    calls = _gpu_job(noxfile, tmp_path, monkeypatch, gpus=gpus)
    pytest_step = next(c[0] for c in calls if c[0][0] == "pytest")
    assert pytest_step == ("pytest", "-m", "not bench", "--gpu-job", "-n", workers,
                           f"--submission={EXPORTED}")  # fmt: skip


def test_the_smoke_runs_the_changes_gpu_tests_and_no_gate(noxfile, tmp_path, monkeypatch):
    calls = _gpu_job(noxfile, tmp_path, monkeypatch, "--changed-since", "HEAD", "-n", "2")
    assert [c[0] for c in calls] == [
        ("python", "-m", "kernels.reducer.build"),
        TARGET_QUERY,
        EXPORT,
        ("pytest", "-m", "not bench", "--gpu-job", "--changed-since", "HEAD", "-n", "2",
         f"--submission={EXPORTED}"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("posargs", "message"),
    [
        (("--changed-since", "no-such-revision-xyz"),
         r"--changed-since 'no-such-revision-xyz' is not a commit"),
        (("--base", "HEAD", "--changed-since", "HEAD"), r"--base .* and --changed-since .* exclude"),
    ],
)  # fmt: skip
def test_a_bad_smoke_is_refused_before_anything_runs(
    noxfile, tmp_path, monkeypatch, capsys, posargs, message
):
    monkeypatch.setattr(noxfile, "_has_gpu", lambda: True)
    session = FakeSession(tmp_path, "gpu", *posargs)
    with exits_2(capsys, message):
        noxfile.gpu(session)
    assert session.runs == []


def test_isa_with_a_target_checks_that_target_alone(noxfile, tmp_path):
    session = FakeSession(tmp_path, "isa", "--target", "sm90", in_place=True)
    noxfile.isa(session)
    gates = [r for r in session.runs if r[:4] == ("python", "-m", "perfgate", "isa")]
    assert gates == [
        ("python", "-m", "perfgate", "isa", "--target", "sm90", "--check",
         "perf_baselines/isa/sm90.json"),
    ]  # fmt: skip


def test_isa_with_an_unknown_target_is_refused(noxfile, tmp_path, capsys):
    session = FakeSession(tmp_path, "isa", "--target", "gfx942", in_place=True)
    with exits_2(capsys, r"--target must be one of gfx950, sm90, got 'gfx942'"):
        noxfile.isa(session)


def test_filling_the_env_says_what_it_does(noxfile, tmp_path):
    logged = []
    session = FakeSession(tmp_path, "test")
    session.log = lambda message: logged.append(message)
    noxfile.test(session)
    assert [m.split(":")[0] for m in logged if m.startswith("step")] == [
        "step 1/3",
        "step 2/3",
        "step 3/3",
    ]
    assert all("--quiet" not in r for r in _pip_installs(session))


def test_the_cpu_env_installs_the_replay_goldens_versions(noxfile, tmp_path):
    # the byte-for-byte replay holds for the numpy/scipy/rich its goldens were recorded with:
    # CI's env takes exactly those, read from the goldens' own record
    import json

    recorded = json.loads((ROOT / "tests/perfgate/data/replay/golden/ENV.json").read_text())
    session = FakeSession(tmp_path, "test")
    noxfile.test(session)
    extras = _pip_installs(session)[-1]
    for name in ("numpy", "scipy", "rich"):
        assert f"{name}=={recorded[name]}" in extras, name
    assert not [r for r in noxfile._shared_requirements("gpu")[-1] if "==" in r and "numpy" in r]


def test_triage_runs_in_place_with_the_gpu_jobs_demands(noxfile, tmp_path, monkeypatch):
    monkeypatch.setattr(noxfile, "_has_gpu", lambda: True)
    session = FakeSession(tmp_path, "triage", "--no-issues", "--json", "t.json", in_place=True)
    calls = []
    session.run = lambda *a, **k: calls.append((a, k.get("env"))) or True
    noxfile.triage(session)
    assert calls[-1] == (
        ("python", "-m", "perfgate", "triage", "--no-issues", "--json", "t.json"),
        noxfile.GPU_JOB_ENV,
    )
    with pytest.raises(Skipped, match="triage: no GPU"):
        monkeypatch.setattr(noxfile, "_has_gpu", lambda: False)
        noxfile.triage(FakeSession(tmp_path, "triage"))


def test_triage_issues_installs_only_the_suite(noxfile, tmp_path):
    session = FakeSession(tmp_path, "triage_issues", "t.json")
    noxfile.triage_issues(session)
    assert session.installs == [("--no-deps", "-e", ".")]
    assert session.runs == [("python", "-m", "perfgate", "triage", "--publish", "t.json")]


def test_history_installs_the_suite_without_torch_and_runs_history(noxfile, tmp_path):
    session = FakeSession(tmp_path, "history", "migrate", "--to", "h.sqlite")
    noxfile.history(session)
    extras = noxfile._extra_requirements("perf", "history")
    assert any(r.startswith("psycopg") for r in extras)
    assert session.installs == [("--no-deps", "-e", "."), tuple(extras)]
    assert not any(r.startswith(("torch", "triton")) for i in session.installs for r in i)
    assert session.runs == [("python", "-m", "perfgate", "history", "migrate", "--to", "h.sqlite")]


# ---- exit codes: 2 for unusable input, whatever refuses it; 1 stays a regression's ----------


@pytest.mark.parametrize(
    ("session_name", "posargs", "exits", "pattern"),
    [
        ("test", ("-k", "no_such_test"), {"pytest": 5}, r"pytest exited 5: no test collected"),
        ("test", ("--bogus",), {"pytest": 4}, r"pytest exited 4: pytest usage error"),
        (
            "host",
            ("--bogus",),
            {"python -m perfgate host": 2},
            r"perfgate exited 2: unusable input",
        ),
    ],
)
def test_a_childs_usage_error_is_exit_2(noxfile, tmp_path, capsys, session_name, posargs,
                                        exits, pattern):  # fmt: skip
    session = FakeSession(tmp_path, session_name, *posargs, exits=exits, in_place=True)
    with exits_2(capsys, rf"^nox > {session_name}: error: {pattern}"):
        getattr(noxfile, session_name)(session)


@pytest.mark.parametrize(
    ("session_name", "exits"),
    [
        ("test", {"pytest": 1}),
        ("host", {"python -m perfgate host": 1}),
        ("build", {"python -m kernels.reducer.build": 2}),  # 2 is perfgate's code, not the build's
    ],
)
def test_a_childs_failure_stays_noxs_exit_1(noxfile, tmp_path, session_name, exits):
    session = FakeSession(tmp_path, session_name, exits=exits, in_place=True)
    with pytest.raises(CommandFailed):
        getattr(noxfile, session_name)(session)


def test_an_option_without_its_value_is_exit_2(noxfile, tmp_path, capsys):
    session = FakeSession(tmp_path, "isa", "--target", in_place=True)
    with exits_2(capsys, r"^nox > isa: error: --target needs a value$"):
        noxfile.isa(session)


@pytest.mark.parametrize("value", ["0", "false", "No", " off ", ""])
def test_require_gpu_off_in_any_spelling_skips(noxfile, tmp_path, monkeypatch, value):
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", value)
    with pytest.raises(Skipped):  # PERFGATE_REQUIRE_GPU=false used to count as set
        noxfile.bench(FakeSession(tmp_path, "bench"))


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_require_gpu_on_in_any_spelling_is_exit_2(noxfile, tmp_path, monkeypatch, capsys, value):
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", value)
    with exits_2(capsys, r"no GPU on this machine.*PERFGATE_REQUIRE_GPU is on"):
        noxfile.bench(FakeSession(tmp_path, "bench"))


@pytest.mark.parametrize("session_name", ["bench", "ab", "gpu"])
def test_require_gpu_neither_on_nor_off_is_exit_2(noxfile, tmp_path, monkeypatch, capsys,
                                                  session_name):  # fmt: skip
    monkeypatch.setenv("PERFGATE_REQUIRE_GPU", "maybe")
    monkeypatch.setattr(noxfile, "_has_gpu", lambda: True)  # refused even where a GPU is
    posargs = ("--base", "HEAD") if session_name == "ab" else ()
    with exits_2(capsys, r"PERFGATE_REQUIRE_GPU must be one of 1, true, yes, on .*got 'maybe'$"):
        getattr(noxfile, session_name)(FakeSession(tmp_path, session_name, *posargs))


NOX = shutil.which("nox")


@pytest.mark.skipif(NOX is None, reason="nox is not on PATH (.ci/run installs it)")
@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["-s", "ab", "gpu"], {}, "nox > ab: error: ab needs --base REV"),
        (["-s", "gpu", "--", "--base", "no-such-rev-xyz"], {}, "nox > gpu: error: --base "),
        (["-s", "bench"], {"PERFGATE_REQUIRE_GPU": "maybe"}, "nox > bench: error: PERFGATE_"),
    ],
)
def test_the_real_nox_exits_2_and_runs_nothing_after(tmp_path, args, env, line):
    # What nox itself does with the SystemExit(2) of a session (nox's own code, not the stand-in):
    # these refusals come before any install, and --no-venv creates no venv.
    done = subprocess.run(
        [NOX, "--no-venv", "-f", str(ROOT / "noxfile.py"), *args],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert line in done.stderr
    assert "Running session gpu" not in done.stderr or args[1] == "gpu"  # nox stopped there


@pytest.mark.parametrize(
    ("posargs", "score"),
    [
        (
            (),
            (
                "--fail-under=perfgate.gate.process_ab=95",
                "--fail-under=perfgate.history.steps=95",
                "--fail-under=perfgate.spawn=90",
            ),
        ),
        (("perfgate.history*",), ()),
    ],
)
def test_mutate_runs_mutmut_then_scores_it(noxfile, tmp_path, posargs, score):
    session = FakeSession(tmp_path, "mutate", *posargs, in_place=True)
    noxfile.mutate(session)
    assert "mutmut==3.8.1" in _pip_installs(session)[-1]  # the pinned mutate extra
    commands = [r for r in session.runs if r[:4] != ("python", "-m", "pip", "install")]
    assert commands == [
        ("mutmut", "run", *posargs),
        ("python", "-m", "tools.mutation_score", *score),
    ]


def test_each_mutation_floor_is_a_module_mutmut_mutates_and_its_tests_exist(noxfile):
    # a floor on a module outside only_mutate would stop the nightly run at its end (exit 2,
    # "its mutants were not all run"), hours in
    from fnmatch import fnmatch

    from perfgate.checkout import PYPROJECT, read_toml

    mutmut = read_toml(PYPROJECT, ValueError, "[tool.mutmut]")["tool"]["mutmut"]
    unmutated = [
        floor
        for floor in noxfile.MUTATION_FLOORS
        if not any(
            fnmatch(floor.partition("=")[0].replace(".", "/") + ".py", pattern)
            for pattern in mutmut["only_mutate"]
        )
    ]
    assert unmutated == []
    tests = mutmut["pytest_add_cli_args_test_selection"]
    assert [t for t in tests if not (ROOT / t).is_file()] == []


def test_the_flags_module_loads_by_path_with_nothing_installed(tmp_path):
    # the noxfile loads perfgate/flags.py by path under nox's own Python, where nothing of the
    # suite is importable: the module must need the standard library alone (-I -S: no site,
    # no PYTHONPATH, no current directory)
    probe = (
        "import importlib.util as u, sys\n"
        f"s = u.spec_from_file_location('flags_by_path', {str(ROOT / 'perfgate' / 'flags.py')!r})\n"
        "m = u.module_from_spec(s)\n"
        "s.loader.exec_module(m)\n"
        "print(m.flag('X', {'X': 'on'}))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe], cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and done.stdout == "True\n", done.stderr[-500:]
