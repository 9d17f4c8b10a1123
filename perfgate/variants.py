"""The one seam between the product and the lab: *variants*, a case's calls timed with an extra
pass after them.

perfgate times the kernels as they are. The lab (``python -m lab``, the package above perfgate
that validates the gate, which nothing of perfgate imports) times the same calls with an extra
pass after them, an injected slowdown, to measure how often the gate sees one. It plugs that in
here and nowhere else: ``PERFGATE_VARIANTS=MODULE`` names a module that provides variants, and
the two places that time a case ask it:

- the pytest harness (:class:`perfgate.plugin.Harness`), once per session:
  ``MODULE.harness_pass()`` returns None (time the calls alone) or a :class:`HarnessPass`, the
  extra pass timed after every benchmark's calls, which records itself in the benchmark's
  ``extra_info`` (``update-baselines`` refuses such results);
- the A/B worker's prepare (:mod:`perfgate.measure.worker`), when asked for levels:
  ``MODULE.prepare(unit, levels, cycles)`` returns the case's variant units by name, and what
  to report of each.

An environment variable, not an in-process registry, because both places run in processes the
lab starts (pytest children, worker processes), which inherit the environment. Unset, nothing
is imported and nothing is injected.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from perfgate.refusal import Refusal

VARIANTS_ENV = "PERFGATE_VARIANTS"


class VariantsError(Refusal):
    """``PERFGATE_VARIANTS`` names no importable provider."""


class HarnessPass(Protocol):
    """The extra pass of a pytest benchmark run."""

    def make(self, plain_seconds: float, flush: Callable[[], None]) -> Callable[[], None]:
        """The extra pass for calls that take ``plain_seconds`` together (one timed unit)."""

    def record(
        self, extra: Callable[[], None], plain_seconds: float, flush: Callable[[], None]
    ) -> dict[str, Any]:
        """What the benchmark's ``extra_info`` records of ``extra`` (keys ``injected_*``)."""


@dataclass
class Unit:
    """One prepared case as the worker times it, handed to ``MODULE.prepare``.

    ``kind``: ``graph`` (device mode: every copy's calls in one launch, ``plain.run``) or
    ``call`` (whole-call modes: ``plain()`` is one ``custom_kernel`` call, rotating over the
    input sets); ``with_extra(extra)`` builds the same timed unit with ``extra`` after the calls;
    ``work`` is the case (:class:`perfgate.measure.harness.Work`), ``flush`` the mode's flush."""

    kind: str
    plain: Any
    work: Any
    flush: Callable[[], None]
    with_extra: Callable[[Callable[[], None]], Any]


def named(environ: Any = None) -> str:
    """The module ``PERFGATE_VARIANTS`` names; empty where it is unset or blank."""
    return (os.environ if environ is None else environ).get(VARIANTS_ENV, "").strip()


def provider(environ: Any = None) -> Any:
    """The module ``PERFGATE_VARIANTS`` names, or None where it is unset or blank;
    VariantsError, one line, where it cannot be imported or lacks the hooks."""
    name = named(environ)
    if not name:
        return None
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise VariantsError(f"{VARIANTS_ENV}={name!r}: cannot be imported ({exc}); expected a "
                            "module that provides variants, such as lab.variants") from None  # fmt: skip
    missing = [
        hook for hook in ("harness_pass", "prepare") if not callable(getattr(module, hook, None))
    ]
    if missing:
        raise VariantsError(f"{VARIANTS_ENV}={name!r}: lacks {', '.join(missing)}; expected a "
                            "module that provides variants, such as lab.variants")  # fmt: skip
    return module


def harness_pass() -> HarnessPass | None:
    """The extra pass the pytest harness times after every benchmark's calls, or None."""
    module = provider()
    return None if module is None else module.harness_pass()


def prepare(unit: Unit, levels: dict[str, float], cycles: dict[str, int]) -> tuple[dict, dict]:
    """The worker's variants of ``unit`` by name, and the record of each; ValueError when
    levels are asked for and no provider is set."""
    module = provider()
    if module is None:
        raise ValueError(f"levels {sorted(levels)} asked for, but {VARIANTS_ENV} names no "
                         "provider of variants (the lab sets it for its workers)")  # fmt: skip
    return module.prepare(unit, levels, cycles)
