"""The fuzz tests: when hunting ($TASKQUEUE_FUZZ_EXAMPLES > 1, tests/redis/fuzz/budget.py)
each test's time limit grows with its examples (pytest-timeout's limit holds for a whole
Hypothesis run)."""

from __future__ import annotations

import pytest

from tests.redis.fuzz.budget import scale

CI_LIMIT_SECONDS = 300
"""The project's per-test limit (pyproject.toml, [tool.pytest.ini_options] timeout)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if scale() == 1:
        return
    for item in items:
        if item.path.parent.name == "fuzz":
            item.add_marker(pytest.mark.timeout(CI_LIMIT_SECONDS * scale()))
