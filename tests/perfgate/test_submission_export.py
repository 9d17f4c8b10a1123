"""``perfgate submission export``: the one file, generated from the package, equal to it in every
output bit.

The central test runs the exported file in a fresh Python process that cannot import the suite
(``tests/perfgate/isolated_submission.py``: cwd outside the repository, ``python -I``, and every
import of ``kernels``/``perfgate``/``tests`` refused) and compares its outputs with
``kernels.custom_kernel``'s bit for bit (``view(torch.int16)``, NaN bits included), on small
shapes in the interpreter (split-K, partial tiles, fp4-grid, NaN and inf inputs) and on the
task's shapes on a GPU.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.configs import select_config
from kernels.device import TARGET_DEVICES, device_info
from kernels.gemm import custom_kernel
from kernels.gemm_config import effective_splits
from kernels.layout import shuffle_scales, shuffle_weight
from kernels.mxfp4 import quantize_mxfp4
from kernels.reference import generate_input, lossless_input
from kernels.shapes import LEADERBOARD, TEST_SHAPES
from kernels.targets import TARGETS
from perfgate.submission import export, load, manifest

REPO = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).resolve().with_name("isolated_submission.py")


def _target_here() -> str:
    """The export whose tuned table this device uses (the interpreter: any, tables unused)."""
    arch = device_info().arch
    return arch if arch in TARGETS else manifest.DEFAULT_TARGET


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "submission.py"
    export.export(out, _target_here())
    return out


def _special_inputs() -> list[tuple]:
    """NaN rows and the inf classes on fp4-grid operands, one input each."""
    cases = []
    a, b, b_q, b_sh, b_s = lossless_input(6, 64, 256, seed=3)
    a = a.clone()
    a[1, 0], a[4, 255] = math.nan, -math.nan
    cases.append((a, b, b_q, b_sh, b_s))
    a, b, *_ = lossless_input(4, 64, 128, seed=11)
    a, b = a.clone(), b.clone()
    b[2:, 3] = 0
    a[0, 3], a[1, 70], a[2, 3], a[2, 100], a[3, 5] = (
        math.inf,
        -math.inf,
        math.inf,
        -math.inf,
        3.2e38,
    )
    b_q, b_scale = quantize_mxfp4(b)
    cases.append((a, b, b_q, shuffle_weight(b_q), shuffle_scales(b_scale)))
    return cases


def _cpu_inputs() -> list[tuple]:
    split = (4, 64, 4096)
    info = device_info()
    assert effective_splits(split[2], select_config(*split, info)) > 1, "pick a split-K shape"
    return [
        generate_input(5, 64, 256, seed=1),
        generate_input(33, 128, 320, seed=2),  # partial M tile, K not a multiple of 256
        generate_input(*split, seed=3),  # split-K through the reducer
        lossless_input(7, 64, 384, seed=4),
        *_special_inputs(),
    ]


def _run_isolated(file: Path, inputs: list[tuple], tmp_path: Path) -> tuple[list, dict]:
    ins, outs = tmp_path / "inputs.pt", tmp_path / "outputs.pt"
    torch.save(inputs, ins)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        [sys.executable, "-I", str(RUNNER), str(file), str(ins), str(outs)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(outs), json.loads(done.stdout.strip().splitlines()[-1])


def _assert_same_bits(got: list, inputs: list[tuple], device) -> None:
    for i, (out, data) in enumerate(zip(got, inputs, strict=True)):
        want = custom_kernel(tuple(t.to(device) for t in data)).cpu()
        assert out.dtype == want.dtype == torch.bfloat16 and out.shape == want.shape
        same = out.view(torch.int16) == want.view(torch.int16)
        assert bool(same.all()), f"input {i}: {int((~same).sum())} of {same.numel()} bits differ"


def test_exported_file_gives_the_packages_bits_in_isolation(exported, tmp_path, device):
    if device.type == "cuda":
        pytest.skip("the GPU variant below runs the task's shapes")
    inputs = _cpu_inputs()
    got, report = _run_isolated(exported, inputs, tmp_path)
    assert report["suite_modules"] == [], report
    assert report["packages"] == [export.render(_target_here()).package_name]
    _assert_same_bits(got, inputs, device)


@pytest.mark.gpu
def test_exported_file_gives_the_packages_bits_on_the_task_shapes(exported, tmp_path):
    inputs = [generate_input(*s, seed=s.m + 17, device="cuda") for s in TEST_SHAPES + LEADERBOARD]
    inputs += [tuple(t.cuda() for t in d) for d in _special_inputs()]
    got, report = _run_isolated(exported, inputs, tmp_path)
    assert report["suite_modules"] == [], report
    _assert_same_bits(got, inputs, torch.device("cuda"))


# -- the file's form ------------------------------------------------------------------------------
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_first_lines_are_the_popcorn_directives(target):
    lines = export.render(target).text.splitlines()
    assert lines[0] == f"#!POPCORN leaderboard {manifest.LEADERBOARD}"
    # GPU MODE's runner names, written out here so that a wrong registry entry cannot check itself
    assert lines[1] == f"#!POPCORN gpu {RUNNER_NAMES[target]}"
    assert load.directives("\n".join(lines)) == {
        "leaderboard": "amd-mxfp4-mm",
        "gpu": RUNNER_NAMES[target],
    }


RUNNER_NAMES = {"gfx950": "MI355X", "sm90": "H100"}


def test_every_target_names_its_leaderboard_runner():
    assert {name: t.leaderboard_gpu for name, t in TARGETS.items()} == RUNNER_NAMES


def _top_modules(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_imports_only_the_standard_library_torch_and_triton(target):
    rendered = export.render(target)
    sources = [rendered.text, *(m.embedded for m in rendered.modules)]
    allowed = set(sys.stdlib_module_names) | {"torch", "triton"}
    for source in sources:
        assert _top_modules(source) <= allowed, _top_modules(source) - allowed
    for m in rendered.modules:
        for node in ast.walk(ast.parse(m.embedded)):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module.split(".")[0] != "kernels", f"{m.name}: {node.module}"


def test_the_same_package_gives_the_same_bytes(tmp_path):
    # another process with a hash seed of its own: no set or dict order leaks into the file
    out = tmp_path / "sub.py"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    cmd = [sys.executable, "-m", "perfgate", "submission", "export", "--out", str(out)]
    subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True)
    assert out.read_bytes() == export.render(manifest.DEFAULT_TARGET).text.encode()
    assert export.render(manifest.DEFAULT_TARGET).text == export.render().text


def test_targets_differ_only_in_their_directive_table_and_digest():
    gfx, sm = (export.render(t) for t in ("gfx950", "sm90"))
    assert gfx.package_name != sm.package_name
    kept = {m.key: m.embedded for m in gfx.modules}
    for m in sm.modules:
        if m.name not in manifest.TABLE_MODULES.values():
            assert kept[m.key] == m.embedded, m.name


def test_each_export_keeps_its_vendors_table_only(tmp_path):
    from kernels.configs import tuned_table

    for target in ("gfx950", "sm90"):
        out = tmp_path / f"{target}.py"
        export.export(out, target)
        sub = load.load(out)
        configs = sys.modules[sub.module.custom_kernel.__module__.rpartition(".")[0] + ".configs"]
        for name, info in TARGET_DEVICES.items():
            got = {s: c.as_dict() for s, c in configs.tuned_table(info).items()}
            want = {s: c.as_dict() for s, c in tuned_table(info).items()} if name == target else {}
            assert got == want, (target, name)


def test_modules_are_the_closure_of_the_entry_point():
    names = [m.name for m in export.render().modules]
    assert names.index("kernels") == 0  # a package before its modules
    assert names.index("kernels.targets") < names.index("kernels.gemm")  # dependencies first
    for needed in (
        "kernels._gemm_kernel",
        "kernels._quant",
        "kernels.splitk",
        "kernels.reducer.build",
    ):
        assert needed in names
    for test_only in ("kernels.reference", "kernels.shapes", "kernels.reducer.host"):
        assert test_only not in names


def _embedded_tables(text: str) -> dict[str, dict]:
    """The file's _MODULES and _FILES dicts, read back from its text."""
    found = {}
    for node in ast.parse(text).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id in ("_MODULES", "_FILES"):
            found[target.id] = ast.literal_eval(node.value)
    return found


def test_the_file_embeds_exactly_the_packages_sources():
    from kernels.reducer.cache import SOURCE_DIR, SOURCE_FILES

    rendered = export.render()
    tables = _embedded_tables(rendered.text)
    assert tables["_FILES"] == {f"reducer/{f}": (SOURCE_DIR / f).read_text() for f in SOURCE_FILES}
    assert tables["_MODULES"] == {m.key: (m.is_package, m.embedded) for m in rendered.modules}
    for m in rendered.modules:
        if m.name in manifest.TABLE_MODULES.values() and m.embedded != m.source:
            continue  # another vendor's table: a stub (test_each_export_keeps_...)
        assert m.source == m.path.read_text()
        # only import lines change, and the line count stays (tracebacks point at real lines)
        before, after = m.source.splitlines(), m.embedded.splitlines()
        assert len(before) == len(after), m.name
        for old, new in zip(before, after, strict=True):
            if old != new:
                assert old.lstrip().startswith("from kernels"), (m.name, old)
                assert new.lstrip().startswith("from ."), (m.name, new)


def test_literals_read_back_exactly():
    for text in ["plain\n", "a '''b''' c\n", "ends in backslash \\", "cr\r\n", "nul\0", "q'"]:
        assert ast.literal_eval(export.literal(text)) == text
    assert export.literal("x = 1\n").startswith("r'''")  # readable where it can be


def test_the_build_module_keeps_the_api_the_loader_calls():
    # the exported file's import-time build calls build((arch,), log=...) and catches failures;
    # the device module gives the arch. A renamed function fails here, on a CPU.
    import inspect

    from kernels.device import device_info as info_fn
    from kernels.reducer import build

    inspect.signature(build.build).bind(("sm90",), log=print)
    assert info_fn().arch
    assert issubclass(build.BuildError, Exception)


# -- robustness to changes in kernels/: a copy of the package, changed ----------------------------
@pytest.fixture
def package_copy(tmp_path) -> Path:
    root = tmp_path / "kernels"
    shutil.copytree(REPO / "kernels", root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_new_module_ships_once_something_imports_it(package_copy):
    (package_copy / "_extra.py").write_text("VALUE = 7\n")
    gemm = package_copy / "gemm.py"
    gemm.write_text(
        gemm.read_text().replace(
            "import torch\n", "import torch\n\nfrom kernels._extra import VALUE  # noqa\n", 1
        )
    )
    rendered = export.render(root=package_copy)
    assert "kernels._extra" in [m.name for m in rendered.modules]
    assert "from ._extra import VALUE" in {m.key: m.embedded for m in rendered.modules}["gemm"]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ("import kernels.targets\n", r"gemm\.py:\d+: `import kernels\.targets` binds the package"),
        ("from kernels.nowhere import X\n", "module kernels.nowhere is imported but"),
    ],
    ids=["import-form", "missing-module"],
)
def test_what_cannot_be_exported_is_named(package_copy, change, match):
    gemm = package_copy / "gemm.py"
    gemm.write_text(gemm.read_text().replace("import torch\n", f"import torch\n{change}", 1))
    with pytest.raises(export.ExportError, match=match):
        export.render(root=package_copy)


def test_a_table_without_tuned_is_named(package_copy):
    table = package_copy / "_configs_nvidia.py"
    table.write_text(table.read_text().replace("TUNED:", "TABLE:"))
    with pytest.raises(export.ExportError, match=r"_configs_nvidia\.py: a tuned-table module"):
        export.render("gfx950", root=package_copy)


# -- --out ----------------------------------------------------------------------------------------
def test_out_is_written_atomically_and_never_over_an_input(tmp_path):
    out = tmp_path / "deep" / "sub.py"
    rendered = export.export(out)
    assert out.read_text() == rendered.text and oct(out.stat().st_mode & 0o777) == "0o644"
    assert not list(out.parent.glob(".*.tmp"))
    for victim in (REPO / "kernels" / "gemm.py", REPO / "perfgate" / "submission" / "runtime.py"):
        before = victim.read_bytes()
        with pytest.raises(export.ExportError, match="is an input of the export"):
            export.export(victim)
        assert victim.read_bytes() == before
    with pytest.raises(export.ExportError, match="lies inside the package"):
        export.export(REPO / "kernels" / "new_submission.py")
    assert not (REPO / "kernels" / "new_submission.py").exists()
    link = tmp_path / "link.py"
    link.symlink_to(REPO / "kernels" / "layout.py")
    with pytest.raises(export.ExportError, match="is an input of the export"):
        export.export(link)
    with pytest.raises(export.ExportError, match="is a directory"):
        export.export(tmp_path)
