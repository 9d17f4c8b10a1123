"""The static gfx950 / sm90 ISA gate's library (compile, parse, compare; no GPU).

:mod:`.metrics` parses compiler output, :mod:`.collect` compiles every spec of a target into a
report, :mod:`.gate` compares a report with a baseline. ``python -m perfgate isa`` is its
command (:mod:`perfgate.commands.isa`); docs/isa.md is the user guide.
"""
