"""Error replies from Redis (OOM, BUSY, WRONGTYPE, READONLY) do not end any worker thread: the
heartbeat and the consume thread retry with backoff, log the error with the thread's name, and
carry on once Redis is usable again (real worker process, a real redis-server per test)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import redis
from tests.fixtures.redis_server import RedisServer, free_port
from tests.helpers.wait import wait_for
from tests.worker.procs import running

HANDLERS = "tests.worker.handlers"
Fault = Callable[[redis.Redis], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def out_of_memory(r: redis.Redis) -> Iterator[None]:
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    try:
        yield
    finally:
        r.config_set("maxmemory", 0)


@contextlib.contextmanager
def busy_script(r: redis.Redis) -> Iterator[None]:
    """A script that loops until SCRIPT KILL: every other command gets BUSY meanwhile."""
    r.config_set("busy-reply-threshold", 100)
    blocker = _another_client(r)

    def loop() -> None:
        with contextlib.suppress(redis.ResponseError):
            blocker.eval("while true do end", 0)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    time.sleep(0.3)
    try:
        yield
    finally:
        killer = _another_client(r)
        wait_for("_script_kill(killer)", lambda: _script_kill(killer), timeout=5)
        thread.join(timeout=5)


def _another_client(r: redis.Redis) -> redis.Redis:
    return redis.Redis(connection_pool=redis.ConnectionPool(**r.connection_pool.connection_kwargs))


def _script_kill(r: redis.Redis) -> bool:
    try:
        r.script_kill()
    except redis.ResponseError:
        return False
    return True


@contextlib.contextmanager
def wrong_type_workers_key(r: redis.Redis) -> Iterator[None]:
    r.delete("q:workers")
    r.set("q:workers", "not a zset")
    try:
        yield
    finally:
        r.delete("q:workers")


@contextlib.contextmanager
def read_only_replica(r: redis.Redis) -> Iterator[None]:
    r.replicaof("127.0.0.1", free_port())  # a master that never answers: writes get READONLY
    try:
        yield
    finally:
        r.replicaof("NO", "ONE")


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("fault", "error", "hits_fail_lua"),
    [
        # fail.lua's first write (LREM) frees memory, so Redis lets it run under OOM
        pytest.param(out_of_memory, "OutOfMemoryError", False, id="oom-noeviction"),
        pytest.param(busy_script, "BUSY Redis is busy running a script", True, id="busy-script"),
        pytest.param(wrong_type_workers_key, "WRONGTYPE", False, id="wrongtype-workers-key"),
        pytest.param(read_only_replica, "ReadOnlyError", True, id="readonly-replica"),
    ],
)
def test_threads_survive_error_replies(tmp_path: Path, redis_factory: type[RedisServer],
                                       fault: Fault, error: str, hits_fail_lua: bool) -> None:
    server = redis_factory()  # type: ignore[call-arg]
    r = redis.Redis.from_url(server.url, decode_responses=True)
    log = tmp_path / "w.log"
    with running(server.url, "--queue", "q", "--handler", f"{HANDLERS}:fail_slowly_or_record",
                 "--heartbeat", "0.3", "--max-attempts", "1", "--worker-id", "f1",
                 log_path=log) as proc:
        wait_for("r.zscore('q:workers', 'f1')", lambda: r.zscore("q:workers", "f1"), timeout=15)
        r.lpush("q", "boom:0.8")
        wait_for("r.llen('q:processing:f1') == 1",
                 lambda: r.llen("q:processing:f1") == 1, timeout=10)
        with fault(r):
            time.sleep(2.0)  # the task fails meanwhile; heartbeats and fail.lua get the error
        # the failed task is recorded once Redis takes writes again: the consume thread lived
        (record,) = wait_for("r.lrange('q:dead', 0, -1)",
                             lambda: r.lrange("q:dead", 0, -1), timeout=15)
        assert json.loads(record)["payload"] == "boom:0.8"
        # and it keeps consuming
        r.lpush("q", "after")
        wait_for("r.lrange('test:done', 0, -1) == ['after']",
                 lambda: r.lrange("test:done", 0, -1) == ["after"], timeout=15)
        # the heartbeat thread lived: our deadline moves on
        first = r.zscore("q:workers", "f1")
        wait_for("(r.zscore('q:workers', 'f1') or 0) > (first or 0)",
                 lambda: (r.zscore("q:workers", "f1") or 0) > (first or 0), timeout=5)
        assert proc.poll() is None
    text = log.read_text()
    assert _logged(text, "heartbeat thread: beat failed (", error)
    if hits_fail_lua:
        assert _logged(text, "slot-0: recording a failed task (fail.lua) failed (", error)


def _logged(text: str, *parts: str) -> bool:
    """Some log line contains every part."""
    return any(all(p in line for p in parts) for line in text.splitlines())
