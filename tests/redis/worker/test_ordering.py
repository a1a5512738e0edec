"""Priority order, FIFO within a queue, and fleet-wide starvation limits (the seed scenarios)."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from taskqueue.worker.store import Store
from tests.helpers.worker import MakeWorker, make_config, wait_done


def _backlog(r: redis.Redis, vip: list[int], normal: list[int]) -> None:
    # producers LPUSH one at a time: the oldest ends up at the right end
    for v in vip:
        r.lpush("vip", str(v))
    for n in normal:
        r.lpush("normal", str(n))


@pytest.mark.parametrize("delivery", ["AtLeastOnce", "AtMostOnce"])
def test_strict_priority_then_fifo(redis_sync: redis.Redis, make_worker: MakeWorker,
                                   delivery: str) -> None:
    _backlog(redis_sync, [101, 102, 103], list(range(201, 207)))
    make_worker(queues=[{"key": "vip"}, {"key": "normal"}], delivery=delivery)
    assert wait_done(redis_sync, 9) == [str(x) for x in [101, 102, 103, *range(201, 207)]]


@pytest.mark.parametrize("delivery", ["AtLeastOnce", "AtMostOnce"])
def test_starvation_limit_interleaves_one_worker(redis_sync: redis.Redis,
                                                 make_worker: MakeWorker, delivery: str) -> None:
    _backlog(redis_sync, list(range(101, 110)), list(range(201, 206)))
    make_worker(queues=[{"key": "vip", "starvationLimit": 3}, {"key": "normal"}],
                delivery=delivery)
    got = wait_done(redis_sync, 14)
    assert got == ["101", "102", "103", "201", "104", "105", "106", "202", "107", "108", "109",
                   "203", "204", "205"]


def test_starvation_counter_is_fleet_wide_three_fetchers(redis_url: str,
                                                         redis_sync: redis.Redis) -> None:
    """Three workers taking turns: the global sequence keeps VIP,VIP,VIP,normal."""
    _backlog(redis_sync, list(range(101, 113)), list(range(201, 206)))
    config = make_config(redis_url, queues=[{"key": "vip", "starvationLimit": 3},
                                            {"key": "normal"}])
    stores = [Store(url=redis_url, schema=config.schema, worker_id=f"w{i}") for i in range(3)]
    taken = [stores[i % 3].fetch(acks=(), count=1)[0].rsplit("\n", 1)[1] for i in range(17)]
    assert taken == ["101", "102", "103", "201", "104", "105", "106", "202", "107", "108",
                     "109", "203", "110", "111", "112", "204", "205"]


def _fetch_order(r: redis.Redis, queues: set[str], stop: threading.Event,
                 out: list[str]) -> None:
    """The queue of every task fetch.lua pops, in Redis's execution order (MONITOR shows the
    commands scripts run)."""
    with r.monitor() as m:
        while not stop.is_set():
            command = m.next_command()["command"]
            if command.startswith("RPOP "):
                _, key, *count = command.split()
                if key in queues:
                    out += [key] * int(count[0] if count else 1)


def test_starvation_with_three_live_workers(redis_url: str, redis_sync: redis.Redis,
                                            make_worker: MakeWorker) -> None:
    """Fleet-wide: 3 workers together take VIP,VIP,VIP,normal,... in fetch order (a per-worker
    counter would let the fleet take 9 VIP tasks in a row). The order tasks are *recorded* in
    can differ (a worker may be descheduled between fetch and record), so the check reads the
    fetch order from MONITOR."""
    _backlog(redis_sync, list(range(1000, 1060)), list(range(2000, 2020)))
    stop, popped = threading.Event(), list[str]()
    monitor = threading.Thread(target=_fetch_order, daemon=True,
                               args=(redis.Redis.from_url(redis_url, decode_responses=True),
                                     {"vip", "normal"}, stop, popped))
    monitor.start()
    time.sleep(0.2)
    for i in range(3):
        make_worker(worker_id=f"w{i}", handler="tests.helpers.handlers:record",
                    queues=[{"key": "vip", "starvationLimit": 3}, {"key": "normal"}])
    wait_done(redis_sync, 80, timeout=20)
    stop.set()
    redis_sync.ping()  # one more command so the monitor thread sees the stop
    monitor.join(5)
    assert popped[:80] == ["vip", "vip", "vip", "normal"] * 20


def test_zset_queue_lowest_score_first_fifo_among_equal(redis_sync: redis.Redis,
                                                        make_worker: MakeWorker) -> None:
    from taskqueue import client
    for i in range(5):
        client.enqueue_sync(redis_sync, "z", f"low-{i}", priority=5)
    client.enqueue_sync(redis_sync, "z", "urgent", priority=1)
    for i in range(3):
        client.enqueue_sync(redis_sync, "z", f"late-{i}", priority=9)
    make_worker(queues=[{"key": "z", "type": "zset"}])
    assert wait_done(redis_sync, 9) == ["urgent", *[f"low-{i}" for i in range(5)],
                                        *[f"late-{i}" for i in range(3)]]
