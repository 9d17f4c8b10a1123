"""perfgate's house rules, read from its source: no import circle, thin commands on a library,
and nothing of the product (perfgate/, kernels/) importing the lab above it.

Every import counts, the ones inside functions too (a lazy import hides a circle from Python,
not from a reader). ``from perfgate.x import y`` is an edge to ``perfgate.x.y`` when that is a
module, to ``perfgate.x`` otherwise.
"""

from __future__ import annotations

import ast
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


if (
    __name__ == "__main__"
):  # the figures the issue asks for: python tests/perfgate/test_architecture.py
    print(f"modules {len(MODS)}, import edges {len(EDGES)}, levels {levels(MODS, EDGES)}")
