"""Fixtures of the seed-scenario tests: the worker tests' in-process workers and helpers."""

from tests.worker.conftest import _test_handler_env, make_worker  # noqa: F401 (fixtures)
