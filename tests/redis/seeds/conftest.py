"""The seed-scenario tests: the test handlers record into the test's Redis (`handler_env`);
`make_worker` (tests/fixtures/worker.py) and `cli`, `manifest_file` (tests/fixtures/cli.py) are
the shared fixture plugins."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _test_handler_env(handler_env: None) -> None:
    """The test handlers write to the test's Redis."""
