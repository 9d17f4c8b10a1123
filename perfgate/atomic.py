"""perfgate's one file writer: a reader sees the old file or the new one, never half of either.

Every file perfgate writes (timing baselines, ISA baselines, compare JSON and markdown reports,
the experiment's samples and summaries) goes through :func:`write_bytes`:

- the temporary file is created in the target's directory, so that ``os.replace`` is a rename
  within one file system, which POSIX and Windows make atomic;
- it gets mode 0644 whatever the umask or the replaced file's mode: baselines are committed and
  reports are read by other CI users, and git records only the executable bit, so a mode that
  depended on who wrote the file last would be noise;
- it is flushed and fsynced before the rename, so that a crash right after cannot leave an empty
  file under the final name;
- on any failure (an exception, KeyboardInterrupt, the SystemExit that ``python -m perfgate``
  raises on SIGTERM) the temporary file is removed and the old file is left untouched;
- a writer killed outright (SIGKILL, a power cut) cannot remove its temporary file, so every
  write first removes the temporary files of the same target left by processes that no longer
  exist: their names carry the writer's process id.

Temporary names are ``.<name>.<pid>.<random>.tmp`` (.gitignore keeps them out of
perf_baselines/). kernels/reducer/cache.py has its own writer, because kernels/ must not import
perfgate.

:func:`check_outputs` is every command's check of its output paths, made before any work: an
output that cannot be written, or that names an input or another output, is refused in one line.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import signal
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from perfgate import git
from perfgate.checkout import REPO
from perfgate.refusal import Refusal

MODE = 0o644
_SUFFIX = ".tmp"
PathLike = str | os.PathLike
Paths = Mapping[str, "PathLike | None"] | Iterable[tuple[str, "PathLike | None"]]


class OutputError(Refusal, ValueError):
    """An output path that must not be written; the message is one line naming the option."""


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, creating parent directories."""
    if not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_prefix(path, os.getpid()), suffix=_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            os.chmod(tmp, MODE)  # mkstemp creates it 0600
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], data: Any, *, indent: int = 2) -> None:
    """Write ``data`` as JSON (with a final newline) to ``path`` atomically.

    NaN and infinity are refused (``ValueError``) before anything is written: they are not JSON,
    and a baseline holding them would fail to load later instead of now.
    """
    write_text(path, json.dumps(data, indent=indent, allow_nan=False) + "\n")


def write_all(files: Mapping[PathLike, bytes]) -> None:
    """Write several files as one update: each atomically, and Ctrl-C, SIGTERM and SIGHUP held
    until the last is in place (then they act, as they would have), so a stopped update never
    leaves some files new and the others old. Only SIGKILL or a crash between two renames can.
    Held by swapping the handlers, not by a signal mask: a mask holds one thread's signals, and
    another thread would take the signal for Python's handler in the main thread to run."""
    pending: list[int] = []
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not the main thread: signals are not ours
            previous[sig] = signal.signal(sig, lambda signum, frame: pending.append(signum))
    try:
        for path, data in files.items():
            write_bytes(path, data)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


def _prefix(path: Path, pid: int) -> str:
    return f".{path.name}.{pid}."


def remove_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files of ``path`` whose writer process no longer exists; the list of
    those removed. A live writer's file (another process, or a thread of this one) is kept."""
    path = Path(path)
    removed = []
    head = f".{path.name}."
    try:
        candidates = list(path.parent.glob(f"{glob_escape(head)}*{_SUFFIX}"))
    except OSError:
        return removed
    for tmp in candidates:
        pid, _, _ = tmp.name[len(head) : -len(_SUFFIX)].partition(".")
        if pid.isdigit() and not _alive(int(pid)):
            try:
                tmp.unlink()
            except OSError:
                continue
            removed.append(tmp)
    return removed


def glob_escape(text: str) -> str:
    """``text`` with glob's special characters taken literally."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


# -- the output-path check -----------------------------------------------------------------------
def check_outputs(outputs: Paths, inputs: Paths | None = None, *, baselines: bool = False) -> None:
    """Refuse outputs that cannot be written, that would replace an input or each other, or that
    lie in the repository's own files.

    ``outputs`` and ``inputs`` give how the user named each path (``--json``, ``BASELINE.json``,
    ``--out``) and the path, as a mapping or as pairs; ``None`` paths are ignored. An output may
    not be a file git tracks in this checkout, nor lie in one of its tracked folders (kernels/,
    tests/, docs/, ...; new files at the top level and in untracked folders such as .perfgate/
    are fine); ``baselines`` lets the commands that exist to write them write under
    perf_baselines/. Raises :class:`OutputError`: one line naming the option, the path and what
    was expected. Nothing is created or written.
    """
    outs = _pairs(outputs)
    ins = _pairs(inputs or {})
    for label, path in outs:
        check_not_tracked(label, path, baselines)
        _check_writable(label, path)
    for (la, a), (lb, b) in itertools.combinations(outs, 2):
        if same_file(a, b):
            raise OutputError(
                f"{la} {a} and {lb} {b} are the same file: one output would overwrite the other; "
                f"give {lb} another path"
            )
    for lo, out in outs:
        for li, inp in ins:
            if same_file(out, inp):
                raise OutputError(
                    f"{lo} {out} is the input {li} {inp}: an output is never written over an "
                    f"input; give {lo} another path"
                )


# what the tracked tree is where git cannot say (an exported or installed copy): its folders and
# top-level files as this checkout has them
_TRACKED_TOP = frozenset(
    {"kernels", "perfgate", "tests", "tools", "docs", "docker", "perf_baselines", ".github",
     ".ci", "pyproject.toml", "README.md", "noxfile.py", ".gitignore", ".dockerignore"}
)  # fmt: skip
BASELINES_TOP = "perf_baselines"


@functools.cache
def _tracked(repo: Path) -> frozenset[str] | None:
    """The paths git tracks in ``repo``, relative and in POSIX form (None: not a git checkout,
    or no git)."""
    listed = git.read("ls-files", "-z", cwd=repo)
    if listed is None:
        return None
    return frozenset(p for p in listed.split("\0") if p)


def check_not_tracked(label: str, path: Path, baselines: bool = False) -> None:
    """OutputError when ``path`` is, or lies inside, the repository's tracked files (a file
    written in place, such as the history store, as much as an output)."""
    resolved = Path(os.path.realpath(path))
    try:
        rel = resolved.relative_to(REPO)
    except ValueError:
        return  # outside the checkout
    tracked = _tracked(REPO)
    parts = rel.parts
    if not parts:
        raise OutputError(f"{label} {path}: is the repository's root, expected a path of its own")
    if baselines and parts[0] == BASELINES_TOP:
        return
    posix = rel.as_posix()
    if tracked is None:
        is_tracked = posix in _TRACKED_TOP
        in_folder = parts[0] in _TRACKED_TOP and len(parts) > 1
    else:
        is_tracked = posix in tracked or any(t.startswith(posix + "/") for t in tracked)
        in_folder = len(parts) > 1 and any(t.startswith(parts[0] + "/") for t in tracked)
    if is_tracked or in_folder:
        what = (
            "a tracked file or folder of the repository"
            if is_tracked
            else (f"inside the repository's tracked folder {parts[0]}/")
        )
        raise OutputError(
            f"{label} {path}: is {what}; an output never replaces or joins the project's own "
            "files: give a path outside them (e.g. under .perfgate/)"
        )


def check_output_dirs(dirs: Paths, *, baselines: bool = False) -> None:
    """:func:`check_outputs` for options that name a directory the command writes files into
    (``--results-dir``, ``--out DIR``): not a file, not one of the repository's tracked folders
    nor inside one (``baselines``: perf_baselines/ is allowed), and creatable. OutputError, one
    line; nothing is created."""
    for label, path in _pairs(dirs):
        check_not_tracked(label, path, baselines)
        if path.exists() and not path.is_dir():
            raise OutputError(f"{label} {path}: is a file, expected a directory")
        _check_writable(label, path / ".perfgate-probe-target")


def _pairs(paths: Paths) -> list[tuple[str, Path]]:
    items = paths.items() if isinstance(paths, Mapping) else paths
    return [(label, Path(p)) for label, p in items if p is not None]


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (the same path, a symlink to it or a hard link)."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _check_writable(label: str, path: Path) -> None:
    if path.is_dir():
        raise OutputError(f"{label} {path}: is a directory, expected a file path")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputError(f"{label} {path}: {ancestor} is a file, expected a directory")
    try:  # the one reliable test of writability: /proc and read-only mounts pass os.access
        fd, probe = tempfile.mkstemp(dir=ancestor, prefix=".perfgate-probe.", suffix=_SUFFIX)
    except OSError as exc:
        raise OutputError(
            f"{label} {path}: cannot write in {ancestor} ({exc.strerror or exc})"
        ) from None
    os.close(fd)
    os.unlink(probe)
