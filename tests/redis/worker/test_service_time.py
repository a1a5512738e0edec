"""Workers report each queue's service time and wait histogram with their heartbeat (real
redis-server, in-process workers): the stats hash holds the milliseconds, the squared
milliseconds and the attempts per queue, and how many tasks waited longer than each edge of
`keys.WAIT_EDGES_SECONDS`; observe.lua reads them, and a failed heartbeat keeps the totals for
the next one."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue.redisio import queueops
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import keys
from taskqueue.worker import servicetime
from taskqueue.worker.heartbeat import Heartbeat
from taskqueue.worker.store import REDIS_ERRORS
from tests.fixtures.redis_server import free_port
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, make_config, wait_done

SLEEPY = "tests.helpers.handlers:sleep_then_record"


@pytest.mark.timeout(60)
def test_the_heartbeat_reports_seconds_and_attempts_per_queue(
        make_worker: MakeWorker, redis_url: str, redis_sync: redis.Redis) -> None:
    make_worker(handler=SLEEPY, worker_id="svc", queues=[{"key": "slow"}, {"key": "fast"}],
                worker={"heartbeatSeconds": 0.2, "concurrency": 2})
    started = time.monotonic()
    redis_sync.lpush("slow", *[f"s{i}:0.3" for i in range(4)])
    redis_sync.lpush("fast", *[f"f{i}:0.05" for i in range(6)])
    wait_done(redis_sync, 10)
    ms_slow, served_slow = keys.service_fields("slow")
    ms_fast, served_fast = keys.service_fields("fast")
    wait_for("the totals reported", lambda: redis_sync.hget("slow:stats", served_slow) == "4"
             and redis_sync.hget("slow:stats", served_fast) == "6", timeout=10)
    elapsed_ms = (time.monotonic() - started) * 1000
    sq_slow, counted_slow = keys.service_sq_fields("slow")
    assert redis_sync.hget("slow:stats", counted_slow) == "4"
    slow, fast, squares = (int(redis_sync.hget("slow:stats", field) or 0)
                           for field in (ms_slow, ms_fast, sq_slow))
    # each queue at least its handlers' sleeps (4 x 300 ms, 6 x 50 ms), and together no more
    # than the 2 slots were busy while the test waited: the time of a queue's own tasks only
    assert slow >= 1200 and fast >= 300
    assert slow + fast <= 2 * elapsed_ms
    # 4 x (300 ms)^2 at least; a sum of 4 squares lies between (sum)^2 / 4 and (sum)^2
    assert squares >= 360_000 and slow ** 2 / 4 <= squares <= slow ** 2

    async def observe() -> QueueObservation:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        try:
            schema = make_config(redis_url, queues=[{"key": "slow"}, {"key": "fast"}]).schema
            return await queueops.observe(client, schema)
        finally:
            await client.aclose()

    seen = asyncio.run(observe())
    assert seen.service["slow"] == (pytest.approx(slow / 1000), 4)
    assert seen.service["fast"] == (pytest.approx(fast / 1000), 6)
    assert seen.service_sq["slow"] == (pytest.approx(squares / 1e6), 4)

def test_a_failed_heartbeat_keeps_the_totals_for_the_next(redis_url: str,
                                                          redis_sync: redis.Redis) -> None:
    down = make_config(f"redis://127.0.0.1:{free_port()}/0", worker_id="lost")
    totals = servicetime.of("lost")
    totals.add("q", 1.25)
    beat = Heartbeat(config=dataclasses.replace(down, heartbeat_seconds=0.1))
    try:
        with pytest.raises(REDIS_ERRORS):  # what the heartbeat thread catches and retries
            beat.beat()
    finally:
        beat.store.close()
    # Redis is back (the test's server): the next beat adds what the failed one could not
    up = Heartbeat(config=make_config(redis_url, worker_id="lost"))
    try:
        up.beat()
    finally:
        up.store.close()
    ms_field, served_field = keys.service_fields("q")
    assert redis_sync.hget("q:stats", ms_field) == "1250"
    assert redis_sync.hget("q:stats", served_field) == "1"
    assert totals.take() == []


@pytest.mark.timeout(60)
def test_the_heartbeat_reports_how_long_tasks_waited_per_queue(
        make_worker: MakeWorker, redis_url: str, redis_sync: redis.Redis) -> None:
    make_worker(handler=SLEEPY, worker_id="waits", queues=[{"key": "q"}],
                worker={"heartbeatSeconds": 0.2, "concurrency": 2})
    wait_for("the worker up", lambda: redis_sync.zscore("q:workers", "waits") is not None)
    # envelopes stamped 12 s, 4 s and 0 s ago (as if they had been queued that long), and raw
    # payloads, whose wait is unknown: they are not counted
    now = time.time()
    redis_sync.lpush("q", *[keys.wrap(f"old{i}:0", enqueued_at=now - 12) for i in range(3)],
                     *[keys.wrap(f"mid{i}:0", enqueued_at=now - 4) for i in range(2)],
                     *[keys.wrap(f"new{i}:0", enqueued_at=now) for i in range(5)],
                     "raw1:0", "raw2:0")
    wait_done(redis_sync, 12)
    fields = keys.wait_fields("q")
    wait_for("the waits reported", lambda: redis_sync.hget("q:stats", fields[0]) == "10",
             timeout=10)
    over = {edge: int(redis_sync.hget("q:stats", f) or 0)
            for edge, f in zip(keys.WAIT_EDGES_SECONDS, fields[1:], strict=True)}
    assert over[3.0] == 5 and over[5.0] == 3  # the 4 s and the 12 s ones, then the 12 s ones
    assert over[10.0] == 3 and over[15.0] == 0
    assert over[0.5] == 5  # the fresh ones waited less than half a second

    async def observe() -> QueueObservation:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        try:
            schema = make_config(redis_url, queues=[{"key": "q"}]).schema
            return await queueops.observe(client, schema)
        finally:
            await client.aclose()

    waited = asyncio.run(observe()).waited["q"]
    assert waited[0] == 10
    assert dict(zip(keys.WAIT_EDGES_SECONDS, waited[1:], strict=True)) == over


@pytest.mark.parametrize("waits, counts", [
    pytest.param([0.1, 0.2], {0.5: 0}, id="quick-ones-count-in-the-total-only"),
    pytest.param([0.5, 0.51], {0.5: 1, 1.0: 0}, id="an-edge-is-not-over-itself"),
    pytest.param([700.0], {0.5: 1, 300.0: 1}, id="past-the-last-edge"),
])
def test_a_wait_counts_over_every_edge_below_it(waits: list[float],
                                                counts: dict[float, int]) -> None:
    totals = servicetime.Totals()
    for w in waits:
        totals.waited("q", w)
    pairs = totals.take()
    got = dict(zip(pairs[::2], pairs[1::2], strict=True))
    fields = dict(zip(keys.WAIT_EDGES_SECONDS, keys.wait_fields("q")[1:], strict=True))
    assert got[keys.wait_fields("q")[0]] == len(waits)
    for edge, n in counts.items():
        assert got.get(fields[edge], 0) == n
    assert totals.take() == []


def test_a_failed_heartbeat_gives_back_the_waits_too() -> None:
    totals = servicetime.Totals()
    totals.add("q", 0.25)
    totals.waited("q", 6.0)
    first = totals.take()
    totals.give_back(first)
    assert sorted(map(str, totals.take())) == sorted(map(str, first))
