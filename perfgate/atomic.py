"""perfgate's one file writer: a reader sees the old file or the new one, never half of either.

Every file perfgate writes (timing baselines, ISA baselines, compare JSON and markdown reports)
goes through :func:`write_text`:

- the temporary file is created in the target's directory, so that ``os.replace`` is a rename
  within one file system, which POSIX and Windows make atomic;
- it gets mode 0644 whatever the umask or the replaced file's mode: baselines are committed and
  reports are read by other CI users, and git records only the executable bit, so a mode that
  depended on who wrote the file last would be noise;
- it is flushed and fsynced before the rename, so that a crash right after cannot leave an empty
  file under the final name;
- on any failure (an exception, KeyboardInterrupt) the temporary file is removed and the old file
  is left untouched.

Temporary names are ``.<name>.<random>.tmp`` (.gitignore keeps them out of perf_baselines/).
kernels/reducer/cache.py has its own writer, because kernels/ must not import perfgate.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

MODE = 0o644


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, creating parent directories."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            os.chmod(tmp, MODE)  # mkstemp creates it 0600
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike[str], data: Any, *, indent: int = 2) -> None:
    """Write ``data`` as JSON (with a final newline) to ``path`` atomically.

    NaN and infinity are refused (``ValueError``) before anything is written: they are not JSON,
    and a baseline holding them would fail to load later instead of now.
    """
    write_text(path, json.dumps(data, indent=indent, allow_nan=False) + "\n")
