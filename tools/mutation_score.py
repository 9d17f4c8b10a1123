"""Mutation scores of the last ``mutmut run``: ``python -m tools.mutation_score [--fail-under
MODULE=PERCENT ...]``.

Reads ``mutmut results --all True`` (run here, from the directory holding ``mutants/``) and
prints the killed share per package and per module, then every mutant still alive. Killed:
mutmut's ``killed``, ``timeout`` and ``segfault`` (the tests stopped it). Alive: ``survived``,
``suspicious`` and ``no tests`` (no test reaches the line, so nothing would notice it either).
Mutants ``not checked`` (a run narrowed to some names, or interrupted) are counted apart.
Exit status: 0; 1 when a ``--fail-under`` module scores below its percentage; 2 when nothing
was checked, a ``--fail-under`` module has unchecked mutants, or an argument is unusable.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict

from perfgate import spawn

KILLED = {"killed", "timeout", "segfault"}
ALIVE = {"survived", "suspicious", "no tests"}
UNCHECKED = "not checked"
# "    perfgate.gate.process_ab.x_bounds__mutmut_82: survived"; methods are xǁClassǁname
LINE = re.compile(r"^\s+(?P<name>(?P<module>[\w.]+?)\.x\S*__mutmut_\d+): (?P<status>.+)$")


def parse(text: str) -> dict[str, str]:
    """mutant name -> status, from ``mutmut results --all True``."""
    return {m["name"]: m["status"].strip() for m in map(LINE.match, text.splitlines()) if m}


def module_of(name: str) -> str:
    return LINE.match(f"    {name}: x")["module"]


def scores(results: dict[str, str], key=module_of) -> dict[str, tuple[int, int]]:
    """(killed, counted) per ``key(mutant)``, in name order."""
    tally: dict[str, Counter] = defaultdict(Counter)
    for name, status in results.items():
        tally[key(name)][status in KILLED] += 1
    return {k: (c[True], c[True] + c[False]) for k, c in sorted(tally.items())}


def _floor(text: str) -> tuple[str, float]:
    module, _, percent = text.partition("=")
    try:
        value = float(percent)
    except ValueError:
        value = -1.0
    if not module or not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"expected MODULE=PERCENT (0-100), got {text!r}")
    return module, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mutation_score", description=__doc__)
    parser.add_argument("--fail-under", type=_floor, action="append", default=[],
                        metavar="MODULE=PERCENT", help="exit 1 when MODULE kills less")  # fmt: skip
    args = parser.parse_args(argv)
    done = spawn.run(["mutmut", "results", "--all", "True"], capture_output=True, text=True)
    everything = parse(done.stdout)
    unchecked = Counter(module_of(n) for n, s in everything.items() if s == UNCHECKED)
    results = {n: s for n, s in everything.items() if s != UNCHECKED}
    unknown = sorted(set(results.values()) - KILLED - ALIVE)
    if done.returncode != 0 or not results or unknown:
        why = (
            f"statuses {unknown}"
            if unknown
            else f"mutmut results {spawn.describe(done.returncode)}"
        )
        print(f"mutation_score: error: nothing complete to score ({why}); run mutmut run first",
              file=sys.stderr)  # fmt: skip
        return 2
    by_module = scores(results)
    for label, table in (("package", scores(results, lambda n: module_of(n).rsplit(".", 1)[0])),
                         ("module", by_module)):  # fmt: skip
        for key, (killed, counted) in table.items():
            print(f"{label:8} {key:40} killed {killed:5} of {counted:5} ({killed / counted:6.1%})")
    for name, status in results.items():
        if status in ALIVE:
            print(f"alive    {name} ({status})")
    if unchecked:
        print(f"unchecked {sum(unchecked.values())} mutants of {len(unchecked)} modules")
    missing = [m for m, _ in args.fail_under if m not in by_module or m in unchecked]
    if missing:
        print(f"mutation_score: error: --fail-under {missing[0]}: its mutants were not all run",
              file=sys.stderr)  # fmt: skip
        return 2
    low = [(m, p) for m, p in args.fail_under if 100 * by_module[m][0] / by_module[m][1] < p]
    for module, percent in low:
        print(
            f"mutation_score: {module} kills less than {percent:g}% of its mutants", file=sys.stderr
        )
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
