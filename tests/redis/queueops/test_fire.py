"""fire.lua on a real redis-server: each slot of a schedule fired exactly once whatever the
callers do (a retried call, two operators racing, a restart that forgot what it read, a Redis
restart with AOF), missed slots counted once, overlap Skip while the previous task is around."""

from __future__ import annotations

import asyncio
from typing import Any

import redis
import redis.asyncio as aioredis

from taskqueue.api import manifest, schedulespec
from taskqueue.controller import schedules
from taskqueue.redisio import queueops
from taskqueue.wire import keys
from tests.fixtures.redis_server import RedisServer

T0 = 1_800_000_000.0  # a whole minute


def _spec(**schedule: Any) -> Any:
    body = {"name": "tick", "cron": "* * * * * *", "queue": "q", **schedule}
    spec = {"redis": {"url": "redis://localhost"}, "queues": [{"key": "q"}],
            "schedules": [body]}
    return manifest.parse({"kind": "TaskQueue", "spec": spec}).spec


async def _fire(client: aioredis.Redis, spec: Any, seen: dict[str, int | None], now: float,
                horizon: float = 2.0) -> list[schedules.Fired]:
    schema = keys.KeySchema.from_spec(spec)
    plans = schedules.plan(spec, schema, seen=seen, now=now, horizon=horizon)
    keys_, args = schedules.call(schema, plans)
    reply = await queueops.script("fire")(client, keys=queueops.wire(keys_),
                                          args=queueops.wire(args))
    return schedules.parse(reply, plans)


def _fired_ids(r: redis.Redis) -> list[str]:
    """Task ids in the queue (oldest first), then in the delayed zset in due order."""
    queued = [keys.unwrap(e).id for e in reversed(r.lrange("q", 0, -1))]
    return queued + [keys.unwrap(keys.Entry.decode(e).element).id
                     for e in r.zrange("q:delayed", 0, -1)]


async def _promote(client: aioredis.Redis, stop: asyncio.Event) -> None:
    """A promoter moving every delayed entry into the queue (a worker's, early): a slot fired
    again after its task left the delayed zset would be a second task, not the same member."""
    while not stop.is_set():
        for entry, _ in await client.zpopmin("q:delayed", 1000):
            await client.lpush("q", keys.Entry.decode(entry).element)
        await asyncio.sleep(0.01)


def _ids(spec: Any, after: float, until: float) -> list[str]:
    s = spec.schedules[0]
    return [schedulespec.task_id(s, t) for t in schedulespec.slots(s, after=after, until=until)]


async def _run(client: aioredis.Redis, spec: Any, *, start: float, polls: int,
               every: float = 1.0) -> dict[str, int | None]:
    seen: dict[str, int | None] = {}
    for i in range(polls):
        seen = schedules.seen_after(await _fire(client, spec, seen, start + i * every))
    return seen


async def test_a_new_schedule_fires_each_slot_ahead_once(redis_client: aioredis.Redis,
                                                         redis_sync: redis.Redis) -> None:
    spec = _spec()
    await _run(redis_client, spec, start=T0, polls=10)
    # the first call only learns `through` (T0); each later one fires up to now + 2 s
    assert _fired_ids(redis_sync) == _ids(spec, T0, T0 + 9 + 2)
    due = [int(s) for _, s in redis_sync.zrange("q:delayed", 0, -1, withscores=True)]
    assert due == [int((T0 + i) * 1000) for i in range(1, 12)]


async def test_a_retried_call_and_a_second_operator_fire_nothing_twice(
        redis_client: aioredis.Redis, redis_sync: redis.Redis) -> None:
    spec = _spec()
    seen = await _run(redis_client, spec, start=T0, polls=3)
    before = _fired_ids(redis_sync)
    again = await _fire(redis_client, spec, {"tick": None}, T0 + 2)  # a restarted operator
    assert again[0].stale and again[0].letters == ""
    retried = await _fire(redis_client, spec, seen, T0 + 3)
    lost = await _fire(redis_client, spec, seen, T0 + 3)  # the reply of the first was lost
    assert retried[0].letters == "F" and lost[0].stale
    assert _fired_ids(redis_sync) == before + _ids(spec, T0 + 4, T0 + 5)


async def test_racing_operators_fire_every_slot_exactly_once(
        redis_url: str, redis_sync: redis.Redis) -> None:
    spec = _spec()
    clients = [aioredis.Redis.from_url(redis_url, decode_responses=True) for _ in range(5)]
    stop = asyncio.Event()
    promoter = asyncio.create_task(_promote(clients[4], stop))
    try:
        await asyncio.gather(*(_run(c, spec, start=T0 + i * 0.25, polls=40, every=0.5)
                               for i, c in enumerate(clients[:4])))
    finally:
        stop.set()
        await promoter
        for c in clients:
            await c.aclose()
    ids = _fired_ids(redis_sync)
    assert len(ids) == len(set(ids))
    # every slot from the first to the last fired, once; the last poll reached T0 + 20.25 + 2
    assert len(ids) >= 20 and ids == _ids(spec, T0, T0 + len(ids))


async def test_downtime_fires_the_catch_up_window_and_counts_older_slots_missed(
        redis_client: aioredis.Redis, redis_sync: redis.Redis) -> None:
    spec = _spec(catchUpSeconds=300)
    seen = await _run(redis_client, spec, start=T0, polls=2)
    # slots up to T0 + 3 were fired ahead; ten minutes down, back at T0 + 601: the slots from
    # T0 + 301 (catchUpSeconds) are fired, up to the horizon; T0 + 4 .. T0 + 300 are missed
    fired = await _fire(redis_client, spec, seen, T0 + 1 + 600)
    assert fired[0].missed == fired[0].missed_now == 297
    assert _fired_ids(redis_sync) == _ids(spec, T0, T0 + 3) + _ids(spec, T0 + 300, T0 + 603)
    ids = _fired_ids(redis_sync)
    assert len(ids) == len(set(ids)) == 3 + 303
    again = await _fire(redis_client, spec, schedules.seen_after(fired), T0 + 602)
    assert again[0].missed == 297 and again[0].missed_now == 0


async def test_suspend_fires_nothing_and_misses_nothing(redis_client: aioredis.Redis,
                                                        redis_sync: redis.Redis) -> None:
    seen = await _run(redis_client, _spec(suspend=True), start=T0, polls=5)
    assert redis_sync.zcard("q:delayed") == 0
    fired = await _fire(redis_client, _spec(), seen, T0 + 5)  # resumed: T0 + 5 .. T0 + 7
    assert fired[0].missed == 0 and fired[0].letters == "FFF"


async def test_overlap_skip_waits_for_the_previous_task(redis_client: aioredis.Redis,
                                                        redis_sync: redis.Redis) -> None:
    spec = _spec(overlap="Skip", cron="*/2 * * * * *")
    seen = await _run(redis_client, spec, start=T0, polls=3)  # slot T0+2 fired, no fire-ahead
    assert [f for f in _fired_ids(redis_sync)] == _ids(spec, T0, T0 + 2)
    fired = await _fire(redis_client, spec, seen, T0 + 4)  # the T0+2 task is still delayed
    assert fired[0].letters == "S" and fired[0].skipped == 1
    # a worker took it, retried it once: held in a processing list with attempts 1
    redis_sync.zadd("q:workers", {"w1": 10**13})
    entry = keys.Entry.decode(redis_sync.zrange("q:delayed", 0, -1)[0])
    task = keys.unwrap(entry.element)
    redis_sync.delete("q:delayed")
    held = keys.Entry(entry.queue, entry.score, keys.rewrap(task, attempts=1)).encode()
    redis_sync.lpush("q:processing:w1", held)
    fired = await _fire(redis_client, spec, schedules.seen_after(fired), T0 + 6)
    assert fired[0].letters == "S"
    redis_sync.delete("q:processing:w1")  # done
    fired = await _fire(redis_client, spec, schedules.seen_after(fired), T0 + 8)
    assert fired[0].letters == "F" and fired[0].skipped == 2
    assert fired[0].last_task_id == schedulespec.task_id(spec.schedules[0], T0 + 8)


async def test_a_redis_restart_with_aof_keeps_every_slot_once(redis_factory: Any) -> None:
    server: RedisServer = redis_factory(appendonly=True)
    spec = _spec()
    client = aioredis.Redis.from_url(server.url, decode_responses=True)
    try:
        seen = await _run(client, spec, start=T0, polls=4)
        server.restart()
        for i in range(4, 8):
            for attempt in range(50):
                try:
                    seen = schedules.seen_after(await _fire(client, spec, seen, T0 + i))
                    break
                except (redis.ConnectionError, redis.BusyLoadingError):
                    await asyncio.sleep(0.1 * attempt)
        sync = redis.Redis.from_url(server.url, decode_responses=True)
        assert _fired_ids(sync) == _ids(spec, T0, T0 + 7 + 2)
        sync.close()
    finally:
        await client.aclose()
