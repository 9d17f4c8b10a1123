"""Where the built reducer lives and how a build is described (shared by build and loader).

Layout under ``<cache>/reducer/`` (``<cache>`` is ``$MXFP4_CACHE_DIR``, else
``$XDG_CACHE_HOME/mxfp4-gemm-suite``, else ``~/.cache/mxfp4-gemm-suite``):

- ``<key>/libmxfp4_splitk.so`` - one build; the key hashes everything that shapes the binary.
- ``manifest-<arch>.json`` - which build serves architecture ``<arch>`` (``sm90``, ``gfx950``).
- ``build.lock`` - the build lock (an ``fcntl`` lock: released by the kernel when its holder dies).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent
# Every file the compilers read; a change in any of them changes the digest (and the key).
SOURCE_FILES = ("splitk_reduce.cu", "compat.h", "bare_amdgcn.h", "host_grid.h")
LIBRARY_NAME = "libmxfp4_splitk.so"
MANIFEST_SCHEMA = 1


def cache_root() -> Path:
    explicit = os.environ.get("MXFP4_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "mxfp4-gemm-suite"


def reducer_dir(root: Path | None = None) -> Path:
    return (root if root is not None else cache_root()) / "reducer"


def sources_digest(source_dir: Path = SOURCE_DIR) -> str:
    """sha256 over the names and bytes of the reducer's source files."""
    h = hashlib.sha256()
    for name in SOURCE_FILES:
        h.update(name.encode() + b"\0")
        h.update((source_dir / name).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def manifest_path(directory: Path, arch: str) -> Path:
    return directory / f"manifest-{arch}.json"


def write_json_atomic(path: Path, data: dict) -> None:
    """Write-then-rename, so a reader never sees half a manifest (even after a kill)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_manifest(directory: Path, arch: str) -> dict:
    """The manifest for ``arch``; raises FileNotFoundError or ValueError (with the reason)."""
    path = manifest_path(directory, arch)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no native reducer built for {arch} ({path} does not exist)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable manifest {path}: {exc}") from None
    required = {"schema", "key", "library", "archs", "sources_digest"}
    if not isinstance(data, dict) or not required <= data.keys():
        raise ValueError(f"manifest {path} lacks {sorted(required - set(data or {}))}")
    if data["schema"] != MANIFEST_SCHEMA:
        raise ValueError(f"manifest {path} has schema {data['schema']}, expected {MANIFEST_SCHEMA}")
    return data
