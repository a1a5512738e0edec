"""Error replies from Redis (OOM, BUSY, WRONGTYPE, READONLY, MISCONF) do not end any worker
thread: the heartbeat and the consume thread retry with backoff, log the error with the thread's
name, and carry on once Redis is usable again (real worker process, a real redis-server per test).
While writes are refused no peer recovers a live worker, and every task runs exactly once."""

from __future__ import annotations

import collections
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
from tests.redis.worker.procs import running

HANDLERS = "tests.helpers.handlers"
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


@contextlib.contextmanager
def refused_writes_misconf(r: redis.Redis) -> Iterator[None]:
    """A failed BGSAVE with `stop-writes-on-bgsave-error yes`: every write gets MISCONF.

    A directory stands where the snapshot goes, so BGSAVE's final rename fails (root ignores
    file modes, so chmod would not do; `dir` is a protected config in Redis 7). The fault ends
    when the directory is gone and a BGSAVE succeeds."""
    config = r.config_get("dir")
    in_the_way = Path(config["dir"]) / r.config_get("dbfilename")["dbfilename"]
    in_the_way.mkdir()
    r.config_set("save", "3600 1")  # stop-writes applies only while snapshots are configured
    r.config_set("stop-writes-on-bgsave-error", "yes")
    _bgsave(r, "err")
    with pytest.raises(redis.ResponseError, match=r"^MISCONF "):
        r.set("test:probe", "1")
    try:
        yield
    finally:
        in_the_way.rmdir()
        _bgsave(r, "ok")


def _bgsave(r: redis.Redis, status: str) -> None:
    wait_for("no BGSAVE in progress",
             lambda: not int(r.info("persistence")["rdb_bgsave_in_progress"]), timeout=10)
    r.bgsave()
    wait_for(f"rdb_last_bgsave_status == {status!r}",
             lambda: (not int(r.info("persistence")["rdb_bgsave_in_progress"])
                      and r.info("persistence")["rdb_last_bgsave_status"] == status),
             timeout=10)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("fault", "error", "hits_fail_lua"),
    [
        # fail.lua's first write (LREM) frees memory, so Redis lets it run under OOM
        pytest.param(out_of_memory, "OOM command not allowed", False, id="oom-noeviction"),
        pytest.param(busy_script, "BUSY Redis is busy running a script", True, id="busy-script"),
        pytest.param(wrong_type_workers_key, "WRONGTYPE", False, id="wrongtype-workers-key"),
        pytest.param(read_only_replica, "ReadOnlyError", True, id="readonly-replica"),
        pytest.param(refused_writes_misconf, "MISCONF", True, id="misconf-bgsave-failed"),
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


@pytest.mark.timeout(60)
def test_refused_writes_recover_no_live_worker(tmp_path: Path,
                                               redis_factory: type[RedisServer]) -> None:
    """Writes refused with MISCONF for longer than a heartbeat deadline while a worker holds
    tasks: a peer (same key prefix) recovers nobody, both workers live on, the held tasks and
    the ones pushed after the fault each run exactly once."""
    server = redis_factory()  # type: ignore[call-arg]
    r = redis.Redis.from_url(server.url, decode_responses=True)
    common = ("--handler", f"{HANDLERS}:sleep_then_record", "--heartbeat", "0.3",
              "--max-attempts", "5", "--backoff", "0.05", "--key-prefix", "q")
    with running(server.url, "--queue", "q", "--concurrency", "2",
                 "--worker-id", "f1", *common, log_path=tmp_path / "f1.log") as worker, \
         running(server.url, "--queue", "idle", "--worker-id", "p1", *common,
                 log_path=tmp_path / "p1.log") as peer:
        wait_for("both workers registered",
                 lambda: r.zscore("q:workers", "f1") and r.zscore("q:workers", "p1"), timeout=15)
        time.sleep(1.5)  # past the start-up grace: the peer judges expired workers
        held = ["held-a:5", "held-b:5"]  # still running when the fault ends (3 s later)
        r.lpush("q", *held)
        wait_for("r.llen('q:processing:f1') == 2",
                 lambda: r.llen("q:processing:f1") == 2, timeout=10)
        with refused_writes_misconf(r):
            time.sleep(2.0)  # > 6 heartbeat periods: f1's deadline (3 periods) expires
        wait_for("the held tasks ran", lambda: set(r.lrange("test:done", 0, -1)) >= set(held),
                 timeout=15)
        after = [f"after-{i}:0" for i in range(10)]
        r.lpush("q", *after)  # the consume thread takes work again
        wait_for("every task ran",
                 lambda: set(r.lrange("test:done", 0, -1)) == {*held, *after}, timeout=15)
        first = r.zscore("q:workers", "f1")
        wait_for("f1's deadline moves on",
                 lambda: (r.zscore("q:workers", "f1") or 0) > (first or 0), timeout=5)
        assert worker.poll() is None
        assert peer.poll() is None
    runs = collections.Counter(r.lrange("test:done", 0, -1))
    assert runs == collections.Counter([*held, *after])  # exactly once each
    assert r.hget("q:stats", "recovered") is None
    assert r.llen("q:dead") == 0
    for name in ("f1", "p1"):
        text = (tmp_path / f"{name}.log").read_text()
        assert _logged(text, "heartbeat thread: beat failed (", "MISCONF"), name
        assert "recovered worker" not in text, name


def _logged(text: str, *parts: str) -> bool:
    """Some log line contains every part."""
    return any(all(p in line for p in parts) for line in text.splitlines())
