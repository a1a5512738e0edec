"""A quiesced worker process takes no task, even under a flood, and takes tasks again once released
(real redis-server, real `taskqueue-worker` processes)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import redis

from taskqueue.worker.dispatch import others_registered
from taskqueue.worker.store import Store
from tests.fixtures.redis_server import free_port
from tests.helpers.handlers import PIDS
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, make_config
from tests.redis.worker.procs import spawn

HANDLER = "tests.helpers.handlers:record_pid"


def _worker(redis_url: str, worker_id: str) -> subprocess.Popen[bytes]:
    return spawn(redis_url, "--queue", "q", "--handler", HANDLER, "--concurrency", "4",
                 "--prefetch", "4", "--worker-id", worker_id)


def _stop(*procs: subprocess.Popen[bytes]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        p.communicate(timeout=20)


@pytest.mark.timeout(120)
def test_a_quiesced_worker_takes_nothing_under_a_flood_then_works_once_released(
        redis_url: str, redis_sync: redis.Redis) -> None:
    quiet = _worker(redis_url, "quiet")
    other = None
    try:
        wait_for("worker quiet up", lambda: redis_sync.zscore("q:workers", "quiet"), timeout=20)
        redis_sync.sadd("q:quiesced", "q:processing:quiet")
        other = _worker(redis_url, "other")
        wait_for("worker other up", lambda: redis_sync.zscore("q:workers", "other"), timeout=20)
        total, seen_held = 3000, 0
        for batch in range(30):
            redis_sync.lpush("q", *[f"t{batch}-{i}" for i in range(total // 30)])
            seen_held = max(seen_held, redis_sync.llen("q:processing:quiet"))
        wait_for(f"{total} tasks done", lambda: redis_sync.llen("test:done") >= total,
                 timeout=60)
        assert seen_held == 0
        assert str(quiet.pid) not in set(redis_sync.lrange(PIDS, 0, -1))
        assert int(redis_sync.hget("q:stats", "taken:q") or 0) == total
        # released, with the other worker gone: the quiesced one takes tasks again
        _stop(other)
        redis_sync.srem("q:quiesced", "q:processing:quiet")
        redis_sync.lpush("q", *[f"late-{i}" for i in range(20)])
        wait_for("the late tasks done", lambda: redis_sync.llen("test:done") >= total + 20,
                 timeout=20)
        assert redis_sync.lrange(PIDS, -20, -1) == [str(quiet.pid)] * 20
    finally:
        _stop(quiet, *([other] if other else []))


@pytest.mark.timeout(120)
def test_a_lone_task_goes_to_the_busy_worker_so_idle_ones_stay_idle(
        redis_url: str, redis_sync: redis.Redis) -> None:
    procs = {w: spawn(redis_url, "--queue", "q", "--handler",
                      "tests.helpers.handlers:sleep_record_pid", "--concurrency", "2",
                      "--grace", "0.5", "--worker-id", w) for w in ("a", "b")}
    try:
        for w in procs:
            wait_for(f"worker {w} up", lambda w=w: redis_sync.zscore("q:workers", w), timeout=20)
        redis_sync.lpush("q", "long:60")
        busy = wait_for("a worker holding the long task", lambda: next(
            (w for w in procs if redis_sync.llen(f"q:processing:{w}")), None))
        shorts = 30
        for i in range(shorts):
            time.sleep(0.05)  # every slot back to waiting for a push
            redis_sync.lpush("q", f"short{i}:0")
            wait_for(f"short task {i} done", lambda i=i: redis_sync.llen("test:done") >= i + 1,
                     timeout=10, every=0.005)
        pids = redis_sync.lrange(PIDS, 0, -1)
        on_busy = pids.count(str(procs[busy].pid))
        # unpacked, the busy worker's one idle slot would win ~1 in 3 (against the idle 2)
        assert on_busy >= 0.7 * shorts, f"{on_busy}/{shorts} on the busy worker"
    finally:
        _stop(*procs.values())


def _store(url: str, worker_id: str) -> Store:
    config = make_config(url, worker_id=worker_id)
    return Store(url=url, schema=config.schema, worker_id=worker_id)


def test_packing_waits_only_when_another_worker_could_take_the_task(
        redis_url: str, make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    make_worker(worker_id="a")
    wait_for("worker a registered", lambda: redis_sync.zscore("q:workers", "a"))
    a = _store(redis_url, "a")
    try:
        assert not others_registered(a)  # alone: a push is picked up at once
        make_worker(worker_id="b")
        wait_for("worker b registered", lambda: redis_sync.zscore("q:workers", "b"))
        assert others_registered(a)
    finally:
        a.close()


def test_packing_still_waits_when_redis_cannot_say_who_else_is_there() -> None:
    unreachable = _store(f"redis://127.0.0.1:{free_port()}/0", "a")
    assert others_registered(unreachable)
