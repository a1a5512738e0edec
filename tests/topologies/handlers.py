"""Test handlers for the topology tests: record each payload through the factory's client, so
they work on one server, a Redis Cluster and behind Sentinel alike."""

from __future__ import annotations

import os

from taskqueue import connection

URL_ENV = "TASKQUEUE_TOPOLOGY_TEST_URL"
DONE = "{topology-test}:done"
_clients: dict[str, connection.SyncClient] = {}


def client() -> connection.SyncClient:
    url = os.environ[URL_ENV]
    if url not in _clients:
        _clients[url] = connection.sync_client(
            connection.RedisSettings.from_dsn(url), decode_responses=True)
    return _clients[url]


def record(payload: str) -> None:
    client().rpush(DONE, payload)
