"""Flow control across a fleet of real worker processes on a real redis-server: the in-flight
limit holds at every instant (a sampler reads the count and the truth, the entries in the
processing lists, atomically every 10 ms) through SIGKILLs of workers holding tasks; the rate
limit holds for the fleet together; a pause stops every worker's taking at once, tasks in hand
finish, nothing is lost, and resume carries on."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from taskqueue import client
from taskqueue.redisio import flowops
from taskqueue.wire import flow, keys
from tests.helpers import handlers as test_handlers
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import spawn

HANDLERS = "tests.helpers.handlers"
SCHEMA = keys.KeySchema(prefix="q", queues=(keys.QueueRef(key="q"),), dead_letter="q:dead")
SNAPSHOT = """
local truth = 0
for _, list in ipairs(redis.call('KEYS', 'q:processing:*')) do
  truth = truth + redis.call('LLEN', list)
end
return {truth, tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')}
"""


def snapshot(r: redis.Redis) -> tuple[int, int]:
    """(tasks in the processing lists, the in-flight count), read atomically."""
    truth, held = r.eval(SNAPSHOT, 1, SCHEMA.flow_state, flow.HELD + "q")
    return int(truth), int(held)


class Sampler:
    """Reads `snapshot` every 10 ms on a thread until stopped."""

    def __init__(self, url: str) -> None:
        self.r = redis.Redis.from_url(url, decode_responses=True)
        self.samples: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.samples.append(snapshot(self.r))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def fleet(redis_url: str, tmp_path: Path, n: int,
          *args: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [start(redis_url, tmp_path, i, *args) for i in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start(redis_url: str, tmp_path: Path, i: int, *args: str) -> subprocess.Popen[bytes]:
    return spawn(redis_url, "--queue", "q", "--worker-id", f"w{i}", *args,
                 log_path=tmp_path / f"worker-{i}.log")


def limit(r: redis.Redis, **queue: object) -> None:
    """What the operator writes for spec.queues[0] (`flowops.sync`'s fields)."""
    r.hset(SCHEMA.flow, mapping=flow.control_fields([flow.QueueFlow("q", **queue)]))  # type: ignore[arg-type]


def done(r: redis.Redis) -> list[str]:
    return list(r.lrange(test_handlers.DONE, 0, -1))


@pytest.mark.timeout(180)
def test_max_in_flight_holds_at_every_instant_through_sigkills(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    total = 300
    limit(redis_sync, max_in_flight=10)
    client.enqueue_many_sync(redis_sync, "q", [f"{i}:0.02" for i in range(total)])
    args = ("--handler", f"{HANDLERS}:sleep_then_record", "--concurrency", "8",
            "--heartbeat", "0.3", "--max-attempts", "50")
    with Sampler(redis_url) as sampler, fleet(redis_url, tmp_path, 3, *args) as procs:
        spawned = len(procs)
        for _ in range(5):
            wait_for("tasks held", lambda: snapshot(redis_sync)[0] > 0, timeout=30)
            victim = procs.pop(0)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            procs.append(start(redis_url, tmp_path, spawned, *args))
            spawned += 1
        wait_for("every task done", lambda: len(set(done(redis_sync))) == total, timeout=120)
        wait_for("nothing held", lambda: snapshot(redis_sync) == (0, 0), timeout=30)
    assert len(sampler.samples) > 50
    assert 0 < max(truth for truth, _ in sampler.samples) <= 10
    assert all(truth == held for truth, held in sampler.samples), [
        s for s in sampler.samples if s[0] != s[1]][:5]


@pytest.mark.timeout(120)
def test_a_rate_limit_holds_for_the_fleet_together(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    total, rate, burst = 60, 20, 5
    limit(redis_sync, rate=(rate, 1.0, burst))
    args = ("--handler", f"{HANDLERS}:record_lateness", "--concurrency", "8")
    with fleet(redis_url, tmp_path, 3, *args):
        client.enqueue_many_sync(redis_sync, "q", [str(i) for i in range(total)])
        wait_for("every task run", lambda: redis_sync.llen(test_handlers.LATENESS) == total,
                 timeout=90)
    starts = sorted(json.loads(x)["late"] for x in redis_sync.lrange(test_handlers.LATENESS, 0, -1))
    # the limit lets the first `burst` start at once, then one every 1/rate s: the last can
    # start no sooner than this after the tasks were enqueued (later on a slow machine)
    assert starts[-1] >= (total - burst) / rate - 0.05


PAUSE_HOLDS_WITHIN = 1.0
"""The issue's bound: workers stop taking from a paused queue within one second (fetch.lua:
from the next fetch; the blocking pops of AtMostOnce: the `flow` thread's next read,
worker.flowwatch)."""


@pytest.mark.timeout(120)
def test_a_pause_stops_every_worker_within_a_second_and_loses_nothing(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    total = 400
    client.enqueue_many_sync(redis_sync, "q", [f"{i}:0.02" for i in range(total)])
    args = ("--handler", f"{HANDLERS}:sleep_then_record", "--concurrency", "4")
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    with fleet(redis_url, tmp_path, 2, *args):
        wait_for("some tasks done", lambda: redis_sync.llen(test_handlers.DONE) >= 40, timeout=60)
        assert not redis_sync.exists(SCHEMA.flow, SCHEMA.flow_state)  # no flow control yet
        assert flowops.pause(r, SCHEMA, "q", at=time.time(), who="test")
        time.sleep(PAUSE_HOLDS_WITHIN)
        taken = redis_sync.hget(SCHEMA.stats, "taken:q")
        wait_for("tasks in hand finished", lambda: snapshot(redis_sync)[0] == 0, timeout=30)
        time.sleep(1.0)
        assert redis_sync.hget(SCHEMA.stats, "taken:q") == taken
        finished = len(done(redis_sync))
        assert finished + redis_sync.llen("q") == total
        assert flowops.resume(r, SCHEMA, "q") == (True, False)
        wait_for("every task done", lambda: len(done(redis_sync)) >= total, timeout=90)
    assert sorted(done(redis_sync)) == sorted(f"{i}:0.02" for i in range(total))


@pytest.mark.timeout(120)
def test_at_most_once_workers_leave_a_paused_queue_alone_and_lose_nothing(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """AtMostOnce over lists: each slot BRPOPs (no script), so the pause is applied by leaving
    the paused queue out of the pop. Within a second of `taskqueue pause` the queue's length
    stops moving while the other queue is still served; resume serves the rest, each task once."""
    total = 300
    client.enqueue_many_sync(redis_sync, "q", [f"{i}:0.02" for i in range(total)])
    args = ("--queue", "r", "--handler", f"{HANDLERS}:sleep_then_record", "--concurrency", "4",
            "--delivery", "AtMostOnce")
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    with fleet(redis_url, tmp_path, 2, *args) as procs:
        wait_for("some tasks done", lambda: redis_sync.llen(test_handlers.DONE) >= 30, timeout=60)
        assert flowops.pause(r, SCHEMA, "q", at=time.time(), who="test")
        time.sleep(PAUSE_HOLDS_WITHIN)
        left = redis_sync.llen("q")
        assert left > 0
        client.enqueue_many_sync(redis_sync, "r", [f"r{i}:0.01" for i in range(20)])
        wait_for("the other queue served",
                 lambda: sum(x.startswith("r") for x in done(redis_sync)) == 20, timeout=30)
        time.sleep(0.5)
        assert redis_sync.llen("q") == left
        assert all(p.poll() is None for p in procs)
        assert flowops.resume(r, SCHEMA, "q") == (True, False)
        wait_for("every task done", lambda: len(done(redis_sync)) >= total + 20, timeout=90)
    assert sorted(done(redis_sync)) == sorted(
        [f"{i}:0.02" for i in range(total)] + [f"r{i}:0.01" for i in range(20)])


def redis_seconds(reply: tuple[int, int]) -> float:
    """A TIME reply in seconds: the clock the rate limit (GCRA in fetch.lua) runs on."""
    return reply[0] + reply[1] / 1e6


def write_and_read_taken(r: redis.Redis, **queue: object) -> tuple[int, float]:
    """Write spec.queues[0]'s flow control into a TaskQueue that had none and read `taken:q`
    and Redis's clock in the same MULTI/EXEC (no fetch runs between them): (taken at the write,
    Redis's time of the write in seconds)."""
    assert not r.exists(SCHEMA.flow, SCHEMA.flow_state)
    pipe = r.pipeline(transaction=True)
    pipe.hset(SCHEMA.flow, mapping=flow.control_fields([flow.QueueFlow("q", **queue)]))  # type: ignore[arg-type]
    pipe.hget(SCHEMA.stats, "taken:q")
    pipe.time()
    _, taken, written = pipe.execute()
    return int(taken or 0), redis_seconds(written)


FAST = ("--handler", f"{HANDLERS}:record", "--concurrency", "8")
"""Tasks that take no time: 3 such workers take hundreds a second without a limit."""


@pytest.mark.timeout(120)
def test_a_first_pause_holds_from_the_write_on_every_worker(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """3 workers fetching continuously; a pause written into a TaskQueue with no flow key: not
    one task is taken after the write (fetch.lua reads the flow keys in every fetch; no worker
    has to hear of them first). The tasks in hand finish; nothing is lost."""
    total = 20_000
    client.enqueue_many_sync(redis_sync, "q", [str(i) for i in range(total)])
    with fleet(redis_url, tmp_path, 3, *FAST):
        wait_for("fetching", lambda: int(redis_sync.hget(SCHEMA.stats, "taken:q") or 0) > 200,
                 timeout=60)
        taken, _ = write_and_read_taken(redis_sync, paused=True)
        assert 0 < redis_sync.llen("q") < total
        wait_for("tasks in hand finished", lambda: snapshot(redis_sync)[0] == 0, timeout=30)
        time.sleep(1.0)
        assert int(redis_sync.hget(SCHEMA.stats, "taken:q") or 0) == taken
        assert len(done(redis_sync)) + redis_sync.llen("q") == total


@pytest.mark.timeout(120)
def test_a_first_rate_limit_is_never_exceeded_from_the_write(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """3 workers x 8 slots fetching no-op tasks continuously (hundreds a second); a rate limit
    of 10/s, burst 5, written into a TaskQueue with no flow key: from the write on, the tasks
    taken never exceed burst + rate x the time since it (GCRA), sampled for 3 s; the time is
    Redis's, the limit's own clock, read in the same transaction as the write and as each count
    (the host's wall clock may be slewed against the test's monotonic one)."""
    rate, burst = 10, 5
    client.enqueue_many_sync(redis_sync, "q", [str(i) for i in range(20_000)])
    samples: list[tuple[int, float]] = []
    with fleet(redis_url, tmp_path, 3, *FAST):
        wait_for("fetching", lambda: int(redis_sync.hget(SCHEMA.stats, "taken:q") or 0) > 200,
                 timeout=60)
        before = int(redis_sync.hget(SCHEMA.stats, "taken:q") or 0)
        time.sleep(0.5)
        unlimited = int(redis_sync.hget(SCHEMA.stats, "taken:q") or 0) - before
        taken, written = write_and_read_taken(redis_sync, rate=(rate, 1.0, burst))
        elapsed = 0.0
        while elapsed < 3.0:
            pipe = redis_sync.pipeline(transaction=True)
            pipe.hget(SCHEMA.stats, "taken:q")
            pipe.time()
            n, now = pipe.execute()
            elapsed = redis_seconds(now) - written
            samples.append((int(n or 0) - taken, elapsed))
            time.sleep(0.01)
    assert unlimited > 2 * burst  # the fleet would have taken far more without the limit
    over = [(n, round(t, 3)) for n, t in samples if n > burst + rate * t]
    assert not over, over[:5]
    assert samples[-1][0] >= burst  # the limit let tasks through, it did not stop the fleet
