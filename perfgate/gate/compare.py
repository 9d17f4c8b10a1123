"""Two results files (or a baseline and a run) compared benchmark by benchmark: the report.

Benchmarks are matched by ``fullname``; each gets one verdict (:mod:`perfgate.gate.verdict`).
The files must be of the same device (:mod:`perfgate.gate.device`) and timing mode; other
fingerprint differences are warnings. ``perfgate compare``, ``bench`` and ``ab`` report through
:func:`present`.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate import atomic
from perfgate.gate import baseline as bl
from perfgate.gate import device
from perfgate.gate.report import Report, Row, render_console, render_markdown
from perfgate.gate.settings import PYPROJECT
from perfgate.gate.verdict import MISSING, NEW
from perfgate.refusal import Refusal

if TYPE_CHECKING:
    from perfgate.gate.stats import Settings

# Expected to differ (that is the point of comparing); reported as a note, not a warning.
_CODE_FIELDS = ("git_commit",)


class InputError(Refusal):
    """Inputs that cannot be compared; the message is one line."""


def compare_files(
    baseline: str | Path,
    current: str | Path,
    *,
    settings: Settings | None = None,
    json_out: str | Path | None = None,
    markdown_out: str | Path | None = None,
    allow_missing: bool = False,
    console=None,
) -> int:
    """Compare two result files, print the report, write the requested outputs; the exit code.

    ``settings`` default to ``[tool.perfgate]`` of pyproject.toml (``Settings()``).
    """
    settings = _checked_settings(settings)
    try:
        check_outputs(
            {"--json": json_out, "--markdown": markdown_out},
            {"BASELINE.json": baseline, "CURRENT.json": current},
        )
        report = build_report(baseline, current, settings, allow_missing=allow_missing)
    except (bl.BaselineError, InputError, atomic.OutputError) as exc:
        print(f"perfgate compare: error: {exc}", file=sys.stderr)
        return 2
    return present(report, json_out=json_out, markdown_out=markdown_out, console=console)


def check_outputs(outputs: dict, inputs: dict, *, baselines: bool = False) -> None:
    """perfgate.atomic's output check, with the settings file among the inputs: no report is
    ever written over an input, nor over pyproject.toml (``baselines``: the command writes
    baselines, under perf_baselines/)."""
    atomic.check_outputs(outputs, {**inputs, "the settings file": PYPROJECT}, baselines=baselines)


def _checked_settings(settings):
    from perfgate.gate.stats import Settings

    # Bad settings are the caller's bug, not bad input: let TypeError through.
    settings = Settings() if settings is None else settings
    if not isinstance(settings, Settings):
        raise TypeError(
            f"settings must be a perfgate.gate.settings.Settings, got {type(settings).__name__}"
        )
    return settings


def present(report, *, json_out=None, markdown_out=None, console=None, prog="compare") -> int:
    """Print ``report``, write its JSON and markdown where asked; its exit code (2 when a report
    cannot be written)."""
    if console is None:
        console = default_console()
    render_console(report, console)
    try:
        if json_out is not None:
            atomic.write_json(json_out, report.to_json())
        if markdown_out is not None:
            atomic.write_text(markdown_out, render_markdown(report))
    except OSError as exc:
        print(f"perfgate {prog}: error: cannot write the report: {exc}", file=sys.stderr)
        return 2
    return report.exit_code


def default_console():
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        # CI logs: rich would assume 80 columns and fold every benchmark name.
        console = Console(width=160)
    return console


def build_report(
    baseline: str | Path,
    current: str | Path,
    settings,
    *,
    allow_missing: bool,
    looks_taken: dict[str, int] | None = None,
):
    """Load, check and compare the two files; raises BaselineError/InputError if unusable.

    ``looks_taken``: for a run with adaptive rounds, the look at which each benchmark was
    decided; its verdicts are then judged at ``alpha / looks``. Without it, one look.
    """
    base_data = bl.load(baseline)
    cur_data = bl.load(current)
    _check_comparable(baseline, base_data, current, cur_data)
    warnings, notes = _fingerprint_differences(bl.fingerprint(base_data), bl.fingerprint(cur_data))
    base_samples, cur_samples = bl.samples(base_data), bl.samples(cur_data)
    check_enough_rounds({baseline: base_samples, current: cur_samples}, settings)
    looks = settings.looks if looks_taken is not None else 1
    rows = judge(
        base_samples,
        cur_samples,
        settings,
        drifts=bl.drifts(base_data),
        looks=looks,
        looks_taken=looks_taken,
    )
    return make_report(
        rows,
        settings,
        baseline_path=str(baseline),
        current_path=str(current),
        device_key=bl.device_key(cur_data),
        mode=bl.mode(cur_data),
        allow_missing=allow_missing,
        warnings=warnings,
        notes=notes,
        looks=looks,
    )


def check_enough_rounds(sides: dict[Any, dict[str, list[float]]], settings) -> None:
    """InputError when a benchmark has fewer samples than ``min_samples``: a run too short to
    judge must never pass, and "inconclusive" would let it."""
    for where, by_name in sides.items():
        for name, data in by_name.items():
            if len(data) < settings.min_samples:
                raise InputError(
                    f"{where}: {name} has {len(data)} rounds, too few to judge; rerun with at "
                    f"least {settings.min_samples} rounds"
                )


def judge(
    base_samples: dict[str, list[float]],
    cur_samples: dict[str, list[float]],
    settings,
    *,
    drifts: dict[str, float] | None = None,
    looks: int = 1,
    looks_taken: dict[str, int] | None = None,
) -> list:
    """One row per benchmark of either side (``missing`` / ``new`` for one side only)."""
    from rich.progress import track

    drifts = drifts or {}
    looks_taken = looks_taken or {}
    names = list(base_samples)
    rows = []
    # A grid of hundreds of benchmarks takes a while: show progress on stderr (never in CI logs'
    # report, and never for the few benchmarks of a pull request).
    for name in track(
        names,
        description="comparing",
        disable=len(names) < _PROGRESS_FROM,
        transient=True,
        console=_stderr_console(),
    ):
        if name not in cur_samples:
            rows.append(_lonely_row(name, MISSING, base_samples[name]))
            continue
        row = _row(name, base_samples[name], cur_samples[name], settings,
                   drift=drifts.get(name), looks=looks)  # fmt: skip
        rows.append(dataclasses.replace(row, looks=looks_taken.get(name, 1)))
    rows += [_lonely_row(n, NEW, cur_samples[n]) for n in cur_samples if n not in base_samples]
    return rows


_PROGRESS_FROM = 50


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def make_report(
    rows: list,
    settings,
    *,
    baseline_path: str,
    current_path: str,
    device_key: str,
    mode: str,
    allow_missing: bool,
    warnings: list[str] | None = None,
    notes: list[str] | None = None,
    looks: int = 1,
):
    """The report and its exit code: 1 for a regression, a missing benchmark (unless allowed)
    or, with ``inconclusive_exit = 1``, a benchmark still inconclusive; else 0.

    ``looks``: the looks the verdicts were judged for (each at ``alpha / looks``): what the
    report states, whatever ``settings.looks`` holds (a plain comparison takes one look)."""
    verdicts = {r.verdict for r in rows}
    failed = "regression" in verdicts or (MISSING in verdicts and not allow_missing)
    if "inconclusive" in verdicts and settings.inconclusive_exit:
        failed = True
    return Report(
        baseline_path=baseline_path,
        current_path=current_path,
        device_key=device_key,
        mode=mode,
        rows=rows,
        exit_code=1 if failed else 0,
        settings={
            "alpha": settings.alpha,
            "confidence": settings.confidence,
            "min_effect": settings.min_effect,
            "noise_factor": settings.noise_factor,
            "min_effect_drift": settings.min_effect_drift,
            "drift_factor": settings.drift_factor,
            "looks": looks,
            "inconclusive_exit": settings.inconclusive_exit,
            "min_samples": settings.min_samples,
            "n_resamples": settings.n_resamples,
            "bootstrap_max_samples": settings.bootstrap_max_samples,
            "seed": settings.seed,
            "allow_missing": allow_missing,
        },
        warnings=list(warnings or []),
        notes=list(notes or []),
    )


def _check_comparable(base_path, base: dict, cur_path, cur: dict) -> None:
    base_key, cur_key = bl.device_key(base), bl.device_key(cur)
    if base_key != cur_key:
        raise InputError(
            f"device mismatch: {base_path} was recorded on {base_key!r}, {cur_path} on "
            f"{cur_key!r}; compare against perf_baselines/{cur_key}/ instead"
        )
    base_fp, cur_fp = bl.fingerprint(base), bl.fingerprint(cur)
    for field in device.COMPARABLE:
        if base_fp[field] != cur_fp[field]:
            raise InputError(
                f"device mismatch: fingerprint.{field} is {base_fp[field]!r} in {base_path} but "
                f"{cur_fp[field]!r} in {cur_path} (same device key {cur_key!r}; a partitioned or "
                "different GPU?); re-record the baseline on this device"
            )
    base_mode, cur_mode = bl.mode(base), bl.mode(cur)
    if base_mode != cur_mode:
        raise InputError(
            f"timing mode mismatch: {base_path} holds {base_mode!r} times, {cur_path} "
            f"{cur_mode!r} times; they measure different things, compare like with like"
        )


def _fingerprint_differences(base: dict[str, Any], cur: dict[str, Any]) -> tuple[list, list]:
    """(warnings, notes): environment differences, and the code versions compared."""
    flat_base, flat_cur = _flatten(base), _flatten(cur)
    warnings, notes = [], []
    for key in sorted(flat_base.keys() | flat_cur.keys()):
        old = flat_base.get(key, "(absent)")
        new = flat_cur.get(key, "(absent)")
        if key in _CODE_FIELDS:
            notes.append(f"{key}: baseline {old} → current {new}")
        elif old != new:
            warnings.append(f"{key}: baseline {old!r} → current {new!r}")
    return warnings, notes


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested fingerprint fields as dotted keys, so that a warning names the exact field."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _row(name: str, base: list[float], cur: list[float], settings, **how):
    import numpy as np

    from perfgate.gate.stats import compare_samples

    res = compare_samples(base, cur, settings, **how)
    return Row(
        name=name,
        verdict=res.verdict,
        reason=res.reason,
        ratio=res.ratio,
        ci_low=res.ci_low,
        ci_high=res.ci_high,
        p_value=res.p_value,
        threshold=res.threshold,
        noise=res.noise,
        baseline_median=float(np.median(base)),
        current_median=float(np.median(cur)),
        n_baseline=res.n_base,
        n_current=res.n_cur,
    )


def _lonely_row(name: str, verdict: str, samples: list[float]):
    """A benchmark on one side only: its median and count, no statistics."""
    import numpy as np

    median = float(np.median(samples))
    if verdict == MISSING:
        return Row(
            name,
            verdict,
            "in the baseline but not in the current run",
            baseline_median=median,
            n_baseline=len(samples),
        )
    return Row(
        name,
        verdict,
        "not in the baseline; record it with update_baselines",
        current_median=median,
        n_current=len(samples),
    )
