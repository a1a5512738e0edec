"""Fuzz: whatever raw data sits in a TaskQueue's keys, a worker loses none of it, changes no
key's type, keeps every thread alive and logs no traceback.

An in-process worker (real redis-server) runs on a generated `World` (tests/redis/fuzz/rawdata.py:
queue elements and envelope look-alikes, delayed and processing entries with every malformation,
dead-letter records, keys of the wrong type) until nothing changes any more, and is stopped as
SIGTERM would; then every input must be somewhere: run by the handler, in a queue, the delayed
zset, a processing list or the dead-letter list.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis
from hypothesis import given

from taskqueue.worker.runner import Worker
from tests.fixtures.redis_server import RedisServer
from tests.helpers.worker import in_process, make_config, stop_all
from tests.redis.fuzz import rawdata
from tests.redis.fuzz.budget import examples

SETTLED_SECONDS = 0.6
"""A run is over when no work is left, or Redis has not changed for this long (a key of the
wrong type can leave work no worker may touch)."""


@pytest.fixture
def raw(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[redis.Redis]:
    monkeypatch.setenv("TASKQUEUE_TEST_REDIS_URL", redis_server.url)
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def _worker(url: str) -> tuple[Worker, threading.Thread]:
    """A worker started in a thread: with a bookkeeping key of the wrong type its registration
    retries (naming the key) until it is stopped."""
    config = make_config(
        url, sweep=0.05, queues=[{"key": "q"}, {"key": "z", "type": "zset"}, {"key": "h"}],
        retry={"maxAttempts": 2, "backoffSeconds": 0},
        worker={"handler": "tests.redis.fuzz.handlers:record_or_fail", "heartbeatSeconds": 0.1})
    worker = in_process(config)
    starting = threading.Thread(target=worker.start, name="start", daemon=True)
    starting.start()
    return worker, starting


def _work_left(r: redis.Redis) -> bool:
    """Tasks a worker should still take: queued, due in the delayed zset, or held."""
    s = rawdata.SCHEMA
    lengths = {"list": r.llen, "zset": r.zcard}
    for key in ("q", "z", "h", s.processing(rawdata.DEAD_WORKER), s.processing("w1")):
        kind = rawdata.role_type(key)
        if r.type(key).decode() == kind and lengths[kind](key):
            return True
    return (r.type(s.delayed) == b"zset"
            and r.zcount(s.delayed, "-inf", int(time.time() * 1000)) > 0)


def _tasks(r: redis.Redis) -> dict[str, object]:
    """Every key but those each heartbeat writes, which change while nothing moves: the
    deadlines, the counters, and the workers' started strings (Redis's clock less each running
    task's age on the worker's: a task stuck behind a key of the wrong type reads a millisecond
    apart from one beat to the next)."""
    s = rawdata.SCHEMA
    return {k: v for k, v in rawdata.dump(r).items()
            if k not in (s.workers, s.stats) and not k.startswith(s.started(""))}


def _settle(r: redis.Redis, *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    last, since = _tasks(r), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if not _work_left(r):
            return
        now = _tasks(r)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLED_SECONDS:
            return
    raise AssertionError(f"still changing after {timeout}s: {last}")


@examples(80)
@given(world=rawdata.worlds())
def test_a_worker_loses_nothing_and_changes_no_key_type(
        raw: redis.Redis, redis_server: RedisServer, caplog: pytest.LogCaptureFixture,
        world: rawdata.World) -> None:
    raw.flushall()
    rawdata.write(raw, world, now_ms=int(time.time() * 1000))
    world = rawdata.effective(world)
    before = rawdata.key_types(raw)
    caplog.clear()
    worker, starting = _worker(redis_server.url)
    try:
        _settle(raw)
        assert worker.dead_threads() == []
        assert not worker.stopped.is_set()
    finally:
        stop_all([worker])
        starting.join(timeout=10)
    assert rawdata.lost(world, rawdata.found(raw)) == []
    assert rawdata.type_changes(before, rawdata.key_types(raw)) == []
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []

