"""What the history keeps of one run: read from a results file (pytest-benchmark JSON with
perfgate's fingerprint, :mod:`perfgate.gate.baseline`), one record per benchmark.

A run's identity is the SHA-256 of its file's bytes: adding the same file twice, from any path,
adds nothing. Its place in the history is its commit (``fingerprint.git_commit``) and that
commit's date (pytest-benchmark's ``commit_info.time``), then the run's date (``datetime``).
Its fingerprint segment is a digest of the fields that move timings without any code change
(:data:`SEGMENT_FIELDS`): runs of different segments are never compared with each other.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate.gate import baseline as bl
from perfgate.refusal import Refusal

# The fingerprint fields whose change starts a new segment: the baseline files' environment keys
# (the GPU, its clock settings, the driver, the CUDA/ROCm runtime, torch and triton), defined
# once in perfgate.gate.baseline. git_commit is the code (what history follows); git_dirty is
# refused.
SEGMENT_FIELDS = bl.ENVIRONMENT_KEYS
# The mode of an A/B run's head side (perfgate.history.ab_records): device-mode times, measured
# interleaved with another revision, kept as a series of their own.
AB_MODE = "ab"
CI_LEVEL = 0.95  # the level of each median's confidence interval
# A run's gate verdict, as the store keeps it: "pass" when its comparison exited 0 (no
# regression, nothing missing, nothing inconclusive that fails the gate), "fail" when it exited 1.
PASS, FAIL = "pass", "fail"
VERDICTS = (PASS, FAIL)


class RecordError(Refusal, ValueError):
    """A results file the history cannot keep; the message is one line naming the file."""


@dataclass(frozen=True)
class Result:
    """One benchmark of one run."""

    benchmark: str  # pytest-benchmark's fullname
    group: str | None
    median: float  # seconds (host mode: the sample's unit)
    ci_low: float  # distribution-free CI_LEVEL interval of the median
    ci_high: float
    rounds: int
    samples: tuple[float, ...]


@dataclass(frozen=True)
class Run:
    digest: str  # sha256 of the source file's bytes
    source: str  # the file it was read from
    device_key: str
    mode: str
    branch: str | None
    commit: str
    commit_time: str | None  # ISO 8601, UTC
    run_time: str | None  # ISO 8601, UTC
    fingerprint: dict[str, Any]
    results: tuple[Result, ...] = field(repr=False)
    verdict: str | None = None  # VERDICTS, or None: not recorded (not part of the identity)

    @property
    def segment(self) -> str:
        return segment_key(self.fingerprint)


def segment_key(fingerprint: dict[str, Any]) -> str:
    """A short digest of :data:`SEGMENT_FIELDS` of ``fingerprint``."""
    fields = {k: fingerprint.get(k) for k in SEGMENT_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def segment_difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    """``"torch '2.11.0' -> '2.12.0', ..."`` for the segment fields that differ."""
    return ", ".join(
        f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in SEGMENT_FIELDS if old.get(k) != new.get(k)
    )


def read_run(path: str | os.PathLike[str], *, branch: str | None = None) -> Run:
    """The run recorded in the results file ``path``; RecordError when it cannot be kept.

    ``branch`` names the branch the run belongs to (CI checkouts are detached, so the file's
    ``commit_info.branch`` is a guess); default: the file's, when it names one.
    """
    path = Path(path)
    try:
        data = bl.load(path)
        raw = path.read_bytes()
    except bl.BaselineError as exc:
        raise RecordError(str(exc)) from None
    except OSError as exc:
        raise RecordError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if json.loads(raw) != data:
        raise RecordError(f"{path}: changed while it was read; add it again")
    fp = bl.fingerprint(data)
    commit = fp.get("git_commit")
    if not isinstance(commit, str) or not commit:
        raise RecordError(
            f"{path}: fingerprint.git_commit is {commit!r}; history places runs by their commit "
            "(record in a git checkout)"
        )
    if fp.get("git_dirty") is True:
        raise RecordError(
            f"{path}: recorded with uncommitted changes (fingerprint.git_dirty); its times belong "
            "to no commit"
        )
    info = data.get("commit_info") if isinstance(data.get("commit_info"), dict) else {}
    return Run(
        digest=hashlib.sha256(raw).hexdigest(),
        source=str(path),
        device_key=bl.device_key(data),
        mode=bl.mode(data),
        branch=branch or _branch(info),
        commit=commit,
        commit_time=_utc(path, "commit_info.time", info.get("time"))
        if info.get("id") in (None, commit)
        else None,
        run_time=_utc(path, "datetime", data.get("datetime")),
        fingerprint=dict(fp),
        results=tuple(
            result_of(b["fullname"], b.get("group"), [float(x) for x in b["stats"]["data"]])
            for b in data["benchmarks"]
        ),
    )


def _branch(info: dict[str, Any]) -> str | None:
    name = info.get("branch")
    if not isinstance(name, str) or name in ("", "HEAD", "(unknown)") or name.startswith("("):
        return None
    return name


def _utc(path: Path, what: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(f"{path}: {what} must be an ISO 8601 date string, got {value!r}")
    text = value.strip()
    if text.endswith("Z"):  # Python 3.10's fromisoformat does not read "Z"
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise RecordError(f"{path}: {what} must be an ISO 8601 date, got {value!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)  # pytest-benchmark writes UTC
    return when.astimezone(timezone.utc).isoformat()


def result_of(name: str, group: Any, samples: list[float]) -> Result:
    low, high = median_ci(samples)
    return Result(
        benchmark=name,
        group=group if isinstance(group, str) else None,
        median=_median(samples),
        ci_low=low,
        ci_high=high,
        rounds=len(samples),
        samples=tuple(samples),
    )


def _median(samples: list[float]) -> float:
    s = sorted(samples)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def median_ci(samples: list[float], level: float = CI_LEVEL) -> tuple[float, float]:
    """The distribution-free confidence interval of the median: order statistics
    ``(x_(k), x_(n+1-k))`` with the largest ``k`` whose coverage ``1 - 2 P(B <= k-1)``,
    ``B ~ Binomial(n, 1/2)``, is at least ``level``; ``(min, max)`` when no ``k`` reaches it
    (fewer than 6 samples at 95%)."""
    import numpy as np
    from scipy import stats

    s = sorted(samples)
    n = len(s)
    if n == 0:
        raise ValueError("no samples")
    cdf = stats.binom.cdf(np.arange(n), n, 0.5)  # P(B <= j)
    # j = k - 1: the largest with P(B <= j) <= (1 - level) / 2; none (-1) gives (min, max) too
    k = max(int(np.count_nonzero(cdf <= (1 - level) / 2)) - 1, 0)
    low, high = s[k], s[n - 1 - k]
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError("samples must be finite")
    return low, high
