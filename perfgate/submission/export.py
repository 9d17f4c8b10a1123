"""Fold the package ``kernels/`` into the one file the leaderboard takes.

:func:`render` builds the file's text from the package's sources, never from a copy of them:

1. the modules: the import closure of :data:`manifest.ROOTS` inside the package (every
   ``from kernels... import``, inside functions too; see :mod:`perfgate.submission.manifest`),
   each module's source unchanged except that its imports of the package become relative
   (``from kernels.targets import X`` in ``kernels/reducer/build.py`` becomes
   ``from ..targets import X``), so the embedded package works under any name;
2. the native reducer's sources (``SOURCE_FILES`` of ``kernels/reducer/cache.py``);
3. the loader of :mod:`perfgate.submission.runtime` (the part below its marker), and one call
   that installs the package under ``_mxfp4_submission_<digest>`` and binds ``custom_kernel``.

The same package and target always give the same bytes: modules in dependency order (ties by
name), no time stamp, no path of this machine, no commit. The digest in the package's name and
in the header is the sha256 of everything embedded, so two different exports never share a name
in one process.

An import the export cannot rewrite (``import kernels.x``, which binds the package's own name),
a missing module or a table without ``TUNED`` is an :class:`ExportError` naming the file and
line: the kernel engineers see it in the CPU tests, not in a broken submission.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from perfgate import atomic
from perfgate.refusal import Refusal
from perfgate.submission import manifest

MARKER = "# --- exported below this line ---"
NAME_PREFIX = "_mxfp4_submission_"
RUNTIME_PATH = Path(__file__).resolve().with_name("runtime.py")


class ExportError(Refusal):
    """The package cannot be exported as it is, or a bad argument; the message is one line."""


@dataclass(frozen=True)
class Module:
    """One module of the package as it is embedded."""

    name: str  # import name in the package: "kernels.reducer.cache"
    path: Path
    is_package: bool
    source: str  # as written in the package
    embedded: str  # as embedded: imports of the package made relative (or a table's stub)

    @property
    def key(self) -> str:
        """Its path inside the package, as the loader knows it: "", "gemm", "reducer.cache"."""
        return self.name.partition(".")[2]


@dataclass(frozen=True)
class Rendered:
    text: str
    digest: str  # sha256 of everything embedded
    package_name: str  # the private name the file installs its package under
    modules: tuple[Module, ...]
    files: tuple[str, ...]  # native sources, relative to the package directory
    inputs: tuple[Path, ...]  # every file read: what an export must never overwrite


# -- the package ----------------------------------------------------------------------------------
def package_dir() -> Path:
    """The directory of the ``kernels`` package Python finds (this checkout's, from its root)."""
    spec = importlib.util.find_spec(manifest.PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ExportError(f"no package {manifest.PACKAGE!r} on sys.path: run from the checkout")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportError(f"cannot read {path}: {exc}") from None


def _locate(root: Path, name: str) -> tuple[Path, bool] | None:
    """(file, is_package) of module ``name`` in the package at ``root``, or None."""
    parts = name.split(".")[1:]
    init = root.joinpath(*parts, "__init__.py")
    if init.is_file():
        return init, True
    if parts:
        single = root.joinpath(*parts[:-1], parts[-1] + ".py")
        if single.is_file():
            return single, False
    return None


@functools.lru_cache(maxsize=512)
def _parse(source: str, filename: str) -> ast.Module:
    """The module's syntax tree (cached: a render parses each module several times)."""
    return ast.parse(source, filename)


def _package_of(name: str, is_package: bool) -> str:
    return name if is_package else name.rpartition(".")[0]


def _in_package(name: str | None) -> bool:
    return name is not None and (
        name == manifest.PACKAGE or name.startswith(manifest.PACKAGE + ".")
    )


@functools.lru_cache(maxsize=512)
def _imports(root: Path, name: str, path: Path, is_package: bool, source: str) -> tuple:
    """(absolute module, imported submodules, at module level) for each import of the package in
    a module."""
    return tuple(_walk_imports(root, name, path, is_package, source))


def _walk_imports(root: Path, name: str, path: Path, is_package: bool, source: str):
    try:
        tree = _parse(source, str(path))
    except SyntaxError as exc:
        raise ExportError(f"{path}:{exc.lineno}: does not parse: {exc.msg}") from None
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _in_package(alias.name):
                    raise ExportError(
                        f"{path}:{node.lineno}: `import {alias.name}` binds the package's own "
                        f"name; write `from {alias.name.rpartition('.')[0] or alias.name} import "
                        "...` so that the export can embed it"
                    )
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                target = importlib.util.resolve_name(
                    "." * node.level + (node.module or ""), _package_of(name, is_package)
                )
            else:
                target = node.module
            if not _in_package(target):
                continue
            subs = [f"{target}.{a.name}" for a in node.names if _locate(root, f"{target}.{a.name}")]
            yield target, subs, id(node) in top


def _closure(root: Path, roots: tuple[str, ...]) -> dict[str, tuple[Path, bool, str]]:
    found: dict[str, tuple[Path, bool, str]] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        located = _locate(root, name)
        if located is None:
            raise ExportError(f"module {name} is imported but {root} has no such module")
        path, is_package = located
        source = _read(path)
        found[name] = (path, is_package, source)
        parent = name.rpartition(".")[0]
        if parent:
            todo.append(parent)  # a module's package runs first on import
        for target, subs, _ in _imports(root, name, path, is_package, source):
            todo += [target, *subs]
    return found


# -- rewriting ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=512)
def relative_imports(source: str, name: str, is_package: bool, path: Path) -> str:
    """``source`` with every ``from kernels...`` made relative to module ``name``'s package."""
    depth = _package_of(name, is_package).count(".") + 1
    dots = "." * depth
    targets = {}
    for node in ast.walk(_parse(source, str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _in_package(node.module):
            targets[(node.lineno, node.col_offset)] = node
    if not targets:
        return source
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines(keepends=True)
    edits = []  # (line, start col, end col, replacement), in characters
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.NAME or tok.string != "from":
            continue
        # ast columns are UTF-8 byte offsets, tokenize's are characters
        byte_col = len(lines[tok.start[0] - 1][: tok.start[1]].encode("utf-8"))
        if (tok.start[0], byte_col) not in targets:
            continue
        first = tokens[i + 1]
        if first.type != tokenize.NAME or first.string != manifest.PACKAGE:
            raise ExportError(f"{path}:{tok.start[0]}: cannot rewrite this import of the package")
        following = tokens[i + 2]
        end = following.end if following.string == "." else first.end
        if first.start[0] != end[0]:
            raise ExportError(f"{path}:{tok.start[0]}: an import of the package split over lines")
        edits.append((first.start[0], first.start[1], end[1], dots))
    if len(edits) != len(targets):
        raise ExportError(f"{path}: found {len(edits)} of {len(targets)} imports of the package")
    for row, start, end, text in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + text + line[end:]
    out = "".join(lines)
    _check_rewrite(source, out, name, is_package, path)
    return out


def _check_rewrite(before: str, after: str, name: str, is_package: bool, path: Path) -> None:
    """The rewritten module imports exactly what the original did, each import relative."""
    package = _package_of(name, is_package)

    def targets(source: str) -> list[tuple[str, tuple[str, ...]]]:
        out = []
        for node in ast.walk(_parse(source, str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    module = importlib.util.resolve_name(
                        "." * node.level + (node.module or ""), package
                    )
                else:
                    module = node.module or ""
                out.append((node.lineno, module, tuple(a.name for a in node.names)))
        return sorted(out)

    if targets(before) != targets(after):
        raise ExportError(f"{path}: rewriting its imports changed what it imports")
    for node in ast.walk(_parse(after, str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _in_package(node.module):
            raise ExportError(f"{path}:{node.lineno}: an import of the package left absolute")


def _table_stub(module: str, path: Path, source: str, target: str) -> str:
    """The empty table another vendor's table module becomes in this target's export."""
    tree = _parse(source, str(path))
    assigned = {
        t.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }
    if manifest.TABLE_NAME not in assigned:
        raise ExportError(
            f"{path}: a tuned-table module (perfgate/submission/manifest.py TABLE_MODULES) must "
            f"assign {manifest.TABLE_NAME} at top level"
        )
    return (
        f'"""{module}: not part of the {target} export (another vendor\'s tuned table)."""\n\n'
        f"{manifest.TABLE_NAME}: dict = {{}}\n"
    )


def _native_files(root: Path, modules: dict) -> dict[str, str]:
    """The native reducer's sources, relative to the package directory."""
    name = manifest.NATIVE_SOURCES_MODULE
    if name not in modules:
        raise ExportError(f"{name} is not imported by the shipped modules; manifest out of date")
    path, _, source = modules[name]
    listed = None
    for node in _parse(source, str(path)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == manifest.NATIVE_SOURCES_NAME for t in node.targets
        ):
            listed = ast.literal_eval(node.value)
    if not listed or not all(isinstance(f, str) for f in listed):
        raise ExportError(f"{path}: no {manifest.NATIVE_SOURCES_NAME} tuple of file names")
    base = path.parent.relative_to(root)
    return {(base / f).as_posix(): _read(path.parent / f) for f in listed}


def _order(modules: dict[str, tuple[Path, bool, str]], root: Path) -> list[str]:
    """Dependency order (a module after its package and its module-level imports), ties by
    name: the same package always gives the same order."""
    deps: dict[str, set[str]] = {}
    for name, (path, is_package, source) in modules.items():
        top = set()
        for target, subs, at_top in _imports(root, name, path, is_package, source):
            if at_top:
                top.update(m for m in (target, *subs) if m in modules)
        parent = name.rpartition(".")[0]
        deps[name] = (top | ({parent} if parent else set())) - {name}
    done: list[str] = []

    def visit(name: str, stack: set[str]) -> None:
        if name in done or name in stack:
            return
        for dep in sorted(deps[name]):
            visit(dep, stack | {name})
        done.append(name)

    for name in sorted(modules):
        visit(name, set())
    return done


# -- the file -------------------------------------------------------------------------------------
def literal(text: str) -> str:
    """``text`` as a Python string literal: a raw triple-quoted block where that spells it
    exactly (readable), else ``repr``."""
    raw_safe = (
        "'''" not in text
        and not text.endswith("\\")
        and not text.endswith("'")
        and all(c in "\n\t" or c.isprintable() for c in text)
    )
    out = f"r'''{text}'''" if raw_safe else repr(text)
    if ast.literal_eval(out) != text:  # never embed a literal that reads back differently
        out = repr(text)
    return out


def _runtime_code() -> str:
    text = _read(RUNTIME_PATH)
    _, marker, code = text.partition(MARKER + "\n")
    if not marker:
        raise ExportError(f"{RUNTIME_PATH} lacks its marker line {MARKER!r}")
    return code


def _digest(target: str, modules: list[Module], files: dict[str, str], runtime: str) -> str:
    h = hashlib.sha256()

    def part(*fields: str) -> None:
        for f in fields:
            blob = f.encode("utf-8")
            h.update(len(blob).to_bytes(8, "little") + blob)

    part("target", target, "runtime", runtime)
    for m in modules:
        part("module", m.key, str(m.is_package), m.embedded)
    for rel, text in sorted(files.items()):
        part("file", rel, text)
    return h.hexdigest()


def _header(target: str, digest: str) -> str:
    from kernels.targets import TARGETS

    return (
        f"#!POPCORN leaderboard {manifest.LEADERBOARD}\n"
        f"#!POPCORN gpu {TARGETS[target].leaderboard_gpu}\n"
        f"# Generated by `python -m perfgate submission export --target {target}` from the\n"
        "# mxfp4-gemm-suite package kernels/ (docs/submission.md). Do not edit: change kernels/ and\n"
        f"# export again. Content digest: sha256:{digest}\n"
        '"""MXFP4 GEMM: bf16 A quantized to MXFP4 in-kernel, times the pre-shuffled MXFP4 B; bf16 out.\n\n'
        "``custom_kernel(data)`` takes the leaderboard's ``(A, B, B_q, B_shuffle, B_scale_sh)``.\n"
        "The package's modules are embedded below as source and installed under a private name at\n"
        "import; on a GPU the native split-K reducer is built once into a cache (nvcc or hipcc,\n"
        "when present; otherwise the Triton reducer runs). On a CPU the kernels run in Triton's\n"
        'interpreter (set TRITON_INTERPRET=1 before importing).\n"""\n\n'
    )


def check_target(target: str) -> str:
    from kernels.targets import TARGETS

    if target not in TARGETS:
        known = sorted(TARGETS)
        raise ExportError(f"--target must be one of {', '.join(known)}, got {target!r}")
    return target


def render(target: str = manifest.DEFAULT_TARGET, root: Path | None = None) -> Rendered:
    """The exported file for ``target`` from the package at ``root`` (default: the one Python
    finds)."""
    from kernels.targets import TARGETS

    check_target(target)
    root = Path(root).resolve() if root is not None else package_dir()
    found = _closure(root, manifest.ROOTS)
    vendor = TARGETS[target].vendor
    stubs = {m for v, m in manifest.TABLE_MODULES.items() if v != vendor}
    modules = []
    for name in _order(found, root):
        path, is_package, source = found[name]
        if name in stubs:
            embedded = _table_stub(name, path, source, target)
        else:
            if name in manifest.TABLE_MODULES.values():
                _table_stub(name, path, source, target)  # the same check for the kept table
            embedded = relative_imports(source, name, is_package, path)
        modules.append(Module(name, path, is_package, source, embedded))
    files = _native_files(root, found)
    runtime = _runtime_code()
    digest = _digest(target, modules, files, runtime)
    package_name = NAME_PREFIX + digest[:16]
    module_lines = []
    for m in modules:
        rel = m.path.relative_to(root.parent).as_posix()
        module_lines.append(
            f"    # {rel}\n    {m.key!r}: ({m.is_package}, {literal(m.embedded)}),\n"
        )
    file_lines = [f"    {rel!r}: {literal(text)},\n" for rel, text in sorted(files.items())]
    entry = manifest.ENTRY_MODULE.partition(".")[2]
    text = (
        _header(target, digest)
        + runtime
        + "\n\n# The package's modules: path inside the package -> (is a package, source).\n"
        + "_MODULES = {\n"
        + "".join(module_lines)
        + "}\n\n# The native split-K reducer's sources, relative to the package.\n_FILES = {\n"
        + "".join(file_lines)
        + "}\n\n"
        + "# The leaderboard's entry point: the package's own custom_kernel (no wrapper frame).\n"
        + f"custom_kernel = boot(\n    {package_name!r},\n    _MODULES,\n    _FILES,\n"
        + f"    target={target!r},\n    entry=({entry!r}, {manifest.ENTRY_NAME!r}),\n"
        + f"    device_module={manifest.DEVICE_MODULE.partition('.')[2]!r},\n"
        + f"    build_module={manifest.BUILD_MODULE.partition('.')[2]!r},\n)\n"
    )
    inputs = (
        *(m.path for m in modules),
        *(root / rel for rel in files),
        RUNTIME_PATH,
        Path(manifest.__file__).resolve(),
        Path(__file__).resolve(),
    )
    return Rendered(text, digest, package_name, tuple(modules), tuple(sorted(files)), inputs)


def check_out(out: Path, rendered: Rendered, root: Path) -> Path:
    """``out`` resolved; ExportError when it is an input of the export, lies inside the package
    (a new file there would be a module of the package) or is a directory."""
    resolved = Path(out).resolve()
    if resolved in {p.resolve() for p in rendered.inputs}:
        raise ExportError(f"--out {out} is an input of the export; refusing to overwrite it")
    if resolved == root or root in resolved.parents:
        raise ExportError(f"--out {out} lies inside the package {root}; write it elsewhere")
    if resolved.is_dir():
        raise ExportError(f"--out {out} is a directory; name the file to write")
    return resolved


def export(out: Path, target: str = manifest.DEFAULT_TARGET, root: Path | None = None) -> Rendered:
    """Render and write the file atomically (:func:`perfgate.atomic.write_text`); ExportError
    when it cannot be written."""
    root = Path(root).resolve() if root is not None else package_dir()
    rendered = render(target, root)
    path = check_out(out, rendered, root)
    try:
        atomic.write_text(path, rendered.text)
    except OSError as exc:
        raise ExportError(f"cannot write --out {out}: {exc.strerror or exc}") from None
    return rendered
