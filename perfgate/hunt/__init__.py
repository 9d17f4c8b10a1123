"""perfgate hunt: which commit made a benchmark slower (``perfgate bisect``, ``perfgate triage``;
docs/history.md, "Bisect" and "Triage").

- :mod:`~perfgate.hunt.lines`: the lines of commits a bisection walks (main's, a merge's).
- :mod:`~perfgate.hunt.bisect`: bisection over an injected same-job A/B runner, into merges,
  and the runner that drives ``python -m perfgate ab``.
- :mod:`~perfgate.hunt.culprits`: the flagged benchmarks of a red main, their good commits,
  the step budget and the bisections.
- :mod:`~perfgate.hunt.triage`: triage of a red main, the pieces run in turn;
  :mod:`~perfgate.hunt.triage_report` what it writes (summary, issues, JSON);
  :mod:`~perfgate.hunt.github` the issues client (the few REST calls).

The hunt reads the run store (:mod:`perfgate.history`: the good commits are runs that passed)
and never the other way round (tests/perfgate/test_architecture.py holds it). Git runs through
:mod:`perfgate.git`, as everywhere in perfgate.
"""
