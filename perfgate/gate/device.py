"""What "the same device" means, defined once for every gate.

- :data:`COMPARABLE`: two timings are comparable only on the same device key and these fields
  (a different architecture, or a MIG/CPX slice with fewer compute units, is another device);
  ``compare`` refuses otherwise (exit 2).
- :data:`RECORDED`: what a stored baseline's device is: the comparable fields and the GPU's name.
  ``update-baselines`` replaces a baseline recorded on another one only with ``--replace-device``.
  Every other fingerprint difference (driver, runtime, torch, triton, clocks) is a warning.
"""

from __future__ import annotations

from typing import Any

COMPARABLE = ("arch", "compute_units")
RECORDED = ("gpu_name", *COMPARABLE)


def differences(
    old: dict[str, Any], new: dict[str, Any], fields: tuple[str, ...] = RECORDED
) -> str:
    """``"arch 'sm90' -> 'gfx950', ..."`` for the ``fields`` that differ; empty when none."""
    return ", ".join(
        f"{f} {old.get(f)!r} -> {new.get(f)!r}" for f in fields if old.get(f) != new.get(f)
    )
