"""The "Why" section the gates add to a report that flags a regression (``ab``, ``bench``'s
stored gate, ``triage``'s summary and issues): for each flagged benchmark, the ranked list of
``perfgate explain`` between the two revisions the gate compared, static facts only (the launch,
the compile for the GPU's target and gfx950, the host path counted on the CPU).

It runs after the verdict, never while a benchmark is timed: its compiles would load the CPU
whose host path the leaderboard mode times. It is bounded by ``--explain-budget-s`` (default
:data:`DEFAULT_BUDGET_S`; 0 turns it off): what is not finished by then is named in one line.
It never changes a gate's verdict or exit code: any failure is one line in the section, never a
traceback, and a flagged benchmark is never left out silently.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from perfgate.explain import explain as ex
from perfgate.explain import render
from perfgate.refusal import Refusal

DEFAULT_BUDGET_S = 120.0
HEADING = "### Why: what changed between the two revisions"


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--explain-budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        metavar="S",
        help="when a benchmark is flagged, explain it (perfgate explain's static facts) within S "
        "seconds after the verdict; 0: do not (default: %(default)s)",
    )


def check(args: argparse.Namespace) -> None:
    budget = args.explain_budget_s
    if not budget >= 0:
        raise Refusal(f"--explain-budget-s must be a number of seconds >= 0, got {budget:g}")


def case_id(name: str) -> str:
    """The case id of a benchmark's report name (``...::test_leaderboard[m16-n2112-k7168]``)."""
    inside = name.rpartition("[")[2]
    return inside[:-1] if name.endswith("]") and "[" in name else name


def why_section(
    base: str | None,
    head: str | None,
    flagged: Iterable[str],
    *,
    budget_s: float,
    repo: Path | None = None,
    own_target: str | None = None,
) -> list[str]:
    """Markdown lines: the heading, then per flagged benchmark its ranked differences (``head``
    None: the working tree); a failure or an unknown ``base`` is one line."""
    flagged = list(dict.fromkeys(flagged))
    if not flagged:
        return []
    out = [HEADING, ""]
    if budget_s == 0:
        return [*out, "- not explained: --explain-budget-s 0", ""]
    if base is None:
        return [*out, "- not explained: the gate's baseline records no commit to compare with", ""]
    try:
        names: dict[str, list[str]] = {}
        benchmarks: dict[str, ex.Benchmark] = {}
        for name in flagged:
            for b in ex.select(case_id(name)):
                names.setdefault(b.name, []).append(name)
                benchmarks.setdefault(b.name, b)
        expl = ex.explain(
            base,
            head,
            list(benchmarks.values()),
            own_target=own_target or ex.default_target(),
            repo=repo,
            budget_s=budget_s,
        )
        out += render.why_lines(expl, names)
        out.append(f"_Static facts of `perfgate explain`, {expl.wall_s:.0f} s._")
    except Exception as exc:  # the verdict stands; the section says why it is missing
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        out.append(f"- could not explain {', '.join(f'`{case_id(n)}`' for n in flagged)}: {detail}")
    return [*out, ""]
