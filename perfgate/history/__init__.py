"""perfgate history: the run store. Every run kept, its change points found, plotted and
published, and the push gate judged against the recent past (docs/history.md).

- :mod:`~perfgate.history.config`: ``[tool.perfgate-history]`` of pyproject.toml, checked.
- :mod:`~perfgate.history.records`: what is kept of a results file (identity, order, segment);
  :mod:`~perfgate.history.ab_records` the same of an A/B's samples file.
- :mod:`~perfgate.history.store`: where the store is, and its SQLite implementation;
  :mod:`~perfgate.history.store_base` the interface both stores share;
  :mod:`~perfgate.history.pgstore` the PostgreSQL one (a server for a fleet of runners);
  :mod:`~perfgate.history.migrate` the checked copy between stores (``history migrate``).
- :mod:`~perfgate.history.append`: adding results files (``history add``, ``--history``).
- :mod:`~perfgate.history.verdicts`: a run's gate verdict, from the report beside it.
- :mod:`~perfgate.history.steps`: steps in one series of medians (ruptures + filters).
- :mod:`~perfgate.history.detect`: change points per benchmark, cut at fingerprint changes.
- :mod:`~perfgate.history.plot`, :mod:`~perfgate.history.site`: pictures and the static report.
- :mod:`~perfgate.history.against`: the push gate's baseline from the last runs of main.
- :mod:`~perfgate.history.wiring`: what ``bench`` and ``ab`` do with the store (``--history``,
  ``--against history``).

Which commit made a benchmark slower is not found here: that is :mod:`perfgate.hunt` (bisect,
triage), which reads this store; nothing here imports the hunt.

Heavy imports (scipy, ruptures, matplotlib) stay inside the functions that need them.
"""
