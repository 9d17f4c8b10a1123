"""The native split-K reducer: one HIP/CUDA source (``splitk_reduce.cu``), built ahead of time.

- :mod:`kernels.reducer.build` - ``python -m kernels.reducer.build`` (``nox -s build``), and
  ``device_asm()`` for the static ISA gate.
- :mod:`kernels.reducer.native` - finds and loads a prebuilt library (never compiles).
- :mod:`kernels.reducer.cache` - cache paths, the source digest and the build manifest.
- :mod:`kernels.reducer.cases` - boundary-case partials shared by the tests and the benchmark.

Users call :func:`kernels.splitk.reduce_partials`, which picks the backend.
"""
