"""Test handlers: they record what they ran in Redis (URL in $TASKQUEUE_TEST_REDIS_URL)."""

from __future__ import annotations

import asyncio
import json
import os
import time

import redis

from taskqueue.worker.handlers import TaskContext

URL_ENV = "TASKQUEUE_TEST_REDIS_URL"
DONE = "test:done"
CONTEXTS = "test:contexts"
_clients: dict[str, redis.Redis] = {}


def client() -> redis.Redis:
    url = os.environ[URL_ENV]
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, decode_responses=True,
                                            encoding_errors="surrogateescape")
    return _clients[url]


def record(payload: str) -> None:
    # bytes: redis-py's hiredis packer encodes str strictly, whatever encoding_errors says
    client().rpush(DONE, payload.encode("utf-8", "surrogateescape"))


def record_with_context(payload: str, ctx: TaskContext) -> None:
    client().rpush(CONTEXTS, json.dumps({"payload": payload, "id": ctx.id, "queue": ctx.queue,
                                         "attempt": ctx.attempt}))
    client().rpush(DONE, payload)


async def record_async(payload: str, ctx: TaskContext) -> None:
    await asyncio.sleep(0.001)
    record_with_context(payload, ctx)


def sleep_then_record(payload: str) -> None:
    """Sleeps float(payload.split(':')[1]) seconds then records the payload."""
    time.sleep(float(payload.split(":")[1]))
    record(payload)


def fail_first(payload: str, ctx: TaskContext) -> None:
    """Fails the first attempt(s) while attempt < int(payload), then records."""
    if ctx.attempt < int(payload):
        raise ValueError(f"attempt {ctx.attempt} fails")
    record_with_context(payload, ctx)


def explode(payload: str) -> None:
    raise RuntimeError("boom " + payload)


def chaos(payload: str) -> None:
    """A short task for the SIGKILL chaos test: ~2 ms of work, then recorded."""
    time.sleep(0.002)
    client().rpush(DONE, payload)
