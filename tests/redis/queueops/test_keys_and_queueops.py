"""The key schema, the envelope and the shared Redis operations (observe, recover_worker)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import redis.asyncio as aioredis

from taskqueue.redisio import queueops
from taskqueue.wire import keys, scripts
from tests.unit.queueops.test_keys_and_queueops import _spec


async def test_observe_reads_every_count_in_one_call(redis_client: aioredis.Redis) -> None:
    schema = _spec(queues=[{"key": "vip"}, {"key": "normal"}, {"key": "z", "type": "zset"}])
    await redis_client.lpush("vip", keys.wrap("a", enqueued_at=1000.0), "raw")
    await redis_client.lpush("normal", *[str(i) for i in range(5)])
    await redis_client.zadd("z", {"x": 1, "y": 2})
    await redis_client.zadd(schema.workers, {"w1": 9e12, "w2": 1})
    await redis_client.lpush(schema.processing("w1"), "vip\n\n1", "vip\n\n2")
    await redis_client.zadd(schema.delayed, {"normal\n\n9": 5})
    await redis_client.lpush(schema.dead_letter, "{}")
    await redis_client.hset(schema.stats, mapping={"completed": 7})

    obs = await queueops.observe(redis_client, schema)

    assert obs.backlog == {"vip": 2, "normal": 5, "z": 2}
    assert (obs.delayed, obs.dead_letter, obs.completed_total) == (1, 1, 7)
    assert {w.worker_id: w.in_flight for w in obs.workers} == {"w1": 2, "w2": 0}
    assert (obs.in_flight, obs.busy_workers, obs.live_workers) == (2, 1, 1)
    assert obs.oldest_enqueued_at == {"vip": 1000.0}


async def test_recover_requeues_in_order_and_dead_letters_poison(
    redis_client: aioredis.Redis,
) -> None:
    schema = _spec(queues=[{"key": "q"}, {"key": "z", "type": "zset"}])
    proc = schema.processing("dead")
    poison = keys.wrap("poison", attempts=2, task_id="p")
    # processing lists are LPUSHed: the rightmost entry was taken first
    await redis_client.lpush(
        proc,
        keys.Entry("q", "", "first").encode(),
        keys.Entry("q", "", poison).encode(),
        keys.Entry("z", "7", "zz").encode(),
        keys.Entry("q", "", "last").encode(),
    )
    await redis_client.zadd(schema.workers, {"dead": 1})
    await redis_client.lpush("q", "newer")

    requeued, dead = await queueops.recover_worker(
        redis_client, schema, worker_id="dead", max_attempts=3, reason="test"
    )

    assert (requeued, dead) == (3, 1)
    assert not await redis_client.exists(proc)
    assert await redis_client.zcard(schema.workers) == 0
    queue = [keys.unwrap(e) for e in await redis_client.lrange("q", 0, -1)]
    assert [t.payload for t in queue] == ["newer", "first", "last"]
    assert [t.attempts for t in queue] == [0, 1, 1]
    members = await redis_client.zrange("z", 0, -1, withscores=True)
    assert [(keys.unwrap(m).payload, s) for m, s in members] == [("zz", 7.0)]
    record = json.loads(await redis_client.rpop(schema.dead_letter))
    assert (record["payload"], record["attempts"], record["id"]) == ("poison", 3, "p")
    assert "worker lost" in record["error"]


async def test_two_recoveries_of_one_worker_never_duplicate(redis_client: aioredis.Redis) -> None:
    schema = _spec(queues=[{"key": "q"}])
    await redis_client.lpush(
        schema.processing("w"), *[keys.Entry("q", "", str(i)).encode() for i in range(100)]
    )
    results = await asyncio.gather(
        *[queueops.recover_worker(redis_client, schema, worker_id="w", max_attempts=5,
                                  reason="race") for _ in range(4)]
    )
    assert sum(r[0] for r in results) == 100
    payloads = sorted(int(keys.unwrap(e).payload) for e in await redis_client.lrange("q", 0, -1))
    assert payloads == list(range(100))


async def test_observe_treats_a_zero_enqueue_time_as_unknown(redis_client: aioredis.Redis) -> None:
    """recover.lua wraps a raw payload with "enqueued_at":0; that is no task from 1970."""
    schema = _spec(queues=[{"key": "q"}, {"key": "r"}])
    await redis_client.lpush(schema.processing("gone"), keys.Entry("q", "", "raw").encode())
    await queueops.recover_worker(redis_client, schema, worker_id="gone", max_attempts=5,
                                  reason="test")
    assert '"enqueued_at":0,' in await redis_client.lindex("q", -1)
    await redis_client.lpush("r", keys.wrap("b", enqueued_at=2000.0))

    obs = await queueops.observe(redis_client, schema)

    assert obs.backlog == {"q": 1, "r": 1}
    assert obs.oldest_enqueued_at == {"r": 2000.0}


async def test_scripts_are_not_bound_to_a_client(redis_url: str) -> None:
    """One cached script per name serves every client; none is kept alive by the cache, and a
    server that lost its scripts gets them loaded again."""
    import gc
    import weakref

    schema = _spec(queues=[{"key": "q"}])
    first = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await first.lpush("q", "a")
    assert (await queueops.observe(first, schema)).backlog == {"q": 1}
    gone = weakref.ref(first)
    await first.aclose()
    del first
    gc.collect()
    assert gone() is None, "the script cache keeps a closed client alive"

    second = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        await second.script_flush()
        await second.lpush("q", "b")
        assert (await queueops.observe(second, schema)).backlog == {"q": 2}
        assert queueops.script("observe") is queueops.script("observe")
        assert queueops.script("observe").sha == await second.script_load(scripts.lua("observe"))
    finally:
        await second.aclose()


async def test_observe_counts_a_worker_that_joined_since_the_last_poll(
        redis_client: aioredis.Redis) -> None:
    """Processing lists are declared in KEYS from the last poll's worker set; a new worker costs
    one more call, never a wrong count."""
    schema = _spec(queues=[{"key": "q"}])
    await redis_client.zadd(schema.workers, {"old": 9e12})
    await redis_client.lpush(schema.processing("old"), "q\n\na")
    assert [(w.worker_id, w.in_flight) for w in
            (await queueops.observe(redis_client, schema)).workers] == [("old", 1)]
    await redis_client.zadd(schema.workers, {"new": 9e12})
    await redis_client.lpush(schema.processing("new"), "q\n\nb", "q\n\nc")
    await redis_client.zrem(schema.workers, "old")
    obs = await queueops.observe(redis_client, schema)
    assert [(w.worker_id, w.in_flight) for w in obs.workers] == [("new", 2)]


@pytest.mark.parametrize("script", ["recover", "release", "fetch"])
async def test_an_entry_of_a_queue_the_taskqueue_dropped_is_dead_lettered(
        redis_client: aioredis.Redis, script: str) -> None:
    """Scripts write only declared queues: an entry naming another queue (removed from the spec
    since) goes to the dead-letter list, visible to `taskqueue dlq`, instead of a stray key."""
    schema = _spec(queues=[{"key": "q"}])
    entry = keys.Entry("gone", "", keys.wrap("p", task_id="t9")).encode()
    kept = keys.Entry("q", "", "stays").encode()
    proc = schema.processing("w")
    if script == "recover":
        await redis_client.lpush(proc, entry, kept)
        await queueops.recover_worker(redis_client, schema, worker_id="w", max_attempts=5,
                                      reason="test")
    elif script == "release":
        await redis_client.lpush(proc, entry, kept)
        keys_, args = scripts.release_call(schema, "w", [entry, kept])
        await queueops.script("release")(redis_client, keys=keys_, args=args)
    else:
        await redis_client.zadd(schema.delayed, {entry: 1, kept: 2})
        await queueops.script("fetch")(
            redis_client, keys=scripts.fetch_keys(schema, "w"),
            args=scripts.fetch_args(schema, now_ms=int(time.time() * 1000), count=0,
                                     hold=True))
    assert not await redis_client.exists("gone")
    assert [keys.unwrap(e).payload for e in await redis_client.lrange("q", 0, -1)] == ["stays"]
    record = json.loads(await redis_client.lindex(schema.dead_letter, 0))
    assert (record["queue"], record["payload"], record["id"]) == ("gone", "p", "t9")
    assert "not in this TaskQueue" in record["error"]
    assert abs(record["failed_at"] - time.time()) < 60


@pytest.mark.parametrize(
    "head",
    [
        pytest.param('{"enqueued_at":1.2.3}', id="raw-payload-with-a-malformed-time"),
        pytest.param('{"enqueued_at":1700000000}', id="raw-payload-with-a-time"),
        pytest.param(keys.ENVELOPE_MARK + '0,"enqueued_at":1.2.3,"id":"","payload":""}',
                     id="malformed-envelope"),
    ],
)
async def test_observe_reads_a_time_only_from_a_well_formed_envelope(
        redis_client: aioredis.Redis, head: str) -> None:
    """A producer's raw payload that looks like it has a time neither breaks the operator's poll
    nor dates the queue."""
    schema = _spec(queues=[{"key": "q"}])
    await redis_client.lpush("q", head)
    obs = await queueops.observe(redis_client, schema)
    assert obs.backlog == {"q": 1} and obs.oldest_enqueued_at == {}
