"""Why a benchmark got slower: ``perfgate explain --base R --head H [-k BENCHMARK]``.

The gates say *that* a benchmark got slower and bisect and triage say *which commit*; this
package says *why*, from facts each revision's own code gives about one benchmark, compared side
by side and ranked (docs/explain.md):

- :mod:`~perfgate.explain.launch_facts`: the config selected for the shape on a target (tile,
  warps, stages, split-K, quantizer variant), the grid and the kernels launched per call;
- :mod:`~perfgate.explain.static_facts`: the GEMM kernel of that config compiled for the target
  on any CPU (:mod:`perfgate.isa`): registers, spills, LDS, occupancy, tracked instruction
  counts, the vector work per wave (gfx950) or per warp (sm90, from the SASS);
- :mod:`~perfgate.explain.host_facts`: the host path of one call, counted by the census of
  ``perfgate host`` (:mod:`perfgate.measure.host_census`);
- :mod:`~perfgate.explain.device_split`: on a GPU, each kernel's device time in the call;
- :mod:`~perfgate.explain.source_facts`: which files of ``kernels/`` differ, and what they hold;
- :mod:`~perfgate.explain.ranking` compares the two sides and ranks the differences;
  :mod:`~perfgate.explain.render` writes the side-by-side tables and the ranked list;
- :mod:`~perfgate.explain.revision` runs the children, :mod:`~perfgate.explain.explain` puts it
  together, :mod:`~perfgate.explain.wiring` is what the gates (``ab``, ``bench``, ``triage``)
  call, under a time budget, never failing them.

**Whose code computes a revision's facts (decision).** Each revision's facts come from a process
of its own (forked by a child, :mod:`~perfgate.explain.child`, started through
:mod:`perfgate.spawn`, so that it dies with the command, once it has loaded torch and nothing of
any revision's) that imports **that revision's** ``kernels`` package (a git worktree of it,
put first on the path the way an A/B worker does it,
:func:`perfgate.measure.worker.use_kernels_from`) and **this checkout's** ``perfgate``: the
measuring tool (the compile, the ISA parsers, the census, the timer) is the same on both sides,
so a difference is the code under test's, and a base that predates a helper of perfgate's is
still measured with it. The child needs only the ``kernels`` interface of docs/CONTRACTS.md that
every revision since the static compile has (``kernels.gemm.compile_spec``,
``kernels.configs.select_config``, ``kernels.device.TARGET_DEVICES``); a fact a revision cannot
give (an older ``kernels`` without it) is reported as not available, in one line, and nothing is
compared for it. The parent only compares the children's JSON. Nothing is cached across
revisions: each fact is computed afresh by each side's child (Triton's own compile cache is
keyed by the kernel's source, so it cannot hide a change).
"""
