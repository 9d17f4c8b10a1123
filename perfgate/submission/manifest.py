"""What an exported submission holds: the one place that names the package's parts it ships.

The modules are not listed one by one: they are the import closure of :data:`ROOTS` inside the
package (every ``from kernels... import`` of every shipped module, those inside functions
included), so a module the kernel engineers add or split off ships as soon as something shipped
imports it. What is named here is what the closure cannot find by itself:

- the entry point (``custom_kernel`` in ``kernels.gemm``) and the build module run at import;
- the native reducer's sources, which the compilers read: the list ``SOURCE_FILES`` of
  ``kernels/reducer/cache.py`` (the package's own list, read from its source);
- the per-vendor tuned tables: an export keeps its target vendor's table and ships every other
  vendor's as an empty ``TUNED`` (the occupancy model then picks configs on such a device).
"""

from __future__ import annotations

# The GPU MODE leaderboard the file is for (its first POPCORN directive).
LEADERBOARD = "amd-mxfp4-mm"
PACKAGE = "kernels"

# custom_kernel(data), the leaderboard's entry point
ENTRY_MODULE = "kernels.gemm"
ENTRY_NAME = "custom_kernel"
# run at import on a GPU: the device's architecture, then the native reducer's build
DEVICE_MODULE = "kernels.device"
BUILD_MODULE = "kernels.reducer.build"
ROOTS = (ENTRY_MODULE, DEVICE_MODULE, BUILD_MODULE)

# The module whose SOURCE_FILES (relative to its directory) lists the native reducer's sources.
NATIVE_SOURCES_MODULE = "kernels.reducer.cache"
NATIVE_SOURCES_NAME = "SOURCE_FILES"

# Tuned tables per vendor: each module assigns TUNED = {arch: {(m, n, k): GemmConfig}}.
TABLE_MODULES = {"amd": "kernels._configs_amd", "nvidia": "kernels._configs_nvidia"}
TABLE_NAME = "TUNED"

# The leaderboard's target: the one a submission is exported for unless --target names another.
DEFAULT_TARGET = "gfx950"
