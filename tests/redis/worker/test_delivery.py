"""Delivery facts: each task to exactly one worker, bursts spread over idle workers, payload
forms (raw, enveloped, not UTF-8) and handler kinds (sync, async, with context, command)."""

from __future__ import annotations

import json
import sys
import time

import pytest
import redis

from taskqueue import client
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, wait_done


@pytest.mark.parametrize("delivery", ["AtLeastOnce", "AtMostOnce"])
@pytest.mark.parametrize("prefetch", [1, 10])
def test_each_task_goes_to_exactly_one_worker(redis_sync: redis.Redis, make_worker: MakeWorker,
                                              delivery: str, prefetch: int) -> None:
    for i in range(4):
        make_worker(worker_id=f"w{i}", delivery=delivery,
                    worker={"concurrency": 2, "prefetch": prefetch})
    redis_sync.lpush("q", *[str(i) for i in range(2000)])
    got = wait_done(redis_sync, 2000, timeout=30)
    time.sleep(0.2)
    got = redis_sync.lrange("test:done", 0, -1)
    assert sorted(map(int, got)) == list(range(2000))
    if delivery == "AtLeastOnce":
        wait_for("2000 completed",
                 lambda: int(redis_sync.hget("q:stats", "completed") or 0) == 2000, timeout=10)
        wait_for("empty processing lists",
                 lambda: not redis_sync.keys("q:processing:*"), timeout=10)


def idle_listeners(r: redis.Redis, delivery: str) -> int:
    """Workers ready for a push: blocked in BRPOP, or holding a tracking (wake-up) connection."""
    clients = r.client_list()
    if delivery == "AtMostOnce":
        return sum(1 for c in clients if c.get("cmd") in ("brpop", "bzpopmin"))
    return sum(1 for c in clients if "t" in c.get("flags", ""))


@pytest.mark.parametrize("delivery", ["AtLeastOnce", "AtMostOnce"])
def test_batch_lpush_is_spread_over_idle_workers(redis_sync: redis.Redis,
                                                 make_worker: MakeWorker, delivery: str) -> None:
    """The seed's `LPUSH task:queue 6 7 8` with idle workers: three workers get one each."""
    workers = [make_worker(worker_id=f"w{i}", handler="tests.helpers.handlers:sleep_then_record",
                           delivery=delivery, worker={"prefetch": 10}) for i in range(4)]
    wait_for("4 idle listeners", lambda: idle_listeners(redis_sync, delivery) >= 4, timeout=5)
    redis_sync.lpush("q", "6:0.5", "7:0.5", "8:0.5")
    if delivery == "AtLeastOnce":
        held = wait_for("a worker holding the task", lambda: [w.config.worker_id for w in workers
                                 if redis_sync.llen(f"q:processing:{w.config.worker_id}")]
                        if sum(redis_sync.llen(f"q:processing:w{i}") for i in range(4)) == 3
                        else None, timeout=2)
        assert len(held) == 3
    started = time.monotonic()
    got = wait_done(redis_sync, 3, timeout=5)
    assert sorted(got) == ["6:0.5", "7:0.5", "8:0.5"]
    assert time.monotonic() - started < 0.9  # in parallel, not one after another


@pytest.mark.parametrize(
    ("push", "expected"),
    [
        pytest.param(lambda r: r.lpush("q", "raw text"), "raw text", id="raw"),
        pytest.param(lambda r: r.lpush("q", '{"json": [1, 2]}'), '{"json": [1, 2]}',
                     id="raw-json"),
        pytest.param(lambda r: client.enqueue_sync(r, "q", "wrapped ü"), "wrapped ü",
                     id="enveloped"),
        pytest.param(lambda r: r.lpush("q", "line1\nline2"), "line1\nline2", id="newlines"),
    ],
)
def test_handler_gets_the_original_payload(redis_sync: redis.Redis, make_worker: MakeWorker,
                                           push: object, expected: str) -> None:
    make_worker()
    push(redis_sync)  # type: ignore[operator]
    assert wait_done(redis_sync, 1) == [expected]


def test_payload_that_is_not_utf8_is_run_and_acked(redis_url: str, redis_sync: redis.Redis,
                                                   make_worker: MakeWorker) -> None:
    raw = redis.Redis.from_url(redis_url)
    raw.lpush("q", b"\xff\xfe binary")
    make_worker()
    wait_for("the task done", lambda: raw.llen("test:done"), timeout=10)
    assert raw.lrange("test:done", 0, -1) == [b"\xff\xfe binary"]
    wait_for("1 completed", lambda: raw.hget("q:stats", "completed") == b"1", timeout=10)
    assert raw.llen("q:processing:w1") == 0


@pytest.mark.parametrize("handler", ["tests.helpers.handlers:record_with_context",
                                     "tests.helpers.handlers:record_async"])
def test_context_and_async_handlers(redis_sync: redis.Redis, make_worker: MakeWorker,
                                    handler: str) -> None:
    tid = client.enqueue_sync(redis_sync, "q", "hello")
    make_worker(handler=handler, worker={"concurrency": 3})
    wait_done(redis_sync, 1)
    ctx = json.loads(redis_sync.lindex("test:contexts", 0))
    assert ctx == {"payload": "hello", "id": tid, "queue": "q", "attempt": 1}


def test_async_handlers_run_concurrently(redis_sync: redis.Redis,
                                         make_worker: MakeWorker) -> None:
    redis_sync.lpush("q", *[str(i) for i in range(20)])
    started = time.monotonic()
    make_worker(handler="tests.helpers.handlers:record_async", worker={"concurrency": 20})
    wait_done(redis_sync, 20)
    assert time.monotonic() - started < 2


def test_command_handler_gets_payload_on_stdin(redis_url: str, redis_sync: redis.Redis,
                                               make_worker: MakeWorker) -> None:
    script = ("import os,sys,redis; r=redis.Redis.from_url(os.environ['TASKQUEUE_TEST_REDIS_URL']);"
              "p=sys.stdin.read(); r.rpush('test:done', p + '|' + os.environ['TASKQUEUE_QUEUE']);"
              "sys.exit(3 if p == 'bad' else 0)")
    redis_sync.lpush("q", "good", "bad")
    make_worker(handler=None, worker={"command": [sys.executable, "-c", script]},
                retry={"maxAttempts": 1})
    wait_done(redis_sync, 2)
    assert sorted(redis_sync.lrange("test:done", 0, -1)) == ["bad|q", "good|q"]
    record = json.loads(wait_for("a dead letter",
                                 lambda: redis_sync.lindex("q:dead", 0), timeout=10))
    assert record["payload"] == "bad" and "exited with 3" in record["error"]
