"""Retries with backoff through the delayed zset, dead letters, and recovery of dead workers."""

from __future__ import annotations

import json
import time

import pytest
import redis

from taskqueue import client
from taskqueue.wire import keys
from taskqueue.worker import backoff
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, make_config, wait_done


@pytest.mark.parametrize(
    ("attempts", "base", "cap", "low", "high"),
    [
        pytest.param(1, 1.0, 300, 0.5, 1.0, id="first-retry"),
        pytest.param(3, 1.0, 300, 2.0, 4.0, id="doubles"),
        pytest.param(20, 1.0, 30, 15.0, 30.0, id="capped"),
        pytest.param(2, 0.0, 30, 0.0, 0.0, id="no-backoff"),
    ],
)
def test_backoff_is_exponential_with_jitter(attempts: int, base: float, cap: float,
                                            low: float, high: float) -> None:
    delays = [backoff.delay(attempts=attempts, base=base, cap=cap) for _ in range(200)]
    assert low <= min(delays) and max(delays) <= high


@pytest.mark.parametrize("enveloped", [True, False], ids=["enveloped", "raw"])
def test_failed_task_is_retried_after_backoff(redis_sync: redis.Redis, make_worker: MakeWorker,
                                              enveloped: bool) -> None:
    if enveloped:
        client.enqueue_sync(redis_sync, "q", "3")
    else:
        redis_sync.lpush("q", "3")  # fail_first: attempts 1 and 2 fail, 3 succeeds
    started = time.monotonic()
    make_worker(handler="tests.helpers.handlers:fail_first", sweep=0.05,
                retry={"maxAttempts": 3, "backoffSeconds": 0.2})
    wait_done(redis_sync, 1)
    elapsed = time.monotonic() - started
    assert 0.2 <= elapsed < 3  # 0.1..0.2 s then 0.2..0.4 s of backoff
    ctx = json.loads(redis_sync.lindex("test:contexts", 0))
    assert ctx["attempt"] == 3 and ctx["id"]
    # the ack (and its `completed` count) rides on the slot's next fetch, just after the handler
    wait_for("1 completed", lambda: redis_sync.hget("q:stats", "completed") == "1", timeout=10)
    stats = redis_sync.hgetall("q:stats")
    assert (stats["failed"], stats["retried"], stats["completed"]) == ("2", "2", "1")
    assert redis_sync.zcard("q:delayed") == 0


@pytest.mark.parametrize("delivery", ["AtLeastOnce", "AtMostOnce"])
def test_exhausted_attempts_go_to_dead_letter(redis_sync: redis.Redis, make_worker: MakeWorker,
                                              delivery: str) -> None:
    tid = client.enqueue_sync(redis_sync, "q", "doomed")
    make_worker(handler="tests.helpers.handlers:explode", sweep=0.05, delivery=delivery,
                retry={"maxAttempts": 2, "backoffSeconds": 0.01, "deadLetterKey": "dlq"})
    record = json.loads(wait_for("a dead letter in dlq",
                                 lambda: redis_sync.lindex("dlq", 0), timeout=10))
    assert (record["payload"], record["attempts"], record["id"], record["queue"]) == (
        "doomed", 2, tid, "q")
    assert "RuntimeError: boom doomed" in record["error"] and record["failed_at"] > 0
    assert redis_sync.llen("q") == 0 and redis_sync.zcard("q:delayed") == 0
    assert redis_sync.hget("q:stats", "dead") == "1"


def test_retry_keeps_zset_score(redis_sync: redis.Redis, make_worker: MakeWorker) -> None:
    client.enqueue_sync(redis_sync, "z", "2", priority=7)
    make_worker(handler="tests.helpers.handlers:fail_first", sweep=0.05,
                queues=[{"key": "z", "type": "zset"}], retry={"backoffSeconds": 0.01})
    wait_done(redis_sync, 1)
    assert json.loads(redis_sync.lindex("test:contexts", 0))["attempt"] == 2


def test_task_timeout_fails_the_attempt(redis_sync: redis.Redis, make_worker: MakeWorker) -> None:
    redis_sync.lpush("q", "x:1")
    make_worker(handler="tests.helpers.handlers:sleep_then_record",
                worker={"taskTimeoutSeconds": 0.2}, retry={"maxAttempts": 1})
    record = json.loads(wait_for("a dead letter",
                                 lambda: redis_sync.lindex("q:dead", 0), timeout=10))
    assert "timed out" in record["error"]
    # the timed-out handler's thread runs on (Python cannot stop a thread): let it finish here,
    # not in a later test, whose test:done it would otherwise write into
    assert wait_done(redis_sync, 1, timeout=10) == ["x:1"]


def test_live_worker_recovers_a_dead_workers_tasks(redis_url: str, redis_sync: redis.Redis,
                                                   make_worker: MakeWorker) -> None:
    """A worker whose heartbeat expired: its in-flight tasks go back to the queue once, the
    poison pill (attempts reached) to the dead-letter list."""
    schema = make_config(redis_url).schema
    redis_sync.zadd(schema.workers, {"ghost": 1})
    redis_sync.lpush(schema.processing("ghost"),
                     keys.Entry("q", "", "a").encode(),
                     keys.Entry("q", "", keys.wrap("poison", attempts=2, task_id="p")).encode())
    make_worker(worker={"heartbeatSeconds": 0.1}, retry={"maxAttempts": 3})
    assert wait_done(redis_sync, 1) == ["a"]
    record = json.loads(wait_for("a dead letter",
                                 lambda: redis_sync.lindex("q:dead", 0), timeout=10))
    assert (record["payload"], record["attempts"]) == ("poison", 3)
    assert "ghost" not in redis_sync.zrange(schema.workers, 0, -1)


def test_restart_with_same_id_requeues_what_it_held(redis_url: str, redis_sync: redis.Redis,
                                                    make_worker: MakeWorker) -> None:
    redis_sync.lpush("q:processing:w1", keys.Entry("q", "", "left-over").encode())
    make_worker(worker_id="w1")
    assert wait_done(redis_sync, 1) == ["left-over"]
