"""The runner follows the worker's plan (`worker/plan.py`; its table is tests/unit/worker/
test_plan.py): a started worker runs exactly the long-lived threads its plan names, its slots are
of the kind the plan says, and it consumes; whoever fetches, one fetch is in flight at a time.
Real workers on a real redis-server."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, wait_done

HANDLERS = "tests.helpers.handlers"


@pytest.mark.parametrize(
    ("handler", "spec", "runs"),
    [
        pytest.param("record", {"worker": {"concurrency": 3}}, "threads", id="thread-slots"),
        pytest.param("record", {}, "inline", id="inline"),
        pytest.param("record_async", {"worker": {"concurrency": 4}}, "coroutines",
                     id="coroutines"),
        pytest.param("record", {"delivery": "AtMostOnce", "worker": {"concurrency": 2}},
                     "blocking", id="blocking-pop"),
        pytest.param("record_async", {"delivery": "AtMostOnce"}, "blocking",
                     id="blocking-pop-coroutine-handler"),
        pytest.param("record_async", {"worker": {"concurrency": 2, "taskTimeoutSeconds": 30}},
                     "coroutines", id="coroutines-with-a-task-timeout"),
        pytest.param("record", {"worker": {"concurrency": 2,
                                           "idempotency": {"windowSeconds": 60}}},
                     "threads", id="idempotent"),
    ],
)
def test_a_worker_runs_the_threads_of_its_plan(redis_sync: redis.Redis,
                                               make_worker: MakeWorker, handler: str,
                                               spec: dict[str, Any], runs: str) -> None:
    worker = make_worker(handler=f"{HANDLERS}:{handler}", **spec)
    assert worker.plan.slots == runs
    threads = worker.threads()
    assert sorted(t.name for t in threads) == sorted(worker.plan.threads)
    # every one of them is running, but the watchdog (started by run_until_signal only)
    assert all(t.is_alive() for t in threads if t.name != "watchdog")
    assert (worker.dispatcher is not None) is worker.plan.dispatched
    assert (len(worker.async_slots) > 0) is (runs == "coroutines")
    redis_sync.lpush("q", *[f"t{i}" for i in range(6)])
    assert sorted(wait_done(redis_sync, 6)) == [f"t{i}" for i in range(6)]


def test_one_fetch_at_a_time_whoever_fetches(redis_sync: redis.Redis,
                                            make_worker: MakeWorker) -> None:
    """Eight slots finishing short tasks at once: the dispatcher thread and the last slot to
    become ready take turns, never two fetch.lua calls in flight."""
    worker = make_worker(start=False, worker={"concurrency": 8})
    assert worker.dispatcher is not None
    fetcher = worker.dispatcher._figures
    lock, in_flight, most = threading.Lock(), [0], [0]
    real = fetcher.store.fetch

    def fetch(**kwargs: Any) -> list[str]:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        try:
            return real(**kwargs)
        finally:
            with lock:
                in_flight[0] -= 1

    fetcher.store.fetch = fetch  # type: ignore[method-assign]
    worker.start()
    redis_sync.lpush("q", *[f"t{i}" for i in range(400)])
    wait_done(redis_sync, 400, timeout=60)
    wait_for("all acked", lambda: redis_sync.hget("q:stats", "completed") == "400",
             timeout=10)
    assert most[0] == 1
