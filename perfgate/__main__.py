"""perfgate: the MXFP4 GEMM suite's regression gates (timing, host counts, static ISA) for CI.

Exit codes, the same for every command: 0 pass; 1 a regression; 2 input that cannot be used,
with one line on stderr naming the argument or file and what was expected.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import re
import signal
import sys
import traceback
from collections.abc import Iterator

from perfgate import flags
from perfgate.refusal import Refusal, RunFailure

# Command modules, in the order ``--help`` lists them. A module exposes ``register(subparsers)``,
# which adds its parser and sets ``func(args) -> int`` (the exit code); it keeps heavy imports
# (torch, triton) inside ``func`` so that ``--help`` stays instant.
_COMMAND_MODULES = tuple(
    f"perfgate.commands.{name}"
    for name in (
        "compare",
        "bench",
        "ab",
        "host",
        "isa",
        "container",
        "history",
        "bisect",
        "triage",
        "explain",
        "submission",
    )
)
# Signals that end a command the way Ctrl-C does: cleanup runs, children are stopped.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
TRACEBACK_ENV = "PERFGATE_TRACEBACK"


class CommandImportError(ImportError):
    """A command module that cannot be imported; the message is one line naming it."""


class Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (exit 2), as every other refusal of perfgate's."""

    def error(self, message: str) -> None:  # type: ignore[override]
        text = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {text} (see {self.prog} --help)\n")


def plain_text(doc: str) -> str:
    """A docstring as a user reads it: reStructuredText markup removed (``code``, **bold**,
    :role:`target`), so that ``--help`` shows words, not markup."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`\n]+)`", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    return text.replace("::\n", ":\n")


def build_parser(
    prog: str = "perfgate", modules: tuple[str, ...] | None = None, description: str = __doc__
) -> argparse.ArgumentParser:
    """The CLI of ``modules`` (command modules, in --help's order; perfgate's by default, read
    when called); ``python -m lab`` builds its own from its modules with the same machinery."""
    modules = _COMMAND_MODULES if modules is None else modules
    parser = Parser(
        prog=prog,
        description=description.strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in modules:
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
    for action in sub._choices_actions:  # the command list of perfgate --help
        action.help = plain_text(action.help or "")
    for command in sub.choices.values():
        if command.description:
            command.description = plain_text(command.description)
        for action in command._actions:
            if action.help and action.help is not argparse.SUPPRESS:
                action.help = plain_text(action.help)
    parser.commands = sub.choices  # type: ignore[attr-defined]
    return parser


def main(
    argv: list[str] | None = None,
    *,
    name: str = "perfgate",
    modules: tuple[str, ...] | None = None,
    description: str = __doc__,
) -> int:
    try:
        parser = build_parser(name, modules, description)
        commands = parser.commands
    except CommandImportError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command's parser, which says where its --help is
        commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    prog = command_parser(parser, args).prog  # perfgate history add, not perfgate history
    try:  # before any work: an on/off variable that is neither (PERFGATE_REQUIRE_GPU=maybe)
        flags.check()
    except flags.FlagError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    with _stopping_on_signals():
        try:
            return int(args.func(args) or 0)
        except KeyboardInterrupt:
            print(f"{prog}: interrupted", file=sys.stderr)
            return 130
        except Refusal as exc:  # unusable input, wherever the command found it
            print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
            return 2
        except RunFailure as exc:  # the run failed: the same line, the failure's exit code
            print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
            return exc.code
        except ModuleNotFoundError as exc:
            return missing(prog, exc) if _optional(exc) else unexpected(prog, exc)
        except Exception as exc:
            return unexpected(prog, exc)


def command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The innermost parser ``args`` went through: ``perfgate history add``'s for that
    subcommand, so that an error line names the subcommand as its usage line does."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or getattr(args, sub.dest, None) not in sub.choices:
            return parser
        parser = sub.choices[getattr(args, sub.dest)]


def one_line(exc: BaseException) -> str:
    """An error's message on one line, as every error line of perfgate is."""
    return " ".join(str(exc).split())


DISTRIBUTION = "mxfp4-gemm-suite"  # [project] name in pyproject.toml


def _optional(exc: ModuleNotFoundError) -> bool:
    """A third-party module (an optional extra, most often), not one of this checkout's."""
    return bool(exc.name) and exc.name.split(".")[0] not in ("perfgate", "kernels", "lab", "tools")


def extra_for(module: str) -> str | None:
    """The extra of pyproject's ``[project.optional-dependencies]`` that installs ``module``, as
    the installed checkout's metadata lists it; None where it is not installed or lists none."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for req in requires:
        name = re.match(r"[A-Za-z0-9._-]+", req)
        extra = re.search(r"""extra == ["']([^"']+)["']""", req)
        if name and extra and name.group().lower().replace("-", "_") == module.lower():
            return extra.group(1)
    return None


def missing(prog: str, exc: ModuleNotFoundError) -> int:
    """A command that needs a module this environment lacks: one line naming what installs it."""
    module = exc.name.split(".")[0]
    extra = extra_for(module)
    how = (f"perfgate's {extra!r} extra: pip install -e '.[{extra}]'" if extra
           else f"pip install {module}")  # fmt: skip
    print(f"{prog}: error: needs the Python module {module!r}, which is not installed ({how})",
          file=sys.stderr)  # fmt: skip
    return 2


def unexpected(prog: str, exc: BaseException) -> int:
    """An error no check foresaw: one line and exit 2, never a traceback's exit 1 (which CI
    would read as a regression). ``PERFGATE_TRACEBACK=1`` adds the traceback."""
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
    print(
        f"{prog}: error: {detail} (an input perfgate did not expect; set {TRACEBACK_ENV}=1 for "
        "the traceback)",
        file=sys.stderr,
    )
    if flags.flag(TRACEBACK_ENV):  # checked when the command started
        traceback.print_exception(exc)
    return 2


@contextlib.contextmanager
def _stopping_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit(128 + signal) while a command runs: ``finally``
    blocks run, temporary files go (perfgate.atomic) and children are stopped
    (perfgate.spawn), as on Ctrl-C. The previous handlers come back afterwards."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {}
    for sig in _STOP_SIGNALS:
        with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
            previous[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
