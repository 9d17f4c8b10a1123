"""``python -m perfgate <command>``: each command lives in its own module.

A command module exposes ``register(subparsers)``, which adds its parser and sets
``func(args) -> int`` (the exit code). Modules keep heavy imports (torch, triton) inside ``func``
so that ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command modules, in the order ``--help`` lists them
_COMMAND_MODULES = (
    "perfgate.compare",
    "perfgate.bench",
    "perfgate.isa",
    "perfgate.container",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfgate", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real missing dependency, not an unwritten module
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
