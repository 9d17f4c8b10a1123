"""Which tests the GPU job runs: the one place that says so, and the guard that keeps it true.

The CPU job (``nox -s test``, every push) runs every test. The GPU job (``nox -s gpu``) runs
``pytest --gpu-job``: only the tests in :data:`GPU_JOB`, each entry saying what a GPU changes in
that file (compiled kernels, the native reducer, device timing, a command's GPU path). The rest
run the same on any machine, so the CPU job's run of them is their run; on a GPU box
``nox -s test`` still runs them all, and they pass or skip with their reason there too.

The guard: in every run, a test outside :data:`GPU_JOB` that touches the device fails, naming
this file. A test touches the device when it

- is marked ``gpu`` or ``gfx950`` (it means to run only where a GPU is);
- asks for the ``device`` fixture (tests/conftest.py: the GPU, or the CPU interpreter);
- launches a Triton kernel in its own process (``JITFunction.run`` compiled,
  ``InterpretedFunction.run`` in the interpreter), fixtures included;
- branches on whether a GPU is here (a condition or a skipif that reads ``torch.cuda`` or the
  test module's own ``GPU``/``HIP`` flag).

So a new kernel test cannot silently fall out of the GPU job: on the CPU job it fails until its
file is listed here (or it stops touching the device).

``--changed-since REV`` (the GPU smoke, ``nox -s gpu -- --changed-since REV``) keeps, of what
is selected, the tests of the files changed since REV (committed or not): a changed test file's
own tests, and the tests that import a changed module of the suite, directly or through others.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import subprocess
import textwrap
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# test file (or folder, ending in "/") -> what a GPU changes in it
GPU_JOB: dict[str, str] = {
    "tests/test_gemm.py": "the GEMM compiled for this GPU: every kernel test, the bound launch",
    "tests/test_quant_kernel.py": "the in-kernel quantizer compiled for this GPU, bit for bit",
    "tests/test_splitk.py": "split-K: the Triton reducer compiled, the native reducer loaded",
    "tests/test_reducer_native.py": "the native reducer built by nvcc/hipcc and run",
    "tests/test_gemm_gfx950.py": "the gfx950 compile by this runner's own triton (on the "
    "MI355X, the ROCm image's: the compiler its kernels are built with)",
    "tests/test_configs.py": "configs sized by this GPU's device facts",
    "tests/test_reference.py": "the reference's NaN/inf bits on the GPU",
    "tests/perfgate/test_timing.py": "the device clock: events, graphs, the flush",
    "tests/perfgate/test_host.py": "the host counts of the compiled launcher and native reducer",
    "tests/perfgate/test_fingerprint.py": "the fingerprint read from the driver",
    "tests/perfgate/test_plugin.py": "the benchmark harness on the device",
    "tests/perfgate/test_submission_bench.py": "a submission timed on the device",
    "tests/perfgate/test_submission_runtime.py": "a submission's calls on the device",
    "tests/perfgate/test_submission_ab.py": "the submission A/B worker on the device",
    "tests/perfgate/test_submission_export.py": "the exported file's bits on this GPU",
    "tests/lab/test_leaderboard_drift.py": "the drift tool's answer where a GPU is",
    "tests/test_gpu_job.py": "this guard seeing a compiled launch",
    "tests/perfgate/test_interpreter_skips.py": "the kernels compiled: the interpreter's skips "
    "left out (the interpreted launches skip)",
    "tests/submission/": "the contract tests on this GPU's one-file export (the job passes "
    "--submission): its compiled kernels, every leaderboard output, both tiers",
}
# Run by another step of the GPU job, never by its pytest step (the reason is the step).
OTHER_STEP: dict[str, str] = {
    "tests/perf/": "the benchmarks: the job's bench, bench --submission and ab steps time them",
}


def in_gpu_job(path: str) -> bool:
    """Whether the test file ``path`` (relative to the checkout, /-separated) is the GPU job's."""
    return any(path == e or (e.endswith("/") and path.startswith(e)) for e in GPU_JOB)


def covered(path: str) -> bool:
    return in_gpu_job(path) or any(path.startswith(e) for e in OTHER_STEP)


def _relative(item: pytest.Item) -> str:
    """The test's file relative to the checkout (a file outside it: its whole path)."""
    path = Path(str(item.path)).resolve()
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.as_posix()


# -- what touches the device ----------------------------------------------------------------------
class _Launches:
    """The Triton launches of this process: how many, and the entry the last one went through."""

    count = 0
    where = ""


def _count_launches(cls, where: str) -> None:
    run = cls.run

    def counted(self, *args, **kwargs):
        _Launches.count += 1
        _Launches.where = where
        return run(self, *args, **kwargs)

    counted.__wrapped__ = run  # type: ignore[attr-defined]
    cls.run = counted


def _watch_launches() -> None:
    """Count every Triton launch of this process (compiled or interpreted)."""
    import triton.runtime.jit as jit

    if not hasattr(jit.JITFunction.run, "__wrapped__"):
        _count_launches(jit.JITFunction, "JITFunction.run")
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # a triton without the interpreter: compiled launches only
        return
    if not hasattr(InterpretedFunction.run, "__wrapped__"):
        _count_launches(InterpretedFunction, "InterpretedFunction.run")


def _reads_the_gpu(node: ast.AST) -> bool:
    """``node`` reads whether a GPU is here: ``torch.cuda...`` or a test module's ``GPU``/``HIP``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr == "cuda":
            return True
        if isinstance(sub, ast.Name) and sub.id in ("GPU", "HIP"):
            return True
    return False


def _gpu_branch(item: pytest.Item) -> bool:
    """The test, or a fixture of its own folder's making, decides by the GPU: a condition
    (``if``, a conditional expression, a skipif decorator) that reads it. Planting a GPU with
    monkeypatch is no branch: it runs the same anywhere."""
    functions = [getattr(item, "function", None)]
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    functions += [d.func for ds in defs.values() for d in ds if _in_tests(d.func)]
    return any(_branches(f) for f in functions if f is not None)


def _in_tests(function) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and Path(code.co_filename).is_relative_to(REPO / "tests")


@cache
def _branches(function) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)) and _reads_the_gpu(node.test):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            _reads_the_gpu(d) for d in node.decorator_list
        ):
            return True
    return False


def static_touch(item: pytest.Item) -> str | None:
    """Why ``item`` touches the device, as far as can be told before it runs; None if not."""
    for marker in ("gpu", "gfx950"):
        if item.get_closest_marker(marker):
            return f"it is marked {marker}"
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(Path(d.func.__code__.co_filename) == REPO / "tests" / "conftest.py"
           for d in defs.get("device", ())):  # fmt: skip
        return "it asks for the device fixture"
    if _gpu_branch(item):
        return "it branches on whether a GPU is here"
    return None


# -- the options, the selection and the guard ----------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-job", "the GPU job's selection (tests/gpu_job.py)")
    group.addoption(
        "--gpu-job",
        action="store_true",
        help="run only the tests the GPU job runs (tests/gpu_job.py GPU_JOB)",
    )
    group.addoption(
        "--changed-since",
        metavar="REV",
        default=None,
        help="keep only the tests of the files changed since REV, committed or not: changed "
        "test files, and tests importing a changed module (the GPU smoke)",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under --gpu-job a test file outside the job is not even imported: each xdist worker
    collects only the job's files."""
    if not config.getoption("--gpu-job") or collection_path.is_dir():
        return None
    if not (collection_path.name.startswith("test_") and collection_path.suffix == ".py"):
        return None
    path = collection_path.resolve()
    relative = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
    return None if in_gpu_job(relative) else True


def pytest_configure(config: pytest.Config) -> None:
    rev = config.getoption("--changed-since")
    if rev is not None:
        config.stash[_CHANGED] = changed_files(rev)


def pytest_collection_finish(session: pytest.Session) -> None:
    # before the first test, in a process that runs tests: a process that only collects, or
    # stops at its options, loads no triton (nor the torch triton's first import asks)
    if not session.config.option.collectonly:
        _watch_launches()


_CHANGED = pytest.StashKey[list[str]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    changed = config.stash.get(_CHANGED, None)
    affected = affected_tests(changed) if changed is not None else None
    for item in items:
        path = _relative(item)
        selected = (not config.getoption("--gpu-job") or in_gpu_job(path)) and (
            affected is None or path in affected
        )
        (keep if selected else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if changed is not None:
        files = sorted({_relative(i) for i in keep})
        reach = (
            "every test (a change to " + ", ".join(EVERYTHING) + ")"
            if affected is None
            else (f"{len(keep)} test(s) in {len(files)} file(s): {', '.join(files) or 'none'}")
        )
        config.stash[_SMOKE] = f"--changed-since: {len(changed)} changed file(s); {reach}"


_SMOKE = pytest.StashKey[str]()


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    return config.stash.get(_SMOKE, None)


_LAUNCHED = pytest.StashKey[str]()


@contextlib.contextmanager
def _watching(item: pytest.Item):
    """Notes on ``item`` a Triton launch made inside the block (its fixtures' or its own)."""
    before = _Launches.count
    try:
        yield
    finally:
        if _Launches.count > before:
            item.stash[_LAUNCHED] = _Launches.where


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    with _watching(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with _watching(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    path = _relative(item)
    if covered(path):
        return report
    why = None
    if report.when == "setup":  # before a skip: a gpu-marked test is skipped on a CPU
        why = static_touch(item)
    elif report.when == "call" and report.passed:
        launched = item.stash.get(_LAUNCHED, None)
        why = None if launched is None else f"it launched a Triton kernel ({launched})"
    if why is not None:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} touches the device ({why}) but the GPU job does not run "
            f"{path}: add it to GPU_JOB in tests/gpu_job.py, saying what a GPU changes in it"
        )
    return report


# -- the files a change touches -------------------------------------------------------------------
def changed_files(rev: str) -> list[str]:
    """Files changed between REV and the working tree (committed, staged or not, untracked)."""

    def git(*args: str) -> list[str]:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise pytest.UsageError(
                f"--changed-since {rev!r}: {done.stderr.strip() or 'git failed'}"
            )
        return [line for line in done.stdout.splitlines() if line]

    git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    tracked = git("diff", "--name-only", rev)
    untracked = git("ls-files", "--others", "--exclude-standard")
    return sorted(set(tracked) | set(untracked))


# a change to one of these can move any test: every selected test runs
EVERYTHING = ("pyproject.toml", "tests/conftest.py", "tests/gpu_job.py")
PACKAGES = ("kernels", "perfgate", "lab", "tools", "tests")


def _module_of(path: str) -> str | None:
    p = Path(path)
    if p.parts[:1] and p.parts[0] in PACKAGES and p.suffix == ".py":
        parts = list(p.with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    if p.parts[:1] and p.parts[0] in PACKAGES and len(p.parts) > 1:
        return ".".join(p.parent.parts)  # a native source or data file: its package
    return None


@cache
def _imports() -> dict[str, frozenset[str]]:
    """Each module of the suite -> the suite's modules it imports (any depth in the file)."""
    graph: dict[str, frozenset[str]] = {}
    for package in PACKAGES:
        for file in (REPO / package).rglob("*.py"):
            module = _module_of(file.relative_to(REPO).as_posix())
            try:
                tree = ast.parse(file.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            found = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module)
                    found.update(f"{node.module}.{a.name}" for a in node.names)
            graph[module] = frozenset(m for m in found if m.split(".")[0] in PACKAGES)
    return graph


def _reaches(module: str, targets: set[str]) -> bool:
    graph, seen, todo = _imports(), set(), [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if any(current == t or current.startswith(t + ".") for t in targets):
            return True
        todo.extend(graph.get(current, ()))
    return False


def affected_tests(changed: list[str]) -> set[str] | None:
    """The test files a change reaches; None when it reaches every test (:data:`EVERYTHING`)."""
    if any(path in EVERYTHING for path in changed):
        return None
    targets = {m for m in map(_module_of, changed) if m is not None}
    # a conftest's fixtures reach every test below it without an import
    folders = [str(Path(p).parent) + "/" for p in changed if Path(p).name == "conftest.py"]
    tests = {file.relative_to(REPO).as_posix() for file in (REPO / "tests").rglob("test_*.py")}
    return {
        t for t in tests
        if _reaches(_module_of(t), targets) or any(t.startswith(f) for f in folders)
    }  # fmt: skip
