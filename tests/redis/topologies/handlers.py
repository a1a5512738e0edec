"""Test handlers for the topology tests: record each payload through the factory's client, so
they work on one server, a Redis Cluster and behind Sentinel alike."""

from __future__ import annotations

import os

from taskqueue.redisio import clients

URL_ENV = "TASKQUEUE_TOPOLOGY_TEST_URL"
DONE = "{topology-test}:done"
_clients: dict[str, clients.SyncClient] = {}


def client() -> clients.SyncClient:
    url = os.environ[URL_ENV]
    if url not in _clients:
        _clients[url] = clients.sync_client(
            clients.RedisSettings.from_dsn(url), decode_responses=True)
    return _clients[url]


def record(payload: str) -> None:
    client().rpush(DONE, payload)
