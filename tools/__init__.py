"""Tools that measure the kernels on a GPU (``python -m tools.tune``, ``python -m lab.scripts.reducer_bench``).

They live outside ``kernels/`` so that the package under test holds no timing code, and they time
with :mod:`perfgate.measure.clock`, the gate's own timer. Run them from a checkout.
"""
