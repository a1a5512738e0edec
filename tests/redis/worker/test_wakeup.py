"""Idle wake-up by tracking pushes: armed while a slot is idle, disarmed while all are busy, and
never a missed task (the sweep is set to 30 s here, so only a push can wake a worker in time)."""

from __future__ import annotations

import time

import pytest
import redis

from taskqueue import client
from taskqueue.worker import wakeup
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, wait_done

QUEUES = [{"key": "vip"}, {"key": "normal"}, {"key": "z", "type": "zset"}]
NO_SWEEP = 30.0


def _push(r: redis.Redis, key: str, payload: str) -> None:
    client.enqueue_sync(r, key, payload, priority=0 if key == "z" else None)


@pytest.mark.parametrize("delivery", ["AtLeastOnce", "AtMostOnce"])
def test_idle_workers_wake_for_every_queue(redis_sync: redis.Redis, make_worker: MakeWorker,
                                           delivery: str) -> None:
    workers = [make_worker(worker_id=f"w{i}", sweep=NO_SWEEP, delivery=delivery,
                           queues=QUEUES, worker={"concurrency": 2}) for i in range(2)]
    wait_for("every wakeup armed",
             lambda: all(w.wakeup is not None and w.wakeup.armed for w in workers), timeout=10)
    time.sleep(0.1)  # every slot asleep
    for i, q in enumerate(["vip", "normal", "z"] * 3):
        started = time.monotonic()
        _push(redis_sync, q, f"{q}{i}")
        wait_done(redis_sync, i + 1, timeout=2)
        assert time.monotonic() - started < 2
        time.sleep(0.05)


def test_tracking_is_disarmed_while_busy_and_rearmed_when_idle(
        redis_sync: redis.Redis, make_worker: MakeWorker) -> None:
    worker = make_worker(sweep=NO_SWEEP, queues=QUEUES, worker={"prefetch": 1})
    assert worker.wakeup is not None
    w = worker.wakeup
    wait_for("the wakeup armed", lambda: w.armed, timeout=10)
    done = 0
    for cycle in range(3):
        burst = [f"b{cycle}-{i}" for i in range(wakeup.DISARM_AFTER * 4)]
        redis_sync.lpush("normal", *burst)
        done += len(burst)
        wait_done(redis_sync, done, timeout=20)
        # idle again: armed before sleeping, and a single task wakes it at once
        wait_for("the wakeup armed", lambda: w.armed, timeout=10)
        time.sleep(0.05)
        for q in ("vip", "normal", "z"):
            _push(redis_sync, q, f"single-{cycle}-{q}")
            done += 1
            wait_done(redis_sync, done, timeout=2)
    assert w.disarms >= 1, "a busy worker kept tracking on"
    assert w.arms >= 1
    assert redis_sync.llen("vip:processing:w1") == 0


def test_no_task_is_missed_while_tracking_flips(redis_sync: redis.Redis,
                                                make_worker: MakeWorker) -> None:
    """Trickles and bursts at random moments: every task runs without waiting for a sweep."""
    import random
    rng = random.Random(7)
    workers = [make_worker(worker_id=f"w{i}", sweep=NO_SWEEP, queues=QUEUES)
               for i in range(3)]
    wait_for("every wakeup armed",
             lambda: all(w.wakeup is not None and w.wakeup.armed for w in workers), timeout=10)
    total = 0
    for _ in range(40):
        n = rng.choice([1, 1, 2, 5, 80])
        q = rng.choice(["vip", "normal", "z"])
        if q == "z":
            for i in range(n):
                _push(redis_sync, q, f"t{total + i}")
        else:
            redis_sync.lpush(q, *[f"t{total + i}" for i in range(n)])
        total += n
        time.sleep(rng.choice([0, 0.001, 0.01, 0.03]))
    got = wait_done(redis_sync, total, timeout=5)
    assert sorted(got) == sorted(f"t{i}" for i in range(total))
