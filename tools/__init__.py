"""What users run beside perfgate's commands: ``python -m tools.tune`` (configs on a GPU),
``tools.history_demo`` (try ``perfgate history``), ``tools.mutate`` and ``tools.mutation_score``
(mutation testing), ``tools/replay_golden.py`` (the replay goldens). What reproduces a dated figure
or an H200 check is the lab's (``lab/scripts/``). Run them from a checkout.
"""
