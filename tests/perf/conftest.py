"""tests/perf: the GPU benchmarks (groups ``leaderboard``, ``reducer`` and the ``slow`` grid).

Their options, hooks and the ``harness`` fixture are perfgate's pytest plugin
(:mod:`perfgate.plugin`). ``python -m perfgate bench`` loads it with ``-p perfgate.plugin``; this
conftest loads it for a plain ``pytest tests/perf``, and only when ``-p`` has not (its options
must be registered once).
"""

from __future__ import annotations

import pytest

# perfgate.plugin.PLUGIN_NAME; not imported from there, so that pytest imports the plugin itself
PLUGIN_NAME = "perfgate.plugin"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin(PLUGIN_NAME):
        # registering replays pytest_addoption for the plugin, so its options exist from here on
        pluginmanager.import_plugin(PLUGIN_NAME)
