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
    "perfgate.ab",
    "perfgate.experiments",
    "perfgate.host",
    "perfgate.isa",
    "perfgate.container",
    "perfgate.commands.history",
    "perfgate.commands.bisect",
    "perfgate.commands.submission",
)


class CommandImportError(ImportError):
    """A command module that cannot be imported; the message is one line naming it."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="perfgate", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        # A command that vanished from --help would turn a CI step that calls it into a usage
        # error far from the cause, or into nothing at all: name the broken module instead.
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise CommandImportError(
                f"command module {name} failed to import ({detail})", name=name
            ) from exc
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
    except CommandImportError as exc:
        print(f"perfgate: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
