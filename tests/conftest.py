"""Root pytest configuration: the shared fixture plugins (real Redis, control plane, images)
and per-test hygiene of process-wide state (the root logger)."""

import logging
from collections.abc import Iterator

import pytest

pytest_plugins = [
    "tests.fixtures.redis_server", "tests.fixtures.redis_tls", "tests.fixtures.redis_cluster",
    "tests.fixtures.cluster",
    "tests.fixtures.operator",
    "tests.fixtures.images",
    "tests.fixtures.registry",
    "tests.fixtures.worker",
    "tests.fixtures.cli",
]


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that runs a worker or the CLI in-process installs a stderr handler bound to that
    test's captured stream; restore the root logger so a later test's warnings do not hit a
    closed stream (a '--- Logging error ---' on the later test's stderr)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
