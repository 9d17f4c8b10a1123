"""Fixtures for the perfgate tests: result files shaped like ``pytest --benchmark-json`` output.

``make_result`` builds the dict that pytest-benchmark writes with ``--benchmark-save-data``
(machine_info, commit_info, benchmarks[...] with stats.data, datetime, version), plus the
perfgate block of docs/CONTRACTS.md; ``write_result`` writes one under the test's tmp_path.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfgate.atomic import write_json as write_atomic

FINGERPRINT = {
    "gpu_name": "NVIDIA H200",
    "arch": "sm90",
    "compute_units": 132,
    "driver": "570.124.06",
    "runtime": "cuda 12.8",
    "torch": "2.11.0+cu128",
    "triton": "3.6.0",
    "git_commit": "0123abc",
    "clocks": {"sm_mhz": 1980, "mem_mhz": 3201},
}


def _stats(samples: Sequence[float]) -> dict[str, Any]:
    data = [float(x) for x in samples]
    q1, _, q3 = statistics.quantiles(data, n=4) if len(data) > 1 else (data[0],) * 3
    mean = statistics.fmean(data)
    return {
        "min": min(data),
        "max": max(data),
        "mean": mean,
        "stddev": statistics.stdev(data) if len(data) > 1 else 0.0,
        "rounds": len(data),
        "median": statistics.median(data),
        "iqr": q3 - q1,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": 0,
        "stddev_outliers": 0,
        "outliers": "0;0",
        "ld15iqr": min(data),
        "hd15iqr": max(data),
        "ops": 1 / mean,
        "total": sum(data),
        "data": data,
        "iterations": 1,
    }


def make_result(
    benchmarks: Mapping[str, Sequence[float]],
    *,
    device_key: str = "nvidia-h200",
    mode: str = "device",
    **fingerprint: Any,
) -> dict[str, Any]:
    """A pytest-benchmark JSON dict; ``fingerprint`` keywords override FINGERPRINT fields."""
    fp = copy.deepcopy(FINGERPRINT)
    fp.update(fingerprint)
    return {
        "machine_info": {
            "node": "ci-runner",
            "machine": "x86_64",
            "python_version": "3.11.7",
            "system": "Linux",
            "perfgate": {"schema": 1, "device_key": device_key, "mode": mode, "fingerprint": fp},
        },
        "commit_info": {
            "id": fp["git_commit"],
            "dirty": False,
            "project": "mxfp4",
            "branch": "main",
        },
        "benchmarks": [
            {
                "group": "leaderboard",
                "name": name.split("::")[-1],
                "fullname": name,
                "params": None,
                "param": None,
                "extra_info": {},
                "options": {"timer": "perfgate-device", "min_rounds": len(samples)},
                "stats": _stats(samples),
            }
            for name, samples in benchmarks.items()
        ],
        "datetime": "2026-11-30T11:28:39.536020+00:00",
        "version": "5.2.3",
    }


def gpu_like(seed: int, n: int = 30, median: float = 20e-6, factor: float = 1.0) -> list[float]:
    """Spiky GPU-like samples: 1% gaussian noise, 5% of samples x1.2-2.0 (seconds)."""
    rng = np.random.default_rng(seed)
    x = median * factor * (1 + 0.01 * rng.standard_normal(n))
    spikes = rng.random(n) < 0.05
    x[spikes] *= rng.uniform(1.2, 2.0, spikes.sum())
    return x.tolist()


@pytest.fixture
def write_result(tmp_path: Path) -> Callable[..., Path]:
    """``write_result(name, benchmarks_or_dict, **make_result_kwargs) -> path`` in tmp_path."""

    def write(name: str, content: Mapping[str, Any], **kwargs: Any) -> Path:
        data = content if "benchmarks" in content else make_result(content, **kwargs)
        path = tmp_path / name
        write_atomic(path, data)
        return path

    return write


@pytest.fixture(name="make_result")
def _make_result_fixture() -> Callable[..., dict[str, Any]]:
    return make_result


@pytest.fixture(name="gpu_like")
def _gpu_like_fixture() -> Callable[..., list[float]]:
    return gpu_like


# -- submission files: an independent third-party file and its planted-wrong twin ----------------
THIRD_PARTY = Path(__file__).parent / "data" / "third_party_submission.py"
# the twin's planted error: the amax is truncated to its power of two, never rounded up, so a
# block whose amax has a mantissa fraction >= 0.75 gets half the scale and saturates at 6
RIGHT_SCALE_RULE = "rounded = (bits + 0x200000) & 0xFF800000"
WRONG_SCALE_RULE = "rounded = bits & 0xFF800000"


@pytest.fixture
def third_party() -> Path:
    """tests/perfgate/data/third_party_submission.py: numpy and torch, from the task's facts."""
    return THIRD_PARTY


@pytest.fixture
def wrong_scale_rule(tmp_path: Path) -> Path:
    """The third-party file with the amax rounding of its scale rule left out."""
    text = THIRD_PARTY.read_text()
    assert text.count(RIGHT_SCALE_RULE) == 1
    path = tmp_path / "wrong_scale_rule.py"
    path.write_text(text.replace(RIGHT_SCALE_RULE, WRONG_SCALE_RULE))
    return path


@pytest.fixture
def history_git() -> Callable[..., Any]:
    """``git -C <this checkout> ARGS`` (its CompletedProcess, output as text) for a test that
    needs the checkout's whole history; the test skips, saying why, where it is shallow or
    absent (an exported or copied tree)."""
    import subprocess

    from perfgate.checkout import REPO

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)

    if git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
        pytest.skip("needs the whole git history (this checkout has none or a shallow one)")
    return git


# -- history stores: SQLite, and PostgreSQL on a throwaway server (tests/perfgate/pgserver.py) -----
@pytest.fixture(scope="session")
def pg_server():
    """The session's throwaway PostgreSQL server; the test skips, saying why, where none can be
    started (no server programs, no psycopg), and fails instead in CI (pgserver.required)."""
    from tests.perfgate import pgserver

    try:
        server = pgserver.Server()
    except (pgserver.Unavailable, ImportError) as exc:
        reason = f"no PostgreSQL server for the history store tests: {exc}"
        if pgserver.required():
            pytest.fail(f"{reason} (CI is set: these tests must run here)")
        pytest.skip(reason)
    yield server
    server.close()


@pytest.fixture
def pg_url(pg_server) -> str:
    """A URL of the session's server naming a new, empty schema: a store of its own."""
    return pg_server.fresh_url()


@pytest.fixture(params=["sqlite", "postgresql"])
def history_db(request, tmp_path):
    """Where a test's store goes, once for each kind: a SQLite path, then a PostgreSQL URL."""
    if request.param == "sqlite":
        return tmp_path / "h.sqlite"
    return request.getfixturevalue("pg_url")
