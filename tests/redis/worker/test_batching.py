"""The batched fetch/ack path, seen from a real redis-server with MONITOR: one fetch.lua call
per wake-up serves every idle slot, acks of several slots ride on one call, prefetch 1 never
holds more than one entry per slot, and a kill or a drain in the middle of a batch loses
nothing."""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

from taskqueue.redisio import queueops
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, wait_done
from tests.redis.worker.procs import spawn

HANDLERS = "tests.helpers.handlers"
NO_SWEEP = 30.0


@dataclass(frozen=True)
class FetchCall:
    """One fetch.lua call as MONITOR showed it."""

    count: int
    acks: int


QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_fetch(line: str) -> FetchCall | None:
    """A raw MONITOR line (`<time> [<db> <client>] "ARG" "ARG" ...`) -> the fetch.lua call it
    is, or None (another command)."""
    args = QUOTED.findall(line)
    if len(args) < 3 or args[0].upper() != "EVALSHA" or args[1] != queueops.script("fetch").sha:
        return None
    argv = args[3 + int(args[2]):]  # dead-letter cap, queue options, now, count, hold,
    # tracking, acks...
    return FetchCall(count=int(argv[3]), acks=len(argv) - 6)


@contextlib.contextmanager
def monitored(url: str) -> Iterator[list[FetchCall]]:
    """Every fetch.lua call Redis runs while the block runs (MONITOR on its own connection)."""
    calls: list[FetchCall] = []
    stop = threading.Event()
    ready = threading.Event()

    def listen() -> None:
        with redis.Redis.from_url(url, decode_responses=True).monitor() as m:
            ready.set()
            while not stop.is_set():
                call = parse_fetch(str(m.connection.read_response()))
                if call is not None:
                    calls.append(call)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert ready.wait(5)
    time.sleep(0.05)
    try:
        yield calls
    finally:
        stop.set()
        redis.Redis.from_url(url).ping()  # one more command so the listener sees the stop
        thread.join(5)


@pytest.mark.parametrize("slots", [pytest.param(4, id="4-slots"), pytest.param(8, id="8-slots")])
def test_one_wakeup_with_k_idle_slots_makes_one_fetch_for_k_tasks(
        redis_url: str, redis_sync: redis.Redis, make_worker: MakeWorker, slots: int) -> None:
    worker = make_worker(handler=f"{HANDLERS}:sleep_then_record", sweep=NO_SWEEP,
                         worker={"concurrency": slots})
    wait_for("the wakeup armed", lambda: worker.wakeup is not None and worker.wakeup.armed,
             timeout=10)
    time.sleep(0.2)  # every slot idle, the dispatcher asleep
    with monitored(redis_url) as calls:
        redis_sync.lpush("q", *[f"t{i}:0.5" for i in range(slots)])
        wait_for(f"{slots} tasks held", lambda: redis_sync.llen("q:processing:w1") == slots,
                 timeout=5)
        # Redis ran the call; its MONITOR line may still be on the way to the listener thread
        wait_for("the monitor saw a call that took tasks",
                 lambda: any(c.count for c in calls), timeout=5)
        taking = [c for c in calls if c.count]
    assert taking == [FetchCall(count=slots, acks=0)]
    wait_done(redis_sync, slots, timeout=5)


def test_acks_of_several_slots_ride_on_one_fetch(redis_url: str, redis_sync: redis.Redis,
                                                make_worker: MakeWorker) -> None:
    """A backlog at concurrency 8: every ack rides on a fetch, and many calls carry several."""
    tasks = 2000
    redis_sync.lpush("q", *[str(i) for i in range(tasks)])
    with monitored(redis_url) as calls:
        make_worker(worker={"concurrency": 8})
        wait_done(redis_sync, tasks, timeout=60)
        wait_for("all acked",
                 lambda: int(redis_sync.hget("q:stats", "completed") or 0) == tasks, timeout=10)
    assert sum(c.acks for c in calls) == tasks
    assert max(c.count for c in calls) <= 8  # prefetch 1: never more than the idle slots
    assert any(c.acks >= 2 and c.count >= 2 for c in calls)
    assert len([c for c in calls if c.count]) < tasks


def test_prefetch_1_holds_at_most_one_entry_per_slot(redis_sync: redis.Redis,
                                                    make_worker: MakeWorker) -> None:
    tasks = 300
    redis_sync.lpush("q", *[f"t{i}:0.005" for i in range(tasks)])
    make_worker(handler=f"{HANDLERS}:sleep_then_record", worker={"concurrency": 4})
    most = 0
    while redis_sync.llen("test:done") < tasks:
        most = max(most, redis_sync.llen("q:processing:w1"))
    assert 1 <= most <= 4


def test_sigkill_mid_batch_loses_nothing(redis_url: str, redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", *[f"t{i}:0.4" for i in range(16)])
    args = ("--queue", "q", "--handler", f"{HANDLERS}:sleep_then_record", "--concurrency", "8",
            "--worker-id", "k1")
    victim = spawn(redis_url, *args)
    try:
        wait_for("a batch of 8 held", lambda: redis_sync.llen("q:processing:k1") == 8,
                 timeout=15)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
    # the restarted worker (same id) requeues what the killed one held, then runs everything
    successor = spawn(redis_url, *args)
    try:
        wait_for("every task done", lambda: set(redis_sync.lrange("test:done", 0, -1))
                 >= {f"t{i}:0.4" for i in range(16)}, timeout=30)
        wait_for("nothing held", lambda: redis_sync.llen("q:processing:k1") == 0, timeout=10)
        assert redis_sync.llen("q") == 0
    finally:
        successor.send_signal(signal.SIGTERM)
        successor.wait(timeout=15)


def test_sigterm_drains_a_batch(redis_url: str, redis_sync: redis.Redis) -> None:
    """SIGTERM while 4 slots run a batch: those 4 finish and are acked, the rest stays queued."""
    redis_sync.lpush("q", *[f"t{i}:0.6" for i in range(12)])
    proc = spawn(redis_url, "--queue", "q", "--handler",
                 f"{HANDLERS}:note_start_sleep_then_record", "--concurrency", "4",
                 "--worker-id", "d4")
    # running, not only taken (an entry taken but not begun is given back unrun on SIGTERM)
    wait_for("4 tasks running", lambda: redis_sync.llen("test:started") == 4, timeout=15)
    assert redis_sync.llen("q:processing:d4") == 4
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=15)
    assert proc.returncode == 0
    done = redis_sync.lrange("test:done", 0, -1)
    assert len(done) == 4
    assert sorted(done + redis_sync.lrange("q", 0, -1)) == sorted(f"t{i}:0.6" for i in range(12))
    assert redis_sync.llen("q:processing:d4") == 0
    assert int(redis_sync.hget("q:stats", "completed") or 0) == 4
    assert redis_sync.zscore("q:workers", "d4") is None
