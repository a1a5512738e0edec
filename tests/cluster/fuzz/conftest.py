"""The API-server fuzz tests share the time limit rule of tests/redis/fuzz (its conftest)."""

from tests.redis.fuzz.conftest import pytest_collection_modifyitems

__all__ = ["pytest_collection_modifyitems"]
