"""The loader every exported file carries (perfgate/submission/runtime.py), on a small fake
package: private names, relative imports, source for inspect and Triton, files on disk, the
import-time build's contract."""

from __future__ import annotations

import inspect
import itertools
import sys
import types

import pytest

from perfgate.submission import export, runtime

_NAMES = itertools.count()

MODULES = {
    "": (True, '"""the package"""\n'),
    "util": (False, "def double(x):\n    return 2 * x\n"),
    "sub": (True, ""),
    "sub.leaf": (
        False,
        "from __future__ import annotations\n\nfrom pathlib import Path\n\n"
        "from ..util import double\n\nHERE = Path(__file__).resolve().parent\n\n\n"
        "def quadruple(x):\n    return double(double(x))\n",
    ),
}


@pytest.fixture
def installed(tmp_path):
    name = f"_runtime_test_{next(_NAMES)}"
    finder = runtime.EmbeddedPackage(name, MODULES, tmp_path / "root")
    sys.meta_path.insert(0, finder)
    yield name, finder
    sys.meta_path.remove(finder)
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


def test_modules_import_under_the_private_name(installed, tmp_path):
    import importlib

    name, _ = installed
    leaf = importlib.import_module(f"{name}.sub.leaf")
    assert leaf.quadruple(3) == 12  # the relative import reached the sibling package's module
    assert leaf.__file__ == str(tmp_path / "root" / "sub" / "leaf.py")
    assert (tmp_path / "root" / "sub").resolve() == leaf.HERE  # where the native sources go
    assert "def quadruple" in inspect.getsource(leaf.quadruple)  # what @triton.jit reads
    assert inspect.getsourcelines(leaf.quadruple)[1] == 10


def test_nothing_on_disk_becomes_a_module_of_the_package(installed, tmp_path):
    import importlib

    name, _ = installed
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "root" / "sub" / "planted.py").write_text("X = 1\n")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"{name}.sub.planted")


def test_other_names_are_not_served(installed):
    name, finder = installed
    assert finder.find_spec("kernels") is None and finder.find_spec(f"{name}x") is None
    assert finder.find_spec(f"{name}.missing") is None
    with pytest.raises(ImportError, match="not embedded"):
        finder.get_source("kernels.gemm")


def test_a_triton_kernel_defined_in_an_embedded_module_runs(tmp_path):
    # @triton.jit reads its function's source through inspect: an embedded kernel must run
    import importlib

    import torch

    source = (
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def add_one(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    mask = offs < n\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)\n"
    )
    name = f"_runtime_test_{next(_NAMES)}"
    finder = runtime.EmbeddedPackage(name, {"": (True, ""), "k": (False, source)}, tmp_path)
    sys.meta_path.insert(0, finder)
    try:
        k = importlib.import_module(f"{name}.k")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        x = torch.arange(8, dtype=torch.float32, device=device)
        k.add_one[(1,)](x, 8, BLOCK=8)
        assert x.cpu().tolist() == [float(i + 1) for i in range(8)]
    finally:
        sys.meta_path.remove(finder)


def test_write_files_writes_only_what_differs(tmp_path):
    runtime.write_files(tmp_path, {"reducer/a.cu": "int a;\n", "b.h": "x\n"})
    assert (tmp_path / "reducer" / "a.cu").read_text() == "int a;\n"
    stamp = (tmp_path / "b.h").stat().st_mtime_ns
    runtime.write_files(tmp_path, {"reducer/a.cu": "int b;\n", "b.h": "x\n"})
    assert (tmp_path / "reducer" / "a.cu").read_text() == "int b;\n"
    assert (tmp_path / "b.h").stat().st_mtime_ns == stamp
    assert not list(tmp_path.rglob("*.tmp"))


def test_source_root_follows_the_cache_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("MXFP4_CACHE_DIR", str(tmp_path / "c"))
    assert runtime.source_root("p") == tmp_path / "c" / "submission" / "p"
    monkeypatch.delenv("MXFP4_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert runtime.source_root("p") == tmp_path / "x" / "mxfp4-gemm-suite" / "submission" / "p"


def _fake_build_package(arch: str, build):
    name = f"_runtime_test_{next(_NAMES)}"
    pkg = types.ModuleType(name)
    pkg.__path__ = []
    dev = types.ModuleType(f"{name}.device")
    dev.device_info = lambda: types.SimpleNamespace(arch=arch)
    reducer = types.ModuleType(f"{name}.reducer")
    reducer.__path__ = []
    bld = types.ModuleType(f"{name}.reducer.build")
    bld.build = build
    mods = {name: pkg, f"{name}.device": dev, f"{name}.reducer": reducer}
    mods[f"{name}.reducer.build"] = bld
    return name, mods


def test_the_import_time_build_asks_for_this_devices_arch(monkeypatch, capsys):
    calls = []
    name, mods = _fake_build_package("sm90", lambda archs, log: calls.append(archs))
    for k, v in mods.items():
        monkeypatch.setitem(sys.modules, k, v)
    runtime.build_native(name, "sm90", "device", "reducer.build")
    assert calls == [("sm90",)] and capsys.readouterr().err == ""


def test_a_failed_build_leaves_one_line_and_the_triton_reducer(monkeypatch, capsys):
    def fail(archs, log):
        raise RuntimeError("nvcc not found (looked in\n$CUDA_HOME/bin)")

    name, mods = _fake_build_package("gfx950", fail)
    for k, v in mods.items():
        monkeypatch.setitem(sys.modules, k, v)
    runtime.build_native(name, "sm90", "device", "reducer.build")
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "mxfp4 submission: exported for sm90, running on gfx950: configs come from the occupancy model",
        "mxfp4 submission: native split-K reducer not built (RuntimeError: nvcc not found "
        "(looked in $CUDA_HOME/bin)); Triton reducer",
    ]


def test_the_exported_part_is_everything_below_the_marker():
    text = export.RUNTIME_PATH.read_text()
    code = export._runtime_code()
    assert text.endswith(code) and "def boot(" in code and '"""The loader' not in code
