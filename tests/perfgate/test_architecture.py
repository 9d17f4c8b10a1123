"""perfgate's house rules, read from its source: no import circle, thin commands on a library,
and nothing of the product (perfgate/, kernels/) importing the lab above it.

Every import counts, the ones inside functions too (a lazy import hides a circle from Python,
not from a reader). ``from perfgate.x import y`` is an edge to ``perfgate.x.y`` when that is a
module, to ``perfgate.x`` otherwise.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "perfgate"
COMMANDS = "perfgate.commands"
SHARED_BASE = "perfgate.commands.base"


def modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _target(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(mods: dict[str, Path]) -> set[tuple[str, str]]:
    edges = set()
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                # a submodule imported by name is an edge to it, not to its package
                wanted = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            else:
                continue
            for want in wanted:
                target = _target(want, mods)
                if target and target != name and target.split(".")[0] == PACKAGE:
                    edges.add((name, target))
    return edges


def circles(mods: dict[str, Path], edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    out = {m: sorted(b for a, b in edges if a == m) for m in mods}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in out[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for m in mods:
        if m not in index:
            visit(m)
    return found


def levels(mods: dict[str, Path], edges: set[tuple[str, str]]) -> int:
    """The longest import chain, in modules (meaningful only without circles)."""
    out = {m: [b for a, b in edges if a == m] for m in mods}
    depth: dict[str, int] = {}

    def of(m: str) -> int:
        if m not in depth:
            depth[m] = 1 + max((of(d) for d in out[m]), default=0)
        return depth[m]

    return max(of(m) for m in mods)


def plant(root: Path, files: dict[str, str]) -> dict[str, Path]:
    """A small perfgate package of ``files`` (path: source) under ``root``, and its modules."""
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(text + "\n")
    return modules(root)


MODS = modules()
EDGES = import_edges(MODS)


def test_perfgate_has_no_import_circle():
    assert circles(MODS, EDGES) == []


def test_no_command_imports_another_command():
    offenders = sorted(
        (a, b)
        for a, b in EDGES
        if a.startswith(f"{COMMANDS}.") and b.startswith(f"{COMMANDS}.") and b != SHARED_BASE
    )
    assert offenders == []


def test_the_library_never_imports_a_command():
    offenders = sorted(
        (a, b)
        for a, b in EDGES
        if not a.startswith((COMMANDS, "perfgate.__main__")) and b.startswith(COMMANDS)
    )
    assert offenders == []


HUNT = "perfgate.hunt"
STORE = "perfgate.history"


def store_to_hunt(edges: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The imports that point the wrong way: the run store reaching up into the hunt."""
    return sorted((a, b) for a, b in edges if a.startswith(STORE) and b.startswith(HUNT))


def test_the_hunt_reads_the_store_and_the_store_never_the_hunt():
    assert store_to_hunt(EDGES) == []
    # the rule is not empty: the hunt does read the store (culprits' good commits)
    assert any(a.startswith(HUNT) and b.startswith(STORE) for a, b in EDGES)


def test_the_store_rule_catches_a_planted_import(tmp_path):
    mods = plant(tmp_path, {
        "history/store.py": "def f():\n    from perfgate.hunt import lines",
        "hunt/lines.py": "from perfgate.history import store",
    })  # fmt: skip
    assert store_to_hunt(import_edges(mods)) == [("perfgate.history.store", "perfgate.hunt.lines")]


LAB = "lab"
PRODUCT = ("perfgate", "kernels")


def lab_imports(root: Path = ROOT) -> list[str]:
    """``file:line`` of every import of the lab in the product's modules: ``import lab...``,
    ``from lab... import``, and ``import_module``/``__import__`` of a literal ``lab...`` name.
    The product reaches the lab only through the name ``PERFGATE_VARIANTS`` holds at run time
    (perfgate/variants.py)."""

    def is_lab(name: str) -> bool:
        return name == LAB or name.startswith(f"{LAB}.")

    found = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                elif isinstance(node, ast.Call) and node.args:
                    func = node.func
                    called = getattr(func, "attr", None) or getattr(func, "id", None)
                    first = node.args[0]
                    if called in ("import_module", "__import__") and isinstance(
                        first, ast.Constant
                    ):
                        names = [str(first.value)]
                if any(is_lab(n) for n in names):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_the_product_imports_nothing_of_the_lab():
    assert lab_imports() == []


@pytest.mark.parametrize(
    "text",
    [
        "import lab",
        "from lab import inject",
        "import lab.variants as v",
        "def f():\n    from lab.experiment import main",
        "import importlib\nimportlib.import_module('lab.variants')",
        "__import__('lab')",
    ],
)
def test_the_lab_rule_catches_planted_imports(tmp_path, text):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "ok.py").write_text("import labels\nfrom perfgate import lab_notes\n")
    (tmp_path / "perfgate" / "sub").mkdir(parents=True)
    (tmp_path / "perfgate" / "sub" / "bad.py").write_text(text + "\n")
    assert lab_imports(tmp_path) == [f"perfgate/sub/bad.py:{text.count(chr(10)) + 1}"]


def test_every_command_module_is_registered_and_thin():
    from perfgate.__main__ import _COMMAND_MODULES

    commands = {m for m in MODS if m.startswith(f"{COMMANDS}.") and m != SHARED_BASE}
    assert set(_COMMAND_MODULES) == commands


# The rules must be able to fail: the checks above run on these small planted trees too.
@pytest.mark.parametrize(
    "files, circle, command_edge",
    [
        (
            {"a.py": "from perfgate import b", "b.py": "def f():\n    import perfgate.a"},
            True,
            False,
        ),
        ({"commands/x.py": "from perfgate.commands import y", "commands/y.py": ""}, False, True),
        (
            {"commands/x.py": "from perfgate.commands import base", "commands/base.py": ""},
            False,
            False,
        ),
        ({"a.py": "from . import b", "b.py": "from .c import d", "c.py": ""}, False, False),
    ],
)
def test_the_rules_catch_planted_trees(tmp_path, files, circle, command_edge):
    mods = plant(tmp_path, files)
    edges = import_edges(mods)
    assert bool(circles(mods, edges)) is circle
    crossing = [
        (a, b)
        for a, b in edges
        if a.startswith(f"{COMMANDS}.") and b.startswith(f"{COMMANDS}.") and b != SHARED_BASE
    ]
    assert bool(crossing) is command_edge


# -- imports at the top -------------------------------------------------------------------------
# An import waits inside a function only for what is heavy to load: the libraries below, and
# kernels (the A/B worker puts a revision's kernels first on sys.path before they load). A
# module is heavy when it or its packages import one at module level, directly or through
# perfgate/lab modules; a library neither the standard one nor named light counts as heavy, so
# this rule asks to move only what is surely light.
HEAVY = ("torch", "triton", "numpy", "scipy", "matplotlib", "rich", "docker", "psycopg",
         "ruptures", "hypothesis", "pytest", "kernels")  # fmt: skip
OURS = ("perfgate", "lab")
LIGHT = ("tomli",)  # the TOML reader before Python 3.11 (tomllib)


def _imported(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, mods) -> list[str]:
    """The modules an import statement of module ``name`` loads (their packages aside)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        up = name.split(".") if is_package else name.split(".")[:-1]
        up = up[: len(up) - (node.level - 1)]
        base = ".".join([*up, base] if base else up)
    return [base, *(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods)]


def _top_and_inner(tree: ast.Module):
    """(module-level imports, imports inside functions): ``if TYPE_CHECKING:`` counts as neither,
    an import of a function under ``except ImportError`` (an optional library) is no inner one."""
    top, inner = [], []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if (
                in_function
                and isinstance(child, ast.Try)
                and any(
                    h.type is None or "ImportError" in ast.unparse(h.type) for h in child.handlers
                )
            ):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (inner if in_function else top).append(child)
            scope = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit(child, in_function or scope)

    visit(tree, False)
    return top, inner


def lazy_light_imports(root: Path = ROOT) -> list[str]:
    """``file:line`` of every import inside a function of perfgate/ or lab/ whose modules are
    all light and do not load the importing module back (moving it up makes no circle)."""
    mods = {k: v for package in OURS for k, v in modules(root, package).items()}
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in mods.items()}
    loads: dict[str, set[str]] = {}  # module: what importing it loads at module level
    inner: dict[str, list] = {}
    for name, tree in trees.items():
        top, inner[name] = _top_and_inner(tree)
        is_package = mods[name].name == "__init__.py"
        loads[name] = {m for n in top for m in _imported(n, name, is_package, mods)}

    def with_packages(module: str) -> list[str]:
        parts = module.split(".")
        return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]

    def reach(targets: list[str]) -> set[str] | None:
        """The modules of ours that importing ``targets`` loads; None where it loads a heavy one."""
        out: set[str] = set()
        todo = [p for t in targets for p in with_packages(t)]
        while todo:
            module = todo.pop()
            top_name = module.split(".")[0]
            if top_name in HEAVY:
                return None
            if top_name not in OURS:
                if top_name in sys.stdlib_module_names or top_name in LIGHT:
                    continue
                return None
            if module in out or module not in mods:  # not a module: a name one defines
                continue
            out.add(module)
            todo += [p for dep in loads[module] for p in with_packages(dep)]
        return out

    found = []
    for name, nodes in inner.items():
        is_package = mods[name].name == "__init__.py"
        for node in nodes:
            reached = reach(_imported(node, name, is_package, mods))
            if reached is not None and name not in reached:
                found.append(f"{mods[name].relative_to(root)}:{node.lineno}")
    return found


def test_light_imports_sit_at_the_top_of_their_module():
    # a reader sees a module's dependencies in its first lines; --help stays light because
    # what is heavy stays inside functions (tests/perfgate/test_cli.py)
    assert lazy_light_imports() == []


def test_the_top_import_rule_catches_planted_imports(tmp_path):
    plant(tmp_path, {
        "light.py": "import json",
        "heavy.py": "import numpy",
        "via.py": "from perfgate import heavy",
        "back.py": "from perfgate import user",
        "user.py": "def f():\n    import os\n    from perfgate import light\n"
                   "    from perfgate.via import x\n    import torch\n    from perfgate import back\n"
                   "    from kernels import gemm\n    from perfgate import heavy as h",
    })  # fmt: skip
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "__init__.py").write_text("def f():\n    from perfgate import light\n")
    assert sorted(lazy_light_imports(tmp_path)) == [
        "lab/__init__.py:2",
        "perfgate/user.py:2",
        "perfgate/user.py:3",
    ]


if (
    __name__ == "__main__"
):  # the figures the issue asks for: python tests/perfgate/test_architecture.py
    print(f"modules {len(MODS)}, import edges {len(EDGES)}, levels {levels(MODS, EDGES)}")
