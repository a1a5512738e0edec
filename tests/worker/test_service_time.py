"""Workers report each queue's service time with their heartbeat (real redis-server, in-process
workers): the stats hash holds the milliseconds, the squared milliseconds and the attempts per
queue, observe.lua reads them, and a failed heartbeat keeps the totals for the next one."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue import keys, queueops
from taskqueue.observation import QueueObservation
from taskqueue.worker import servicetime
from taskqueue.worker.heartbeat import Heartbeat
from taskqueue.worker.store import REDIS_ERRORS
from tests.fixtures.redis_server import free_port
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, make_config, wait_done

SLEEPY = "tests.worker.handlers:sleep_then_record"


@pytest.mark.timeout(60)
def test_the_heartbeat_reports_seconds_and_attempts_per_queue(
        make_worker: MakeWorker, redis_url: str, redis_sync: redis.Redis) -> None:
    make_worker(handler=SLEEPY, worker_id="svc", queues=[{"key": "slow"}, {"key": "fast"}],
                worker={"heartbeatSeconds": 0.2, "concurrency": 2})
    redis_sync.lpush("slow", *[f"s{i}:0.3" for i in range(4)])
    redis_sync.lpush("fast", *[f"f{i}:0.05" for i in range(6)])
    wait_done(redis_sync, 10)
    ms_slow, served_slow = keys.service_fields("slow")
    ms_fast, served_fast = keys.service_fields("fast")
    wait_for("the totals reported", lambda: redis_sync.hget("slow:stats", served_slow) == "4"
             and redis_sync.hget("slow:stats", served_fast) == "6", timeout=10)
    assert 1200 <= int(redis_sync.hget("slow:stats", ms_slow) or 0) < 1200 + 4 * 150
    assert 300 <= int(redis_sync.hget("slow:stats", ms_fast) or 0) < 300 + 6 * 150
    sq_slow, counted_slow = keys.service_sq_fields("slow")
    assert redis_sync.hget("slow:stats", counted_slow) == "4"
    # 4 x (300 ms)^2 at least; the handler's own overhead adds a little to each
    assert 360_000 <= int(redis_sync.hget("slow:stats", sq_slow) or 0) < 4 * 450 ** 2

    async def observe() -> QueueObservation:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        try:
            schema = make_config(redis_url, queues=[{"key": "slow"}, {"key": "fast"}]).schema
            return await queueops.observe(client, schema)
        finally:
            await client.aclose()

    seen = asyncio.run(observe())
    service = seen.service
    assert service["slow"][1] == 4 and service["fast"][1] == 6
    assert service["slow"][0] / 4 == pytest.approx(0.3, abs=0.1)
    assert service["fast"][0] / 6 == pytest.approx(0.05, abs=0.1)
    squares, counted = seen.service_sq["slow"]
    assert counted == 4 and squares / 4 == pytest.approx(0.09, abs=0.06)


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
