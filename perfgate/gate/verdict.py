"""The verdicts of the three gates (timing, host counts, static ISA): one vocabulary.

A verdict is one of the strings below, whichever gate gives it. ``regression`` and ``missing``
fail a gate (exit 1), ``inconclusive`` fails it unless ``inconclusive_exit = 0``; the rest pass.
Each gate writes a verdict in its own report with the label its readers know (the ISA table says
``REGRESSION`` and ``improved``): :data:`ISA_LABELS`, :data:`HOST_LABELS`.
"""

from __future__ import annotations

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
INCONCLUSIVE = "inconclusive"
NEW = "new"  # only in the current run
MISSING = "missing"  # only in the baseline
CHANGED = "changed"  # a difference the gate reports but does not judge (ISA: within tolerance)
NOT_CHECKED = "not checked"  # the baseline has it, this run skipped it on purpose

# The timing gate's report order: what fails first.
VERDICTS = (REGRESSION, MISSING, INCONCLUSIVE, IMPROVEMENT, NEW, UNCHANGED)

ISA_LABELS = {
    REGRESSION: "REGRESSION",
    IMPROVEMENT: "improved",
    CHANGED: "changed",
    NEW: "new (not gated)",
    NOT_CHECKED: "not checked",
}
HOST_LABELS = {REGRESSION: "REGRESSION", IMPROVEMENT: "improvement"}
