"""Test handlers for the topology tests: record each payload through the factory's client, so
they work on one server, a Redis Cluster and behind Sentinel alike."""

from __future__ import annotations

import os

from taskqueue.redisio import clients
from taskqueue.worker.handlers import TaskContext

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


def until_cancelled(payload: str, ctx: TaskContext) -> None:
    """"quick" records at once; anything else reports progress and waits up to 30 s for its
    cancel, then records `cancelled:<payload>`."""
    if payload != "quick":
        ctx.progress(0.5, "half")
        if ctx.cancelled.wait(30):
            client().rpush(DONE, f"cancelled:{payload}")
            return
    record(payload)
