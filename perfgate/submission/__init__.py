"""Submission mode: the file a user submits is the file the suite tested.

- :mod:`perfgate.submission.manifest` - what an export ships (entry point, native sources,
  tuned tables per vendor, the POPCORN gpu name per target).
- :mod:`perfgate.submission.export` - fold ``kernels/`` into one leaderboard file, deterministically.
- :mod:`perfgate.submission.runtime` - the loader every exported file carries.
- :mod:`perfgate.submission.load` - import any submission file in isolation, find ``custom_kernel``.
- :mod:`perfgate.submission.pytest_plugin` - ``--submission FILE`` and the ``custom_kernel`` fixture.
- :mod:`perfgate.submission.bench` - ``bench``/``update-baselines --submission FILE``: the tag,
  the file passed to the benchmark processes, the check that a submission never meets a package
  baseline.
- :mod:`perfgate.submission.sides` - ``ab --base-submission A.py --head-submission B.py``: the
  options and the worker processes that time a file.

The commands are ``python -m perfgate submission export|test`` (perfgate/commands/submission.py),
and the ``--submission`` options of ``bench``, ``update-baselines`` and ``ab``; docs/submission.md
has the whole story.
"""
