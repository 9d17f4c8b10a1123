"""lab: experiments that validate perfgate's gates on a GPU (the injected slowdowns, their power).

Exit codes as perfgate's: 0 done; 2 input that cannot be used, with one line on stderr naming
the argument or file and what was expected.
"""

from __future__ import annotations

import sys

from perfgate import __main__ as cli

# Command modules, in the order ``--help`` lists them (the interface of perfgate's commands).
COMMAND_MODULES = ("lab.experiment",)


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, name="lab", modules=COMMAND_MODULES, description=__doc__)


if __name__ == "__main__":
    sys.exit(main())
