"""Fuzz: the operator's read of a TaskQueue (`observe.observe`, one observe.lua call) and what it
does with the result (`policy.decide`, `status.build_status`) hold up on any raw data in its keys.

Whatever a World holds (tests/redis/fuzz/rawdata.py), a poll reads Redis without writing to it, gets
an observation (Redis is reachable, so "unreachable" would be a lie), names every key of the
wrong type in it (that key counts as empty: no worker takes from it), and the decision and the
status follow without an exception; the status carries one condition naming the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis
from hypothesis import given

from taskqueue.api import manifest, models
from taskqueue.controller import status
from taskqueue.controller.observe import observe
from taskqueue.redisio import queueops
from taskqueue.scaling import policy
from taskqueue.wire import keys
from tests.fixtures.redis_server import RedisServer
from tests.redis.fuzz import rawdata
from tests.redis.fuzz.budget import examples

READ_BY_OBSERVE = {"h": "list", rawdata.SCHEMA.workers: "zset", rawdata.SCHEMA.delayed: "zset",
                   rawdata.SCHEMA.dead_letter: "list", rawdata.SCHEMA.stats: "hash",
                   rawdata.SCHEMA.quiesced: "set",
                   rawdata.SCHEMA.processing(rawdata.DEAD_WORKER): "list"}
"""The keys of a World that may hold another type and that a poll reads (the processing list
of a registered worker only)."""


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def _taskqueue(url: str) -> models.TaskQueue:
    return manifest.parse({"kind": "TaskQueue", "metadata": {"name": "fuzz", "namespace": "f"},
                           "spec": {"redis": {"url": url},
                                    "queues": [{"key": "q"}, {"key": "z", "type": "zset"},
                                               {"key": "h"}]}})


def _expected_wrong(world: rawdata.World) -> set[str]:
    wrong = dict(world.wrong)
    if world.h_type not in ("none", "list"):
        wrong["h"] = world.h_type
    if not rawdata.registers_dead_worker(world):
        wrong.pop(rawdata.SCHEMA.processing(rawdata.DEAD_WORKER), None)
    return {k for k in wrong if k in READ_BY_OBSERVE}


async def _polls(url: str, tq: models.TaskQueue, n: int) -> list[status.Status]:
    client = aioredis.Redis.from_url(url)
    try:
        state, statuses = policy.PolicyState(replicas=1), []
        for _ in range(n):
            observation, error = await observe(client, url, tq)
            assert error is None, error
            assert observation is not None
            decision = policy.decide(spec=tq.spec.scaling, observation=observation, state=state,
                                     now=time.time(), concurrency=1,
                                     queue_order=("q", "z", "h"))
            state = decision.state
            statuses.append(status.build_status(
                statuses[-1] if statuses else None, observation, decision, deployment="fuzz",
                ready_replicas=1, error=error, generation=1, now=time.time()))
        return statuses
    finally:
        await client.aclose()


@examples(120)
@given(world=rawdata.worlds())
def test_a_poll_reads_any_data_names_wrong_keys_and_writes_nothing(
        raw: redis.Redis, redis_server: RedisServer, world: rawdata.World) -> None:
    raw.flushall()
    rawdata.write(raw, world, now_ms=int(time.time() * 1000))
    before = rawdata.dump(raw)
    tq = _taskqueue(redis_server.url)

    last = asyncio.run(_polls(redis_server.url, tq, 2))[-1]

    assert rawdata.dump(raw) == before
    conditions = {c["type"]: c for c in last["conditions"]}
    assert conditions["RedisReachable"]["status"] == "True"
    wrong = _expected_wrong(world)
    keys_ok = conditions["KeyTypes"]
    assert (keys_ok["status"] == "False") == bool(wrong), keys_ok
    named = [k for k in wrong if f"key {k!r} holds a " in keys_ok["message"]]
    assert len(named) == min(1, len(wrong)), keys_ok["message"]
    assert "\n" not in keys_ok["message"]
    asyncio.run(_release_quiesced(redis_server.url, tq))


async def _release_quiesced(url: str, tq: models.TaskQueue) -> None:
    """What a poll that scales up does with the quiesced workers it read: release them all (a
    quiesced set of another type is a Redis error, which defers a scale-in; a member that is
    no processing-list key quiesces nobody and is left alone)."""
    client = aioredis.Redis.from_url(url)
    schema = keys.KeySchema.from_spec(tq.spec)
    try:
        observation = await queueops.observe(client, schema)
        with contextlib.suppress(aioredis.ResponseError):
            await queueops.quiesce(client, schema, add=(),
                                   remove=sorted(observation.quiesced))
            left = await client.smembers(schema.quiesced)
            prefix = schema.processing_prefix.encode()
            assert [m for m in left if m.startswith(prefix)] == []  # others mean nothing
    finally:
        await client.aclose()
