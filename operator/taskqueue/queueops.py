"""Redis operations on a TaskQueue shared by the operator, the worker and the CLI.

Reads a whole observation in one round trip (`observe`) and requeues a departed worker's tasks
atomically (`recover_worker`). The scripts and key names come from `taskqueue.keys`.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

from taskqueue import keys
from taskqueue.observation import QueueObservation, WorkerObservation

_scripts: dict[tuple[int, str], Any] = {}


def script(client: aioredis.Redis, name: str) -> Any:
    """The registered (EVALSHA, reloaded on NOSCRIPT) script `name` for `client`."""
    cache_key = (id(client), name)
    found = _scripts.get(cache_key)
    if found is None:
        found = client.register_script(keys.lua(name))
        _scripts[cache_key] = found
    return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def observe(client: aioredis.Redis, schema: keys.KeySchema) -> QueueObservation:
    """Queue lengths, in-flight per worker, delayed, dead-letter and counters: one EVALSHA."""
    at = time.time()
    raw = await script(client, "observe")(
        keys=[schema.workers, schema.delayed, schema.dead_letter, schema.stats,
              *schema.queue_keys],
        args=[schema.processing_prefix, *(q.type for q in schema.queues)],
    )
    lengths, oldest, counters, flat_workers = raw
    backlog = {q.key: int(n) for q, n in zip(schema.queues, lengths, strict=True)}
    oldest_at = {
        q.key: float(_text(t)) for q, t in zip(schema.queues, oldest, strict=True) if _text(t)
    }
    workers = tuple(
        WorkerObservation(
            worker_id=_text(flat_workers[i]),
            deadline_ms=int(float(_text(flat_workers[i + 1]))),
            in_flight=int(flat_workers[i + 2]),
        )
        for i in range(0, len(flat_workers), 3)
    )
    return QueueObservation(
        at=at,
        backlog=backlog,
        delayed=int(counters[0]),
        dead_letter=int(counters[1]),
        completed_total=int(counters[2]),
        failed_total=int(counters[3]),
        workers=workers,
        oldest_enqueued_at=oldest_at,
    )


def recover_call(
    schema: keys.KeySchema, *, worker_id: str, max_attempts: int, reason: str
) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of recover.lua for `worker_id` (shared by the async and sync callers)."""
    return (
        [schema.processing(worker_id), schema.workers, schema.dead_letter, schema.stats],
        [worker_id, max_attempts, f"{time.time():.3f}", reason],
    )


async def recover_worker(
    client: aioredis.Redis, schema: keys.KeySchema, *, worker_id: str, max_attempts: int,
    reason: str,
) -> tuple[int, int]:
    """Requeue every task `worker_id` holds; returns (requeued, dead-lettered). Atomic."""
    keys_, args = recover_call(
        schema, worker_id=worker_id, max_attempts=max_attempts, reason=reason
    )
    requeued, dead = await script(client, "recover")(keys=keys_, args=args)
    return int(requeued), int(dead)
