"""What the history keeps of an A/B run: the head side of ``ab.samples.json`` (``perfgate ab``).

An A/B measures two revisions interleaved on one GPU; its samples file holds both sides'
per-round device times, the fingerprint of the machine and this checkout, and the two commits
(``head`` is null when the head was the working tree). The history keeps the **head side only**,
as a run of its commit in mode :data:`~perfgate.history.records.AB_MODE` (``ab``):

- the head is what the A/B was run to judge; the base is usually a commit of main that the
  history already has from ``bench``, and a bisection or a day of pull requests would add the
  same base many times over;
- interleaved times are device-mode times taken under other conditions than ``bench``'s (two
  worker processes taking turns), so they form series of their own and never enter the push
  gate's baseline (``bench --against history`` pools ``device`` runs only).

Its commit is ``head``, or the fingerprint's ``git_commit`` for a working-tree head. A file whose
fingerprint says ``git_dirty`` is refused as a dirty results file is: with a working-tree head its
times belong to no commit, and with ``--head REV`` the timer, flush and checks that measured it
were uncommitted. The run's date is the file's modification time (an A/B file records none), its
commit date the commit's in this checkout when git knows it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate import git
from perfgate.gate import paths
from perfgate.history.records import AB_MODE, RecordError, Run, result_of

HEAD_KEY = "head_samples"


def is_ab_samples(data: Any) -> bool:
    """Whether a parsed JSON document is an ``ab.samples.json``."""
    return isinstance(data, dict) and HEAD_KEY in data and "base_samples" in data


def read_ab_run(path: str | os.PathLike[str], *, branch: str | None = None) -> Run:
    """The head side of the A/B samples file ``path``; RecordError when it cannot be kept."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        mtime = path.stat().st_mtime
    except OSError as exc:
        raise RecordError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RecordError(f"{path}: not valid JSON ({' '.join(str(exc).split())})") from None
    if not is_ab_samples(data):
        raise RecordError(f"{path}: not an A/B samples file (no {HEAD_KEY} and base_samples)")
    fp = data.get("fingerprint")
    if not isinstance(fp, dict):
        raise RecordError(f"{path}: fingerprint must be an object, got {_shown(fp)}")
    device_key = fp.get("device_key")
    if not isinstance(device_key, str) or not device_key:
        raise RecordError(
            f"{path}: fingerprint.device_key must be a device key, got {device_key!r}"
        )
    if fp.get("git_dirty") is True:
        raise RecordError(
            f"{path}: measured with uncommitted changes (fingerprint.git_dirty); its times belong "
            "to no commit"
        )
    head = data.get("head")
    commit = head if head is not None else fp.get("git_commit")
    if not isinstance(commit, str) or not commit:
        raise RecordError(
            f"{path}: the head side names no commit (head {head!r}, fingerprint.git_commit "
            f"{fp.get('git_commit')!r}); history places runs by their commit"
        )
    results = _head_results(path, data[HEAD_KEY])
    return Run(
        digest=hashlib.sha256(raw).hexdigest(),
        source=str(path),
        device_key=device_key,
        mode=AB_MODE,
        branch=branch,
        commit=commit,
        commit_time=commit_time(commit),
        run_time=datetime.fromtimestamp(mtime, tz=timezone.utc).isoformat(),
        fingerprint=dict(fp),
        results=results,
    )


def _head_results(path: Path, head: Any) -> tuple:
    if not isinstance(head, dict) or not head:
        raise RecordError(f"{path}: {HEAD_KEY} must be a non-empty object, got {_shown(head)}")
    groups = _groups()
    out = []
    for name, samples in head.items():
        if isinstance(samples, list) and samples and all(isinstance(x, list) for x in samples):
            samples = [x for process in samples for x in process]  # process-level A/B: flattened
        ok = isinstance(samples, list) and samples and all(_positive(x) for x in samples)
        if not ok:
            raise RecordError(
                f"{path}: {HEAD_KEY}[{name!r}] must be a non-empty list of finite times > 0"
            )
        out.append(result_of(name, groups.get(name), [float(x) for x in samples]))
    return tuple(out)


def _positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _groups() -> dict[str, str]:
    """Benchmark name -> its catalog group (the A/B file records names only)."""
    from perfgate import catalog

    return {
        group.nodeid(item): name for name, group in catalog.GROUPS.items() for item in group.items
    }


def commit_time(commit: str) -> str | None:
    """The commit date of ``commit`` in this checkout (UTC, ISO 8601), None when git does not
    know it (another checkout's A/B file)."""
    text = (
        git.read("show", "-s", "--format=%cI", commit, "--", cwd=paths.REPO, timeout=30) or ""
    ).strip()
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc).isoformat()
    except ValueError:
        return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
