"""A cancel the worker heard before its task started (kept by `running.Running` as an early
cancel, e.g. published while the fetch that took the task was on its way back) keeps the handler
from being called, for sync and coroutine handlers alike: the task is finished as cancelled
(cancelled.lua: out of the processing list, counted, never retried). In-process, on a real
redis-server: the executor of a slot, its Store, the process's registry."""

from __future__ import annotations

import asyncio
import threading

import pytest
import redis

from taskqueue.wire import keys
from taskqueue.worker import handlers
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.execute import Executor
from taskqueue.worker.running import RUNNING
from taskqueue.worker.store import Store

Q = "early"
SCHEMA = keys.KeySchema(prefix=Q, queues=(keys.QueueRef(Q),), dead_letter=f"{Q}:dead")
ran: list[str] = []


def record(payload: str) -> None:
    ran.append(payload)


async def record_async(payload: str) -> None:
    ran.append(payload)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_cancel_heard_before_the_task_starts_keeps_the_handler_from_running(
        redis_url: str, redis_sync: redis.Redis, kind: str) -> None:
    ran.clear()
    name = f"{__name__}:{'record' if kind == 'sync' else 'record_async'}"
    config = WorkerConfig(redis_url=redis_url, schema=SCHEMA, worker_id=f"w-{kind}",
                          handler=name)
    handler = handlers.load(handler=name, command=None, timeout=None)
    store = Store(url=redis_url, schema=SCHEMA, worker_id=config.worker_id)
    executor = Executor(config=config, handler=handler, store=store,
                        stopping=threading.Event())
    redis_sync.lpush(Q, keys.wrap("doomed", task_id=f"t-{kind}"),
                     keys.wrap("fine", task_id=f"u-{kind}"))
    doomed, fine = store.fetch(acks=(), count=2)
    assert RUNNING.cancel(f"t-{kind}") is False  # not running here yet: kept as early
    if kind == "sync":
        results = [executor.run(doomed, held=True), executor.run(fine, held=True)]
    else:
        assert isinstance(handler, handlers.AsyncHandler)

        async def both() -> list[bool]:
            return [await executor.run_async(e, held=True, handler=handler)
                    for e in (doomed, fine)]

        results = asyncio.run(both())
    assert results == [False, True]
    assert ran == ["fine"]
    assert redis_sync.hget(SCHEMA.stats, "cancelled") == "1"
    assert redis_sync.llen(SCHEMA.processing(config.worker_id)) == 1  # "fine": acked later
    assert redis_sync.zcard(SCHEMA.delayed) == 0 and redis_sync.llen(SCHEMA.dead_letter) == 0
    store.close()
