"""perfgate: the CI machinery of the MXFP4 GEMM suite.

Device-time timing for pytest-benchmark, per-device baselines, the statistical regression gate,
the static ISA gate, and reports. Run ``python -m perfgate --help``.
"""
