"""Seed 000 §8.1.5 / 004 §2.2 fairness: with a saturated queue every worker gets an even share
and no worker waits more than one round while another takes two; in-process workers on a real
redis-server (bench/fairness/fairness.py measures 16 worker processes)."""

from __future__ import annotations

import time

import pytest
import redis

from taskqueue import client as producer
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker
from tests.redis.seeds.fairness import max_lag, shares
from tests.redis.seeds.handlers import WHO


@pytest.mark.parametrize(
    ("order", "lag"),
    [
        pytest.param("abcabcabc", 1, id="round-robin"),
        pytest.param("abcbacabc", 2, id="phase-shift-is-two"),
        pytest.param("abbbac", 3, id="c-waits-while-b-takes-three"),
        pytest.param("aaaa", 0, id="alone"),
    ],
)
def test_max_lag(order: str, lag: int) -> None:
    assert max_lag(list(order), sorted(set(order) | {"a"})) == lag


@pytest.mark.parametrize(
    ("order", "workers", "worst", "cv"),
    [
        pytest.param("abab", "ab", 0.0, 0.0, id="even"),
        pytest.param("aaab", "ab", 50.0, 50.0, id="skewed"),
        pytest.param("aa", "abc", 200.0, 141.4, id="idle-workers-count"),
    ],
)
def test_shares(order: str, workers: str, worst: float, cv: float) -> None:
    s = shares(list(order), list(workers))
    assert (s["worst_dev_pct"], s["cv_pct"]) == (worst, cv)


@pytest.mark.slow  # the shares are timed: one test at a time, not beside other tests' processes
@pytest.mark.parametrize("delivery", ["AtLeastOnce", "AtMostOnce"])
def test_seed_000_8_1_5_workers_rejoin_at_the_back(
        make_worker: MakeWorker, redis_sync: redis.Redis, delivery: str) -> None:
    """4 workers x concurrency 1, 48 tasks of 40 ms queued at once: every share is within
    +-10 % of the mean and the lag is at most 2."""
    workers = [f"w{i}" for i in range(4)]
    for wid in workers:
        make_worker(worker_id=wid, handler="tests.redis.seeds.handlers:who", delivery=delivery,
                    worker={"concurrency": 1, "prefetch": 1})
    time.sleep(0.5)
    total = 48
    producer.enqueue_many_sync(redis_sync, "q", ["0.04"] * total)
    wait_for("every task run", lambda: redis_sync.llen(WHO) == total, timeout=30)
    order = [str(x).split()[0] for x in redis_sync.lrange(WHO, 0, -1)]
    threads = sorted(set(order))
    assert len(threads) == len(workers)
    s = shares(order, threads)
    assert s["worst_dev_pct"] <= 10, s
    assert max_lag(order, threads) <= 2, order
