"""Quiesce on real Redis: fetch.lua gives a quiesced worker nothing, observe reports the set and the
per-queue taken counters, and `queueops.quiesce` reads lengths after quiescing (one MULTI)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue import keys, manifest, queueops
from taskqueue.worker.store import Store


def _schema(*queues: str) -> keys.KeySchema:
    spec = {"redis": {"url": "redis://localhost"}, "queues": [{"key": q} for q in queues]}
    return keys.KeySchema.from_spec(manifest.parse({"kind": "TaskQueue", "spec": spec}).spec)


def test_a_quiesced_worker_acks_but_takes_nothing(redis_url: str,
                                                  redis_sync: redis.Redis) -> None:
    schema = _schema("q")
    quiet = Store(url=redis_url, schema=schema, worker_id="quiet")
    busy = Store(url=redis_url, schema=schema, worker_id="busy")
    try:
        redis_sync.lpush("q", *[str(i) for i in range(10)])
        held = quiet.fetch(acks=(), count=1)
        assert len(held) == 1
        redis_sync.sadd(schema.quiesced, schema.processing("quiet"))
        # the task in hand is acked; nothing new is taken, even with a full queue
        assert quiet.fetch(acks=held, count=5) == []
        assert redis_sync.llen(schema.processing("quiet")) == 0
        assert redis_sync.hget(schema.stats, "completed") == "1"
        assert len(busy.fetch(acks=(), count=5)) == 5
        redis_sync.srem(schema.quiesced, schema.processing("quiet"))
        assert len(quiet.fetch(acks=(), count=5)) == 4
    finally:
        quiet.close()
        busy.close()


def test_fetch_counts_the_tasks_taken_per_queue(redis_url: str, redis_sync: redis.Redis) -> None:
    schema = _schema("high", "low")
    store = Store(url=redis_url, schema=schema, worker_id="w")
    try:
        redis_sync.lpush("high", "h1", "h2")
        redis_sync.lpush("low", "l1", "l2", "l3")
        assert len(store.fetch(acks=(), count=4)) == 4
        assert redis_sync.hget(schema.stats, "taken:high") == "2"
        assert redis_sync.hget(schema.stats, "taken:low") == "2"
    finally:
        store.close()


async def test_observe_reports_taken_counters_and_the_quiesced_workers(
    redis_client: aioredis.Redis,
) -> None:
    schema = _schema("high", "low")
    await redis_client.hset(schema.stats, mapping={"taken:high": 5, "taken:low": 2})
    await redis_client.sadd(schema.quiesced, schema.processing("pod-a"))
    obs = await queueops.observe(redis_client, schema)
    assert obs.taken == {"high": 5, "low": 2}
    assert obs.quiesced == frozenset({"pod-a"})


async def test_observe_without_counters_knows_no_taken(redis_client: aioredis.Redis) -> None:
    schema = _schema("high", "low")
    await redis_client.hset(schema.stats, mapping={"taken:high": 5})
    obs = await queueops.observe(redis_client, schema)
    assert obs.taken == {}
    assert obs.quiesced == frozenset()


async def test_quiesce_reads_lengths_after_quiescing_and_releases(
    redis_client: aioredis.Redis,
) -> None:
    schema = _schema("q")
    await redis_client.lpush(schema.processing("busy"), "q\n\nx")
    await redis_client.sadd(schema.quiesced, schema.processing("old"))
    held = await queueops.quiesce(redis_client, schema, add=["busy", "idle"], remove=["old"])
    assert held == {"busy": 1, "idle": 0}
    members = await redis_client.smembers(schema.quiesced)
    assert members == {schema.processing("busy"), schema.processing("idle")}
    assert await queueops.quiesce(redis_client, schema, add=[], remove=["busy", "idle"]) == {}
    assert await redis_client.scard(schema.quiesced) == 0


async def test_observe_reads_quiesce_taken_and_due_soon_in_one_evalsha(
    redis_client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One observe.lua call serves both the scale-in (taken, quiesced) and the scheduled-task
    demand (due soon, next due, duplicates): one command sent to Redis per observation."""
    schema = _schema("high", "low")
    now_ms = int(time.time() * 1000)
    await redis_client.hset(schema.stats, mapping={"taken:high": 3, "taken:low": 1,
                                                   "duplicates": 2, "completed": 7})
    await redis_client.sadd(schema.quiesced, schema.processing("pod-a"))
    await redis_client.zadd(schema.delayed, {"high\n\nsoon": now_ms + 5_000,
                                             "high\n\nlater": now_ms + 600_000})
    await redis_client.lpush("low", "x")
    await queueops.observe(redis_client, schema)  # loads the script (NOSCRIPT once)
    sent: list[str] = []
    execute = redis_client.execute_command

    async def counted(*args: Any, **options: Any) -> Any:
        sent.append(str(args[0]))
        return await execute(*args, **options)

    monkeypatch.setattr(redis_client, "execute_command", counted)
    obs = await queueops.observe(redis_client, schema, due_within=60)
    assert sent == ["EVALSHA"]
    assert obs.taken == {"high": 3, "low": 1}
    assert obs.quiesced == frozenset({"pod-a"})
    assert obs.backlog == {"high": 0, "low": 1}
    assert (obs.delayed, obs.due_soon, obs.duplicates_total, obs.completed_total) == (2, 1, 2, 7)
    assert obs.next_due_at == pytest.approx((now_ms + 5_000) / 1000)


def test_the_observe_call_layout() -> None:
    schema = _schema("high", "low")
    keys_, args = queueops.observe_call(schema, (), horizon_ms=1234)
    assert keys_ == [schema.workers, schema.delayed, schema.dead_letter, schema.stats,
                     schema.quiesced, "high", "low"]
    fields = ["taken:high", "taken:low", "service_ms:high", "service_ms:low", "served:high",
              "served:low", "service_sq_ms2:high", "service_sq_ms2:low", "served_sq:high",
              "served_sq:low", *keys.wait_fields("high"), *keys.wait_fields("low")]
    assert args == [2, len(fields), "list", "list", *fields, 1234]
    assert len(keys.OBSERVE_REPLY) == 8
