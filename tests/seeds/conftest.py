"""Fixtures of the seed-scenario tests: the worker tests' in-process workers and helpers, and
the CLI tests' in-process `taskqueue` runner."""

from tests.cli.conftest import cli, manifest_file  # noqa: F401 (fixtures)
from tests.worker.conftest import _test_handler_env, make_worker  # noqa: F401 (fixtures)
