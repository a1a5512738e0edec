"""Only a worker that pops with BRPOP/BZPOPMIN has its lifecycle thread read the cancels zset
every `lifecycle.WATCH_SECONDS` (`running.CancelsSeen.pending` gates its executors' ZSCORE); a
worker that fetches with fetch.lua (which reads the zset itself) reads it once, when the thread
subscribes. In-process, on a real redis-server: the lifecycle thread alone, counted by INFO
commandstats."""

from __future__ import annotations

import time

import pytest
import redis

from taskqueue.wire import keys
from taskqueue.worker import handlers
from taskqueue.worker import lifecycle as lifecycle_thread
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.runner import Worker
from taskqueue.worker.running import CancelsSeen

Q = "watch"
SCHEMA = keys.KeySchema(prefix=Q, queues=(keys.QueueRef(Q),), dead_letter=f"{Q}:dead")


def zrangebyscore_calls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_zrangebyscore", {}).get("calls", 0))


@pytest.mark.parametrize("delivery, watch", [("AtLeastOnce", False), ("AtMostOnce", True)])
def test_the_worker_plan_says_whether_the_lifecycle_thread_watches_the_cancels(
        redis_url: str, delivery: str, watch: bool) -> None:
    config = WorkerConfig(redis_url=redis_url, schema=SCHEMA, worker_id=f"w-{delivery}",
                          handler="tests.helpers.handlers:record", delivery=delivery)  # type: ignore[arg-type]
    worker = Worker(config, handler=handlers.load(handler=config.handler, command=None,
                                                  timeout=None))
    assert worker.plan.dispatched is not watch
    assert worker.lifecycle.watch is watch


@pytest.mark.parametrize("watch", [False, True], ids=["fetch.lua", "blocking-pop"])
def test_only_a_watching_lifecycle_thread_reads_the_cancels_zset_every_second(
        redis_url: str, redis_sync: redis.Redis, watch: bool) -> None:
    seen = CancelsSeen()
    life = lifecycle_thread.Lifecycle(url=redis_url, schema=SCHEMA, worker_id="w",
                                      heartbeat_seconds=5.0, seen=seen, watch=watch)
    redis_sync.config_resetstat()
    life.loop.start()
    try:
        time.sleep(2.6 * lifecycle_thread.WATCH_SECONDS)
    finally:
        life.loop.halt()
    calls = zrangebyscore_calls(redis_sync)
    if watch:
        assert calls >= 3  # on subscribing, then every WATCH_SECONDS
        assert seen.pending is False  # the zset is empty
    else:
        assert calls == 1  # on subscribing only
