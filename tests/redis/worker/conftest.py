"""The worker tests: every test's handlers record into the test's Redis (`handler_env`);
`make_worker` comes from tests/fixtures/worker.py."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _test_handler_env(handler_env: None) -> None:
    """The test handlers write to the test's Redis."""
