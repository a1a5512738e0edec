"""Redis operations on a TaskQueue shared by the operator, the worker and the CLI.

Reads a whole observation in one round trip (`observe`) and requeues a departed worker's tasks
atomically (`recover_worker`). The scripts and key names come from `taskqueue.keys`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from taskqueue import keys
from taskqueue.observation import QueueObservation, WorkerObservation


class Script:
    """A Lua script from `taskqueue/lua/` run by EVALSHA on the client passed to each call,
    loaded again on NOSCRIPT (a restarted or different server).

    One instance per script name, shared by every client: nothing here refers to a client, so
    clients are never kept alive by the cache nor confused with a later client at the same id.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = keys.lua(name)
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    async def __call__(self, client: aioredis.Redis, *, keys: Sequence[Any] = (),
                       args: Sequence[Any] = ()) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)


@cache
def script(name: str) -> Script:
    """The shared `Script` for `taskqueue/lua/<name>.lua`: `await script(name)(client, keys=...,
    args=...)`."""
    return Script(name)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def observe(client: aioredis.Redis, schema: keys.KeySchema, *,
                  due_within: float = 0.0) -> QueueObservation:
    """Queue lengths, in-flight per worker, delayed, dead-letter, counters, per-queue taken
    counters and the quiesced workers: one EVALSHA (reply layout: `keys.OBSERVE_REPLY`).
    Delayed tasks due within `due_within` seconds from now are counted as `due_soon`."""
    at = time.time()
    keys_, args = schema.observe_call(int((at + due_within) * 1000))
    raw = await script("observe")(client, keys=keys_, args=args)
    lengths, oldest, counters, flat_workers, raw_taken, quiesced, scheduled = raw
    backlog = {q.key: int(n) for q, n in zip(schema.queues, lengths, strict=True)}
    # "" (no envelope time) and 0 (raw payloads recover.lua wrapped) mean unknown
    oldest_at: dict[str, float] = {}
    for q, t in zip(schema.queues, oldest, strict=True):
        enqueued_at = float(_text(t) or 0)
        if enqueued_at > 0:
            oldest_at[q.key] = enqueued_at
    workers = tuple(
        WorkerObservation(
            worker_id=_text(flat_workers[i]),
            deadline_ms=int(float(_text(flat_workers[i + 1]))),
            in_flight=int(flat_workers[i + 2]),
        )
        for i in range(0, len(flat_workers), 3)
    )
    taken = {q.key: int(_text(n)) for q, n in zip(schema.queues, raw_taken, strict=False)
             if _text(n).isdigit()}
    return QueueObservation(
        at=at,
        taken=taken if len(taken) == len(schema.queues) else {},
        quiesced=frozenset(schema.worker_of(_text(k)) for k in quiesced),
        backlog=backlog,
        delayed=int(counters[0]),
        dead_letter=int(counters[1]),
        completed_total=int(counters[2]),
        failed_total=int(counters[3]),
        workers=workers,
        oldest_enqueued_at=oldest_at,
        due_soon=int(scheduled[0]),
        next_due_at=float(_text(scheduled[1])) / 1000 if _text(scheduled[1]) else None,
        duplicates_total=int(scheduled[2]),
    )


async def quiesce(client: aioredis.Redis, schema: keys.KeySchema, *, add: Sequence[str],
                  remove: Sequence[str]) -> dict[str, int]:
    """Quiesce workers `add`, release `remove`, then read the processing-list length of each
    of `add`, in one MULTI/EXEC: a length read here is final, a quiesced worker takes nothing."""
    async with client.pipeline(transaction=True) as pipe:
        if add:
            pipe.sadd(schema.quiesced, *(schema.processing(w) for w in add))
        if remove:
            pipe.srem(schema.quiesced, *(schema.processing(w) for w in remove))
        for w in add:
            pipe.llen(schema.processing(w))
        replies = await pipe.execute()
    lengths = replies[len(replies) - len(add):] if add else []
    return {w: int(n) for w, n in zip(add, lengths, strict=True)}


def recover_call(
    schema: keys.KeySchema, *, worker_id: str, max_attempts: int, reason: str
) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of recover.lua for `worker_id` (shared by the async and sync callers)."""
    return (
        [schema.processing(worker_id), schema.workers, schema.dead_letter, schema.stats],
        [worker_id, max_attempts, reason],
    )


async def recover_worker(
    client: aioredis.Redis, schema: keys.KeySchema, *, worker_id: str, max_attempts: int,
    reason: str,
) -> tuple[int, int]:
    """Requeue every task `worker_id` holds; returns (requeued, dead-lettered). Atomic."""
    keys_, args = recover_call(
        schema, worker_id=worker_id, max_attempts=max_attempts, reason=reason
    )
    requeued, dead = await script("recover")(client, keys=keys_, args=args)
    return int(requeued), int(dead)
