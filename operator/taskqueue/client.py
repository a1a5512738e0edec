"""Producer client: `enqueue()` pushes a payload in an envelope the worker unwraps.

Lists get LPUSH (the worker takes the oldest from the right end); zset queues get ZADD with the
priority as score (lowest first, default 0). Envelope ids sort by creation time, so tasks with
equal scores come out FIFO. Raw `LPUSH key payload` from any language works as well.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

import redis
from taskqueue import connection, keys

WAIT_TIMEOUT_MS = 2000


class NotReplicated(redis.RedisError):
    """Durable mode: fewer replicas than asked confirmed a push in time (it may still be lost
    if the master fails now; push again or treat the task as not enqueued)."""


def connect(url: str, **options: Any) -> redis.Redis:
    """A producer client for any DSN the project accepts (see `taskqueue.connection`)."""
    return connection.sync_client(connection.RedisSettings.from_dsn(url), **options)


def connect_async(url: str, **options: Any) -> aioredis.Redis:
    """An asyncio producer client for any DSN the project accepts."""
    return connection.async_client(connection.RedisSettings.from_dsn(url), **options)


def _push_durably(client: Any, key: str, push: str, args: list[Any], replicas: int) -> None:
    """`push` (LPUSH/ZADD) then WAIT on the same connection: the push reached `replicas`."""
    node = client.get_node_from_key(key).redis_connection if hasattr(
        client, "get_node_from_key") else client  # a cluster: the node that owns the key
    pipe = node.pipeline(transaction=False)
    pipe.execute_command(push, key, *args)
    pipe.execute_command("WAIT", replicas, WAIT_TIMEOUT_MS)
    try:
        acked = int(pipe.execute()[1])
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
        if node is not client:  # a failover moved the slot: learn the new map, then retry
            client.nodes_manager.initialize()
        raise
    if acked < replicas:
        raise NotReplicated(f"{acked} of {replicas} replica(s) confirmed the push to {key} "
                            f"within {WAIT_TIMEOUT_MS} ms")


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
                      priority: float | None = None, wait_replicas: int = 0) -> list[str]:
    """Push many tasks in one command (LPUSH or ZADD), in order. Returns their ids.

    `wait_replicas` (durable mode) returns only once that many replicas have the push, and
    raises NotReplicated when they do not confirm it in time."""
    pairs = [envelope(p) for p in payloads]
    if not pairs:
        return []
    if wait_replicas:
        if priority is None:
            _push_durably(client, key, "LPUSH", [e for _, e in pairs], wait_replicas)
        else:
            _push_durably(client, key, "ZADD", [a for _, e in pairs for a in (priority, e)],
                          wait_replicas)
    elif priority is None:
        client.lpush(key, *[e for _, e in pairs])
    else:
        client.zadd(key, {e: priority for _, e in pairs})
    return [t for t, _ in pairs]
