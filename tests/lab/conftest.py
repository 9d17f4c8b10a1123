"""The lab's tests share the fixtures of perfgate's (results files, the checkout's history)."""

from tests.perfgate.conftest import (  # noqa: F401  (fixtures, found by name)
    _gpu_like_fixture,
    _make_result_fixture,
    history_git,
    write_result,
)
