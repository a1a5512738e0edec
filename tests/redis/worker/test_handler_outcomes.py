"""Every handler outcome ends as success, retry or dead letter, and the slot lives on (real
worker processes against a real redis-server)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import redis

from tests.helpers.wait import wait_for
from tests.redis.worker.procs import running, spawn

HANDLERS = "tests.helpers.handlers"


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        pytest.param("keyboard-interrupt", "KeyboardInterrupt: ctrl-c in a handler",
                     id="keyboard-interrupt"),
        pytest.param("generator-exit", "GeneratorExit: closed", id="generator-exit"),
        pytest.param("custom-base", "CustomBaseError: custom", id="custom-base-exception"),
        pytest.param("cancelled", "CancelledError: cancelled", id="cancelled-error"),
        pytest.param("system-exit", "SystemExit: 3", id="system-exit"),
        pytest.param("unprintable", "UnprintableError: <str() raised RuntimeError>",
                     id="str-raises"),
    ],
)
def test_base_exception_is_dead_lettered_and_the_slot_lives_on(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis, kind: str, error: str) -> None:
    redis_sync.lpush("q", kind)
    with running(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:raise_kind",
                 "--max-attempts", "1", "--worker-id", "b1", log_path=tmp_path / "w.log"):
        (record,) = wait_for("redis_sync.lrange('q:dead', 0, -1)",
                             lambda: redis_sync.lrange("q:dead", 0, -1), timeout=15)
        redis_sync.lpush("q", "after")  # the one slot still consumes
        wait_for("redis_sync.lrange('test:done', 0, -1) == ['after']",
                 lambda: redis_sync.lrange("test:done", 0, -1) == ["after"], timeout=15)
        # "after" is acked by the slot's next fetch, right after it ran
        wait_for("redis_sync.llen('q:processing:b1') == 0",
                 lambda: redis_sync.llen("q:processing:b1") == 0, timeout=5)
    dead = json.loads(record)
    assert dead["payload"] == kind
    assert dead["error"] == error


def test_base_exception_on_a_retry_goes_to_the_delayed_set(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", "custom-base")
    with running(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:raise_kind",
                 "--max-attempts", "3", "--backoff", "60", "--worker-id", "b2",
                 log_path=tmp_path / "w.log"):
        wait_for("redis_sync.zcard('q:delayed') == 1",
                 lambda: redis_sync.zcard("q:delayed") == 1, timeout=15)
        wait_for("redis_sync.llen('q:processing:b2') == 0",
                 lambda: redis_sync.llen("q:processing:b2") == 0, timeout=5)


@pytest.mark.parametrize(
    ("handler", "expect_done", "dead_error"),
    [
        pytest.param("decorated_async", ["t1"], None, id="awaitable-is-awaited"),
        pytest.param("generator_handler", [], "handler returned a generator object",
                     id="generator-fails"),
    ],
)
def test_what_a_sync_handler_returns(tmp_path: Path, redis_url: str, redis_sync: redis.Redis,
                                     handler: str, expect_done: list[str],
                                     dead_error: str | None) -> None:
    redis_sync.lpush("q", "t1")
    with running(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:{handler}",
                 "--max-attempts", "1", "--worker-id", "r1", log_path=tmp_path / "w.log"):
        wait_for("redis_sync.llen('test:done') + redis_sync.llen('q:dead') ...",
                 lambda: redis_sync.llen("test:done") + redis_sync.llen("q:dead") == 1,
                 timeout=15)
        time.sleep(0.3)
    assert redis_sync.lrange("test:done", 0, -1) == expect_done
    dead = [json.loads(r) for r in redis_sync.lrange("q:dead", 0, -1)]
    if dead_error is None:
        assert dead == []
    else:
        assert len(dead) == 1 and dead[0]["error"].startswith(f"TaskFailedError: {dead_error}")
    assert redis_sync.hget("q:stats", "completed") == (None if dead_error else "1")


def test_generator_function_handler_is_refused_at_start(redis_url: str,
                                                        redis_sync: redis.Redis) -> None:
    proc = spawn(redis_url, "--queue", "q",
                 "--handler", "tests.redis.worker.test_handler_outcomes:gen")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert b"is a generator function" in err


def gen(payload: str):  # type: ignore[no-untyped-def]
    yield payload


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not reaped by its parent yet) is not running
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_command_timeout_kills_the_whole_process_group(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """The command starts a background child that holds its stderr pipe: the timeout kills it
    too and the attempt ends at the timeout (not when the child would have exited)."""
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "task.sh"
    script.write_text('#!/bin/sh\nread f\nsleep 300 &\necho $! > "$f"\nwait\n')
    script.chmod(0o755)
    redis_sync.lpush("q", str(pid_file))
    with running(redis_url, "--queue", "q", "--command", str(script),
                 "--task-timeout", "1", "--max-attempts", "1", "--worker-id", "c1",
                 log_path=tmp_path / "w.log"):
        wait_for("the pid file", pid_file.exists, timeout=15)
        started = time.monotonic()
        (record,) = wait_for("redis_sync.lrange('q:dead', 0, -1)",
                             lambda: redis_sync.lrange("q:dead", 0, -1), timeout=15)
        assert time.monotonic() - started < 5
        child = int(pid_file.read_text())
        wait_for("not _alive(child)", lambda: not _alive(child), timeout=5)
    assert "command timed out after 1s" in json.loads(record)["error"]
