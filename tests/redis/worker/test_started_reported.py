"""Workers report when their running tasks started, and the operator reads it (real
redis-server, in-process workers): heartbeat.lua keeps the start times on Redis's clock in the
worker's `<prefix>:started:<worker id>` string, with the heartbeat deadline as its TTL, and
deletes it when the worker is idle; observe.lua reads it for each registered worker. The
operator counts the slots held by long tasks from it (`waitpolicy.held_after`)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue.redisio import queueops
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import keys
from taskqueue.worker.store import Store
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, make_config, wait_done

SCHEMA = keys.KeySchema(prefix="q", dead_letter="q:dead", queues=(keys.QueueRef(key="q"),))


def observe(redis_url: str) -> QueueObservation:
    async def read() -> QueueObservation:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        try:
            return await queueops.observe(client, SCHEMA)
        finally:
            await client.aclose()

    return asyncio.run(read())


def test_a_beat_keeps_the_start_times_until_its_deadline_and_an_idle_beat_drops_them(
        redis_url: str, redis_sync: redis.Redis) -> None:
    store = Store(url=redis_url, schema=SCHEMA, worker_id="w")
    try:
        now_ms, _ = store.heartbeat(window=15, running_ms=(600_000, 20))
        assert redis_sync.get(SCHEMA.started("w")) == f"{now_ms - 600_000},{now_ms - 20}"
        assert 0 < redis_sync.pttl(SCHEMA.started("w")) <= 15_000
        store.heartbeat(window=15)
        assert not redis_sync.exists(SCHEMA.started("w"))
    finally:
        store.close()


def test_observe_reads_each_workers_start_times(redis_url: str,
                                                redis_sync: redis.Redis) -> None:
    stores = {w: Store(url=redis_url, schema=SCHEMA, worker_id=w) for w in ("busy", "idle")}
    try:
        now_ms, _ = stores["busy"].heartbeat(window=15, running_ms=(90_000, 1_000))
        stores["idle"].heartbeat(window=15)
        redis_sync.lpush(SCHEMA.processing("busy"), "a", "b")
        seen = {w.worker_id: w for w in observe(redis_url).workers}
        assert seen["busy"].started_ms == (now_ms - 90_000, now_ms - 1_000)
        assert seen["busy"].held(now=now_ms / 1000, longer_than=60.0) == 1
        assert seen["idle"].started_ms == ()
    finally:
        for s in stores.values():
            s.close()


@pytest.mark.parametrize(("plant", "wrong"), [
    pytest.param(lambda r: r.set(SCHEMA.started("w"), "not,times"), False, id="not-times"),
    pytest.param(lambda r: r.hset(SCHEMA.started("w"), "f", "v"), True, id="a-hash"),
])
def test_a_started_key_written_by_hand_reads_as_none(redis_url: str, redis_sync: redis.Redis,
                                                     plant: object, wrong: bool) -> None:
    redis_sync.zadd(SCHEMA.workers, {"w": int(time.time() * 1000) + 15_000})
    plant(redis_sync)  # type: ignore[operator]
    obs = observe(redis_url)
    assert [w.started_ms for w in obs.workers] == [()]
    assert [t.key for t in obs.wrong_types] == ([SCHEMA.started("w")] if wrong else [])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("handler", [
    pytest.param("tests.helpers.handlers:sleep_then_record", id="threads"),
    pytest.param("tests.helpers.handlers:async_sleep_then_record", id="coroutines"),
])
def test_a_worker_reports_its_running_tasks_start_times(
        make_worker: MakeWorker, redis_url: str, redis_sync: redis.Redis, handler: str) -> None:
    make_worker(handler=handler, worker_id="w", queues=[{"key": "q"}],
                worker={"heartbeatSeconds": 0.2, "concurrency": 3})
    wait_for("the worker registered", lambda: redis_sync.zscore("q:workers", "w") is not None)
    pushed_ms = int(time.time() * 1000)
    # raw payloads: two of them run at once with equal contexts (no id, same queue, attempt 1)
    redis_sync.lpush("q", "long:3", "other:3")
    wait_for("both start times reported",
             lambda: len((redis_sync.get(SCHEMA.started("w")) or "").split(",")) == 2,
             timeout=10)
    starts = [int(t) for t in redis_sync.get(SCHEMA.started("w")).split(",")]
    now_ms = int(time.time() * 1000)
    assert all(pushed_ms - 1_000 <= t <= now_ms for t in starts), (pushed_ms, starts, now_ms)
    assert [w.started_ms for w in observe(redis_url).workers] == [tuple(sorted(starts))]
    wait_done(redis_sync, 2, timeout=15)
    wait_for("the idle beat drops them", lambda: not redis_sync.exists(SCHEMA.started("w")),
             timeout=5)
    assert make_config(redis_url, queues=[{"key": "q"}]).schema.started("w") == SCHEMA.started("w")
