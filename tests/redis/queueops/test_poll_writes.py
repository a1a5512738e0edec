"""The Redis side of one operator poll on a real redis-server: the flow sync reads in the
observe round trip and writes only a change (one round trip per poll while the spec's flow
control is unchanged, `taskqueue pause` seen all the same), and a flow write or a schedule
fire that Redis refuses comes back as the refusal the status condition and Event carry."""

from __future__ import annotations

import time
from typing import Any, cast

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue.api import manifest
from taskqueue.api.models import TaskQueue
from taskqueue.controller import status as statuses
from taskqueue.controller.kube import ObjectRef
from taskqueue.controller.observe import observe
from taskqueue.controller.poller import FLOW_WRITTEN, SCHEDULES_FIRED, Poller
from taskqueue.redisio import flowops
from taskqueue.wire import flow, keys


class Counting(aioredis.Connection):
    """A connection that counts what it sends: one packed send per round trip (a pipeline is
    one send)."""

    sends = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        type(self).sends += 1
        await super().send_packed_command(command, check_health)


def taskqueue(url: str, *, rate: int = 50, schedules: bool = False) -> TaskQueue:
    spec: dict[str, Any] = {"redis": {"url": url},
                            "queues": [{"key": "q", "rateLimit": {"tasks": rate}}, {"key": "r"}]}
    if schedules:
        spec["schedules"] = [{"name": "tick", "cron": "* * * * * *", "queue": "q"}]
    return manifest.parse({"kind": "TaskQueue", "metadata": {"name": "t", "namespace": "n"},
                           "spec": spec})


@pytest.fixture
async def counted(redis_url: str) -> Any:
    pool = aioredis.ConnectionPool.from_url(redis_url, decode_responses=True,
                                            connection_class=Counting)
    client = aioredis.Redis(connection_pool=pool)
    yield client
    await client.aclose()


async def poll_redis(poller: Poller, client: aioredis.Redis, url: str,
                     tq: TaskQueue) -> tuple[int, tuple[flow.QueueFlow, ...], dict[str, Any]]:
    """observe + flow sync as `Poller.poll` makes them: (round trips, flows, refusals)."""
    schema = keys.KeySchema.from_spec(tq.spec)
    before = Counting.sends
    observed = await observe(client, url, tq, schema)
    assert observed.error is None
    flows, refusals = await poller.sync_flow(client, schema, tq, observed)
    return Counting.sends - before, flows, refusals


async def test_an_unchanged_flow_control_costs_no_round_trip_of_its_own(
        counted: aioredis.Redis, redis_url: str, redis_sync: redis.Redis) -> None:
    poller = Poller(kube=cast(Any, None))
    tq = taskqueue(redis_url)
    schema = keys.KeySchema.from_spec(tq.spec)
    await counted.ping()  # connected, and the scripts loaded by a first poll
    await poll_redis(poller, counted, redis_url, taskqueue(redis_url, rate=1))

    trips, flows, refusals = await poll_redis(poller, counted, redis_url, tq)
    assert trips == 2  # the spec changed (rate 1 -> 50): the observe trip, then the write
    assert flows[0].rate == (50, 1.0, 50) and refusals == {FLOW_WRITTEN: None}
    assert redis_sync.hget(schema.flow, flow.RATE + "q") == "50 1 50"

    trips, flows, _ = await poll_redis(poller, counted, redis_url, tq)
    assert trips == 1
    assert flowops.pause(redis_sync, schema, "r", at=time.time(), who="oncall")
    trips, flows, _ = await poll_redis(poller, counted, redis_url, tq)
    assert trips == 1 and flows[1].paused_cli is not None  # the CLI's pause read, not undone
    assert redis_sync.hexists(schema.flow, flow.PAUSED_CLI + "r")


async def test_a_refused_flow_write_is_reported_with_its_fix(
        redis_client: aioredis.Redis, redis_url: str, redis_sync: redis.Redis) -> None:
    poller = Poller(kube=cast(Any, None))
    tq = taskqueue(redis_url)
    schema = keys.KeySchema.from_spec(tq.spec)
    redis_sync.set(schema.flow, "not a hash")
    observed = await observe(redis_client, redis_url, tq, schema)
    assert observed.observation is not None  # the rest of the poll goes on
    flows, refusals = await poller.sync_flow(redis_client, schema, tq, observed)
    assert flows == flow.declared(tq.spec.queues)
    refused = refusals[FLOW_WRITTEN]
    assert refused is not None and schema.flow in refused and "WRONGTYPE" in refused
    status = statuses.with_writes({}, refusals, now=0)
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        FLOW_WRITTEN, "False", "FlowControlNotWritten")
    assert "delete the key named" in cond["message"]

    redis_sync.delete(schema.flow)
    observed = await observe(redis_client, redis_url, tq, schema)
    assert (await poller.sync_flow(redis_client, schema, tq, observed))[1] == {FLOW_WRITTEN: None}


async def test_a_refused_schedule_fire_is_reported_and_fires_nothing(
        redis_client: aioredis.Redis, redis_url: str, redis_sync: redis.Redis) -> None:
    poller = Poller(kube=cast(Any, None))
    tq = taskqueue(redis_url, schedules=True)
    schema = keys.KeySchema.from_spec(tq.spec)
    record = poller.record("n", "t")
    redis_sync.set(schema.schedules, "not a hash")
    refusals = await poller.fire(ObjectRef("n", "t", "uid"), record, redis_client, schema, tq)
    refused = refusals[SCHEDULES_FIRED]
    assert refused is not None and "WRONGTYPE" in refused and schema.schedules in refused
    assert redis_sync.zcard(schema.delayed) == 0 and not record.fired
    cond = statuses.with_writes({}, refusals, now=0)["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "SchedulesNotFired")

    redis_sync.delete(schema.schedules)
    assert await poller.fire(ObjectRef("n", "t", "uid"), record, redis_client, schema, tq) == {
        SCHEDULES_FIRED: None}
    assert redis_sync.zcard(schema.delayed) > 0 and "tick" in record.fired
