"""Producer client: `enqueue()` pushes a payload in an envelope the worker unwraps.

Lists get LPUSH (the worker takes the oldest from the right end); zset queues get ZADD with the
priority as score (lowest first, default 0). Envelope ids sort by creation time, so tasks with
equal scores come out FIFO. Raw `LPUSH key payload` from any language works as well.
"""

from __future__ import annotations

import time

import redis
import redis.asyncio as aioredis

from taskqueue import keys


def envelope(payload: str, *, task_id: str | None = None) -> tuple[str, str]:
    """(task id, element) for `payload`."""
    tid = task_id or keys.new_task_id()
    return tid, keys.wrap(payload, task_id=tid, enqueued_at=time.time())


def enqueue_sync(client: redis.Redis, key: str, payload: str, *,
                 priority: float | None = None, task_id: str | None = None) -> str:
    """Push one task; a `priority` makes it a ZADD to a zset queue. Returns the task id."""
    tid, element = envelope(payload, task_id=task_id)
    if priority is None:
        client.lpush(key, element)
    else:
        client.zadd(key, {element: priority})
    return tid


async def enqueue(client: aioredis.Redis, key: str, payload: str, *,
                  priority: float | None = None, task_id: str | None = None) -> str:
    """Push one task; a `priority` makes it a ZADD to a zset queue. Returns the task id."""
    tid, element = envelope(payload, task_id=task_id)
    if priority is None:
        await client.lpush(key, element)
    else:
        await client.zadd(key, {element: priority})
    return tid


def enqueue_many_sync(client: redis.Redis, key: str, payloads: list[str], *,
                      priority: float | None = None) -> list[str]:
    """Push many tasks in one command (LPUSH or ZADD), in order. Returns their ids."""
    pairs = [envelope(p) for p in payloads]
    if not pairs:
        return []
    if priority is None:
        client.lpush(key, *[e for _, e in pairs])
    else:
        client.zadd(key, {e: priority for _, e in pairs})
    return [t for t, _ in pairs]
