"""The exact gate of the host-count census (``perfgate host``): the count file, its check, the
comparison. Any count above the baseline is a regression, any below an improvement; the census
itself is :mod:`perfgate.measure.host_census`.
"""

from __future__ import annotations

import json
from pathlib import Path

from perfgate.gate.paths import SCHEMA
from perfgate.refusal import Refusal

CATEGORIES = ("launches", "allocations", "copies", "syncs", "python_calls")


class CountError(Refusal):
    """A baseline or count file that cannot be used; the message is one line."""


# -- the gate --------------------------------------------------------------------------------------
def load(path: str | Path) -> dict:
    """A validated count file; CountError with a one-line reason otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CountError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CountError(f"{path}: is a directory, expected a host count file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        detail = " ".join(str(exc).split())
        raise CountError(f"{path}: unreadable ({type(exc).__name__}: {detail})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise CountError(f"{path}: not a host count file of schema {SCHEMA}")
    if not isinstance(data.get("python"), str):
        raise CountError(f"{path}: needs the Python version the calls were counted under")
    shapes = data.get("shapes")
    if not isinstance(data.get("device_key"), str) or not isinstance(shapes, dict) or not shapes:
        raise CountError(f"{path}: needs a device_key and at least one shape")
    for shape, cats in shapes.items():
        if not isinstance(cats, dict) or set(cats) != set(CATEGORIES):
            raise CountError(f"{path}: shape {shape} must hold exactly {', '.join(CATEGORIES)}")
        for cat, paths in cats.items():
            ok = isinstance(paths, dict) and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in paths.values()
            )
            if not ok:
                raise CountError(f"{path}: {shape} {cat} must map call paths to counts >= 0")
    return data


def compare(
    baseline: dict, current: dict, categories: tuple[str, ...] | None = None
) -> tuple[list[str], list[str]]:
    """(failures, improvements), one line each, over ``categories`` (default: all, which needs
    the same Python). Raises CountError for another device key or Python."""
    if baseline["device_key"] != current["device_key"]:
        raise CountError(
            f"baseline is for device {baseline['device_key']!r}, this run is "
            f"{current['device_key']!r}: counts of different devices are not comparable"
        )
    if categories is None:
        categories = CATEGORIES
        if baseline.get("python") != current.get("python"):
            raise CountError(
                f"baseline counted under Python {baseline.get('python')}, this run under "
                f"{current.get('python')}: python_calls differ between versions; record a "
                "baseline with this Python"
            )
    failures, improvements = [], []
    for shape, base_cats in baseline["shapes"].items():
        cats = current["shapes"].get(shape)
        if cats is None:
            failures.append(f"{shape}: missing from this run")
            continue
        for cat in categories:
            base, cur = base_cats[cat], cats[cat]
            for path in sorted(set(base) | set(cur)):
                b, c = base.get(path, 0), cur.get(path, 0)
                line = f"{shape}: {cat} {b} -> {c} per call at {path}"
                if c > b:
                    failures.append(line)
                elif c < b:
                    improvements.append(line)
    for shape in sorted(set(current["shapes"]) - set(baseline["shapes"])):
        # an ungated shape would pass whatever its counts: name it
        failures.append(
            f"{shape}: counted in this run, but the baseline has no counts for it "
            "(record them: python -m perfgate host --update)"
        )
    return failures, improvements


def totals(data: dict) -> dict[str, dict[str, int]]:
    return {s: {c: sum(p.values()) for c, p in cats.items()} for s, cats in data["shapes"].items()}


def print_totals(data: dict) -> None:
    print(f"host counts per custom_kernel call ({data['device_key']}):")
    print("  " + "shape".ljust(20) + "".join(c.rjust(14) for c in CATEGORIES))
    for shape, t in totals(data).items():
        print("  " + shape.ljust(20) + "".join(str(t[c]).rjust(14) for c in CATEGORIES))
