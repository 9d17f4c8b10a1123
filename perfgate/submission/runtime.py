"""The loader every exported submission carries: the code below ``EXPORTED_MARKER`` is copied
into the file verbatim by :mod:`perfgate.submission.export` (it is tested here, as a module).

An exported file embeds the modules of ``kernels/`` as source strings and the native reducer's
sources as text. :func:`boot` serves those modules under a private package name (a meta-path
finder: the file never registers ``kernels``, so it coexists with the suite's own package in one
process), writes the native sources to a content-addressed directory and builds the reducer
there when a GPU and its compiler are present (once: the build is cached and keyed), and returns
the package's ``custom_kernel``.

Only the standard library is imported here (torch and triton are imported by the embedded
modules): an exported file imports nothing else.
"""

# --- exported below this line ---
import importlib
import importlib.abc
import importlib.machinery
import linecache
import os
import sys
import tempfile
from pathlib import Path


class EmbeddedPackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules embedded in this file as the package ``name``.

    ``modules`` maps a module's path inside the package (``""`` for the package itself,
    ``"gemm"``, ``"reducer.cache"``) to ``(is_package, source)``. Each module gets a file name
    under ``root`` that need not exist: its source is registered with :mod:`linecache`, where
    :mod:`inspect` (and so ``@triton.jit``, which reads its kernels' source) and tracebacks find
    it."""

    def __init__(self, name, modules, root):
        self.name = name
        self.modules = modules
        self.root = Path(root)

    def key(self, fullname):
        """The embedded module's path for an import name, or None when it is not one of them."""
        if fullname == self.name:
            key = ""
        elif fullname.startswith(self.name + "."):
            key = fullname[len(self.name) + 1 :]
        else:
            return None
        return key if key in self.modules else None

    def filename(self, key):
        parts = key.split(".") if key else []
        if self.modules[key][0]:
            return str(self.root.joinpath(*parts, "__init__.py"))
        return str(self.root.joinpath(*parts[:-1], parts[-1] + ".py"))

    def find_spec(self, fullname, path=None, target=None):
        key = self.key(fullname)
        if key is None:
            return None
        is_package = self.modules[key][0]
        spec = importlib.machinery.ModuleSpec(
            fullname, self, origin=self.filename(key), is_package=is_package
        )
        spec.has_location = True  # __file__ = origin: kernels/reducer/cache.py finds its sources
        if is_package:
            # no search path: nothing on disk can be imported as a module of this package
            spec.submodule_search_locations = []
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        key = self.key(module.__name__)
        source = self.modules[key][1]
        filename = self.filename(key)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, fullname):
        key = self.key(fullname)
        if key is None:
            raise ImportError(f"{fullname} is not embedded in this file", name=fullname)
        return self.modules[key][1]

    def is_package(self, fullname):
        key = self.key(fullname)
        if key is None:
            raise ImportError(f"{fullname} is not embedded in this file", name=fullname)
        return self.modules[key][0]


def source_root(name):
    """Where the embedded native sources are written: ``$MXFP4_CACHE_DIR`` (else
    ``$XDG_CACHE_HOME/mxfp4-gemm-suite``, else ``~/.cache/mxfp4-gemm-suite``), then
    ``submission/<name>``; ``name`` holds the content digest, so one directory per content."""
    base = os.environ.get("MXFP4_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "mxfp4-gemm-suite")
    return Path(base) / "submission" / name


def write_files(root, files):
    """Write ``files`` (path under ``root`` -> text) where a file differs; each one atomically
    (a temporary file renamed over it), so a concurrent or killed writer leaves whole files."""
    for rel, text in sorted(files.items()):
        path = root / rel
        blob = text.encode("utf-8")
        try:
            if path.read_bytes() == blob:
                continue
        except OSError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _say(message):
    print(f"mxfp4 submission: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def build_native(package, target, device_module, build_module):
    """Build the native split-K reducer for this GPU (the package's own build: keyed, locked,
    cached, so every import after the first finds it up to date). Any failure leaves the Triton
    reducer in charge (``MXFP4_REQUIRE_NATIVE_REDUCER=1`` turns that into an error at the first
    split-K call); it is reported in one line on stderr."""
    device = importlib.import_module(f"{package}.{device_module}")
    arch = device.device_info().arch
    if arch != target:
        _say(f"exported for {target}, running on {arch}: configs come from the occupancy model")
    try:
        build = importlib.import_module(f"{package}.{build_module}")
        build.build((arch,), log=lambda line: None)
    except Exception as exc:
        _say(f"native split-K reducer not built ({type(exc).__name__}: {exc}); Triton reducer")


def boot(name, modules, files, *, target, entry, device_module, build_module):
    """Install the embedded package as ``name`` (once per process) and return its entry point.

    On a GPU the native sources are written under :func:`source_root` first (the package reads
    them from beside its reducer modules) and the reducer is built; on a CPU nothing is written
    and the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``)."""
    import torch

    module, attr = entry
    if name not in sys.modules:
        gpu = torch.cuda.is_available()
        root = source_root(name)
        if gpu:
            try:
                write_files(root, files)
            except OSError:
                root = Path(tempfile.mkdtemp(prefix=f"{name}-"))
                write_files(root, files)
        sys.meta_path.insert(0, EmbeddedPackage(name, modules, root))
        importlib.import_module(name)
        if gpu:
            build_native(name, target, device_module, build_module)
    return getattr(importlib.import_module(f"{name}.{module}"), attr)
