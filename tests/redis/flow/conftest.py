"""The flow-control tests: every test's handlers record into the test's Redis."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _test_handler_env(handler_env: None) -> None:
    """The test handlers write to the test's Redis."""
