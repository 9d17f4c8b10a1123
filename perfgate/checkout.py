"""The checkout perfgate runs from: its root, its pyproject.toml, and the one reader of it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (the perf extra installs tomli there)
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"


def read_toml(path: Path, error: type[Exception], what: str) -> dict[str, Any]:
    """The TOML document at ``path``; ``error`` with one line naming the file when it is missing,
    unreadable or not TOML (``what``: what perfgate reads there, for the missing file's line)."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise error(
            f"{path}: not found; perfgate reads {what} in the repository's pyproject.toml (an "
            "installed wheel has none: install the checkout with pip install -e .)"
        ) from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({' '.join(str(exc).split())})") from None
