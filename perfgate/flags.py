"""On/off environment variables (``PERFGATE_REQUIRE_GPU``, ``PERFGATE_TRACEBACK``): one parser;
numbers in environment variables (:func:`number`): another.

``1``, ``true``, ``yes``, ``on`` mean on; ``0``, ``false``, ``no``, ``off`` and the empty string
mean off, as does an unset variable; case and surrounding blanks do not matter. Anything else is
refused (:class:`FlagError`, one line naming the variable), never read as on or as off: a
``PERFGATE_REQUIRE_GPU=false`` that counted as set, or a ``=ture`` that counted as unset, would
turn a GPU job's policy upside down without a word.

Standard library only: the noxfile loads this file by its path, before anything is installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off", "")
# every on/off variable perfgate and the noxfile read; `python -m perfgate` checks them at start
NAMES = ("PERFGATE_REQUIRE_GPU", "PERFGATE_TRACEBACK", "MXFP4_REQUIRE_NATIVE_REDUCER")


class FlagError(ValueError):
    """An on/off variable with another value; the message is one line naming it. Not a
    perfgate.refusal.Refusal: the noxfile loads this file by path, so it imports nothing of
    perfgate; ``python -m perfgate`` checks the variables before any command runs."""


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``name`` is on in ``environ`` (default: this process's environment)."""
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    raise FlagError(
        f"{name} must be one of {', '.join(ON)} (on) or {', '.join(OFF[:-1])} or empty (off), "
        f"got {raw!r}"
    )


def check(names: Iterable[str] = NAMES, environ: Mapping[str, str] | None = None) -> None:
    """FlagError for the first of ``names`` whose value is neither on nor off."""
    for name in names:
        flag(name, environ)


def number(environ: Mapping[str, str], name: str, example: str, upper: float) -> float:
    """The number in environment variable ``name``, in [0, upper) (0 when unset or blank); a
    one-line ValueError naming the variable, with ``example``, for anything else."""
    raw = environ.get(name, "").strip()
    if not raw:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be {example}, got {raw!r}") from None
    if not 0.0 <= value < upper:  # also refuses nan
        raise ValueError(f"{name} must be in [0, {upper:g}), got {raw!r}")
    return value
