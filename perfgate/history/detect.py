"""Change points over the history: per benchmark, over its runs in commit order.

A series is one (device key, timing mode, benchmark). It is cut into fingerprint segments
wherever :data:`perfgate.history.records.SEGMENT_FIELDS` change (a new driver, runtime, torch,
triton or GPU setting): a segment start is reported, never judged as a change. Within each
segment :func:`perfgate.history.steps.find_steps` finds the steps. A step slower than the
minimum effect in a series' newest segment is an alarm (``history detect`` exits 1); ``last``
narrows the alarms to steps among the newest runs, so that an old, known regression stops
failing the job once newer runs are in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from perfgate.history.records import segment_difference
from perfgate.history.steps import StepSettings, find_steps
from perfgate.history.store import Row


@dataclass(frozen=True)
class Change:
    device_key: str
    mode: str
    benchmark: str
    commit: str  # the first commit after the change (its first run)
    run_id: int  # that run
    previous_commit: str  # the last commit before it
    before: float  # median of the run medians before (seconds)
    after: float  # ... and after
    p_value: float
    runs_before: int
    runs_after: int
    runs_since: int  # runs of the series from this change's first run to its newest
    segment: str  # the fingerprint segment it lies in
    newest_segment: bool
    alarm: bool

    @property
    def change(self) -> float:
        return self.after / self.before - 1.0

    @property
    def direction(self) -> str:
        return "slower" if self.change > 0 else "faster"

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "commit": self.commit,
            "before": self.before,
            "after": self.after,
            "change": self.change,
            "direction": self.direction,
            "previous_commit": self.previous_commit,
            "device_key": self.device_key,
            "mode": self.mode,
            "p_value": self.p_value,
            "runs_before": self.runs_before,
            "runs_after": self.runs_after,
            "segment": self.segment,
            "newest_segment": self.newest_segment,
            "alarm": self.alarm,
        }


@dataclass(frozen=True)
class SegmentStart:
    """Where a series' fingerprint changed: a new segment, not a change of the code."""

    device_key: str
    mode: str
    benchmark: str
    commit: str
    run_id: int  # the segment's first run
    difference: str  # "torch '2.11.0' -> '2.12.0'"


@dataclass(frozen=True)
class Detection:
    changes: tuple[Change, ...]
    segment_starts: tuple[SegmentStart, ...]
    series: int  # series examined

    @property
    def alarms(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.alarm)

    @property
    def exit_code(self) -> int:
        return 1 if self.alarms else 0


def series_of(rows: Iterable[Row]) -> list[list[Row]]:
    """``rows`` (as :meth:`Store.rows` orders them) grouped by device, mode and benchmark."""
    key = lambda r: (r.device_key, r.mode, r.benchmark)  # noqa: E731
    return [list(g) for _, g in groupby(rows, key=key)]


def segments_of(series: list[Row]) -> list[list[Row]]:
    """One series cut wherever its fingerprint segment changes (consecutive runs only)."""
    return [list(g) for _, g in groupby(series, key=lambda r: r.segment)]


def detect(rows: Iterable[Row], settings: StepSettings, *, last: int | None = None) -> Detection:
    """The changes and segment starts of every series in ``rows``."""
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
        raise ValueError(f"last must be an int >= 1, got {last!r}")
    changes: list[Change] = []
    starts: list[SegmentStart] = []
    all_series = series_of(rows)
    for series in all_series:
        segments = segments_of(series)
        for i, (prev, seg) in enumerate(zip([None, *segments[:-1]], segments, strict=True)):
            if prev is not None:
                starts.append(
                    SegmentStart(
                        seg[0].device_key,
                        seg[0].mode,
                        seg[0].benchmark,
                        seg[0].commit,
                        seg[0].run_id,
                        segment_difference(prev[-1].fingerprint, seg[0].fingerprint),
                    )
                )
            newest = i == len(segments) - 1
            changes.extend(_changes(seg, settings, newest=newest, last=last))
    return Detection(tuple(changes), tuple(starts), len(all_series))


def _changes(seg: list[Row], settings: StepSettings, *, newest: bool, last: int | None):
    steps = find_steps([r.median for r in seg], settings)
    bounds = [0, *(s.index for s in steps), len(seg)]
    for j, step in enumerate(steps):
        since = len(seg) - step.index
        slower = step.change > 0
        yield Change(
            device_key=seg[0].device_key,
            mode=seg[0].mode,
            benchmark=seg[0].benchmark,
            commit=seg[step.index].commit,
            run_id=seg[step.index].run_id,
            previous_commit=seg[step.index - 1].commit,
            before=step.before,
            after=step.after,
            p_value=step.p_value,
            runs_before=step.index - bounds[j],
            runs_after=bounds[j + 2] - step.index,
            runs_since=since,
            segment=seg[0].segment,
            newest_segment=newest,
            alarm=newest and slower and (last is None or since <= last),
        )
