"""Coroutine handlers run as asyncio tasks on the process's one event loop (no thread per slot):
many at once, every outcome handled like a sync handler's, and the drain on stop."""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis

from taskqueue.worker import plan
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, wait_done

HANDLERS = "tests.helpers.handlers"


def test_fifty_coroutines_run_at_once_without_a_thread_each(redis_sync: redis.Redis,
                                                           make_worker: MakeWorker) -> None:
    before = threading.active_count()
    worker = make_worker(handler=f"{HANDLERS}:async_sleep_then_record",
                         worker={"concurrency": 50})
    wait_for("the worker registered", lambda: redis_sync.zscore("q:workers", "w1"), timeout=10)
    assert worker.slots == [] and len(worker.async_slots) == 50
    # the dispatcher, the wake-up listener, the periodic threads and the event loop (+ at most
    # 1 spare): not one thread per coroutine
    assert threading.active_count() - before <= 2 + len(plan.PERIODIC_THREADS) + 1 + 1
    redis_sync.lpush("q", *[f"t{i}:0.5" for i in range(50)])
    started = time.monotonic()
    wait_done(redis_sync, 50, timeout=10)
    assert time.monotonic() - started < 2.5  # 50 x 0.5 s in parallel, not in series
    wait_for("all acked", lambda: redis_sync.hget("q:stats", "completed") == "50", timeout=5)
    assert redis_sync.llen("q:processing:w1") == 0


@pytest.mark.parametrize(("kind", "error"), [
    pytest.param("value-error", "ValueError: bad value", id="exception"),
    pytest.param("keyboard-interrupt", "KeyboardInterrupt: ctrl-c in a handler",
                 id="keyboard-interrupt"),
    pytest.param("system-exit", "SystemExit: 3", id="system-exit"),
    pytest.param("cancelled", "CancelledError: cancelled", id="cancelled-error"),
])
@pytest.mark.parametrize("timeout", [pytest.param(None, id="no-timeout"),
                                     pytest.param(30.0, id="with-timeout")])
def test_a_failing_coroutine_is_dead_lettered_and_the_loop_lives_on(
        redis_sync: redis.Redis, make_worker: MakeWorker, kind: str, error: str,
        timeout: float | None) -> None:
    redis_sync.lpush("q", kind)
    make_worker(handler=f"{HANDLERS}:async_raise_kind", retry={"maxAttempts": 1},
                worker={"concurrency": 2, "taskTimeoutSeconds": timeout})
    (record,) = wait_for("a dead letter", lambda: redis_sync.lrange("q:dead", 0, -1), timeout=10)
    assert json.loads(record)["error"] == error
    redis_sync.lpush("q", "after")
    wait_done(redis_sync, 1, timeout=10)
    wait_for("nothing held", lambda: redis_sync.llen("q:processing:w1") == 0, timeout=5)


def test_a_coroutine_that_fails_is_retried(redis_sync: redis.Redis,
                                          make_worker: MakeWorker) -> None:
    redis_sync.lpush("q", "value-error")
    make_worker(handler=f"{HANDLERS}:async_raise_kind",
                retry={"maxAttempts": 3, "backoffSeconds": 60})
    wait_for("a retry in the delayed set", lambda: redis_sync.zcard("q:delayed") == 1,
             timeout=10)
    wait_for("nothing held", lambda: redis_sync.llen("q:processing:w1") == 0, timeout=5)


def test_a_coroutine_past_its_timeout_fails(redis_sync: redis.Redis,
                                           make_worker: MakeWorker) -> None:
    redis_sync.lpush("q", "slow:30")
    make_worker(handler=f"{HANDLERS}:async_sleep_then_record", retry={"maxAttempts": 1},
                worker={"taskTimeoutSeconds": 0.3})
    (record,) = wait_for("a dead letter", lambda: redis_sync.lrange("q:dead", 0, -1), timeout=10)
    assert json.loads(record)["error"] == "TaskFailedError: timed out after 0.3s"


def test_stop_drains_the_coroutines_in_hand_and_gives_back_the_rest(
        redis_sync: redis.Redis, make_worker: MakeWorker) -> None:
    redis_sync.lpush("q", *[f"t{i}:0.5" for i in range(12)])
    worker = make_worker(handler=f"{HANDLERS}:async_note_start_sleep_then_record",
                         worker={"concurrency": 4})
    # in hand = running: an entry taken but not yet begun when the stop comes is given back
    # unrun (the slot checks the stop before each entry), so wait for the 4 coroutines
    wait_for("4 coroutines running", lambda: redis_sync.llen("test:started") == 4, timeout=10)
    assert redis_sync.llen("q:processing:w1") == 4
    worker.stop()
    worker.join(grace=10)
    done = redis_sync.lrange("test:done", 0, -1)
    assert len(done) == 4
    assert sorted(done + redis_sync.lrange("q", 0, -1)) == sorted(f"t{i}:0.5" for i in range(12))
    assert redis_sync.llen("q:processing:w1") == 0
    assert redis_sync.hget("q:stats", "completed") == "4"
    assert redis_sync.zscore("q:workers", "w1") is None


def test_grace_over_gives_back_a_coroutine_still_running(redis_sync: redis.Redis,
                                                        make_worker: MakeWorker) -> None:
    redis_sync.lpush("q", "long:30")
    worker = make_worker(handler=f"{HANDLERS}:async_sleep_or_note_cancel")
    # running, not only taken (a taken entry not yet begun is given back unrun on stop)
    wait_for("the coroutine running", lambda: redis_sync.llen("test:started") == 1, timeout=10)
    assert redis_sync.llen("q:processing:w1") == 1
    worker.stop()
    worker.join(grace=0.5)
    assert redis_sync.lrange("q", 0, -1) == ["long:30"]
    assert redis_sync.llen("q:processing:w1") == 0
    # the coroutine was cancelled (not left running on the loop beside its redelivery), and
    # that is not a failure of the task: no retry, no dead letter, no exit status 3
    # (the note is written by the cancelled coroutine itself: on a loaded machine it may land
    # after the worker gave up waiting for it, ABANDON_WAIT_SECONDS)
    wait_for("the coroutine cancelled",
             lambda: redis_sync.lrange("test:done", 0, -1) == ["cancelled:long:30"], timeout=10)
    assert redis_sync.zcard("q:delayed") == 0 and redis_sync.llen("q:dead") == 0
    assert not any(s.crashed for s in worker.async_slots)
