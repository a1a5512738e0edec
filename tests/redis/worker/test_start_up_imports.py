"""A worker imports the parts of the worker only its plan runs (start-up time: each module of
records costs a worker about a millisecond before its first task): the `flow` thread for the
blocking pops only (fetch.lua reads the flow hashes itself), the watchdog from the start only
for a coroutine handler with a task timeout (others import it when they drain), the records of
a task's life with the first progress report. Real `taskqueue-worker` processes on a real
redis-server; the handler pushes the modules its process has loaded when it runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from tests.helpers import handlers as test_handlers
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import running

HANDLERS = "tests.helpers.handlers"
FLOW = {"taskqueue.worker.flowwatch", "taskqueue.wire.flow"}
WATCHDOG = {"taskqueue.worker.watchdog"}
RECORDS = {"taskqueue.wire.lifecycle"}
PARTS = FLOW | WATCHDOG | RECORDS


ONE_LIST = ("--queue", "q")


@pytest.mark.parametrize(("handler", "flags", "payload", "loaded"), [
    pytest.param("record_modules", ONE_LIST, "t", set(), id="at-least-once-sync-none"),
    pytest.param("record_modules", (*ONE_LIST, "--concurrency", "4"), "t", set(),
                 id="thread-slots-none"),
    pytest.param("record_modules", (*ONE_LIST, "--task-timeout", "30"), "t", set(),
                 id="a-sync-handler-with-timeout-no-watchdog"),
    pytest.param("record_modules_async", ONE_LIST, "t", set(),
                 id="coroutine-handler-without-timeout-none"),
    pytest.param("record_modules_async", (*ONE_LIST, "--task-timeout", "30"), "t", WATCHDOG,
                 id="coroutine-handler-with-timeout-watchdog"),
    pytest.param("record_modules", (*ONE_LIST, "--delivery", "AtMostOnce"), "t", FLOW,
                 id="blocking-pops-flow"),
    pytest.param("record_modules", ("--queue", "q", "--queue", "z:zset", "--delivery",
                                    "AtMostOnce"), "t", set(),
                 id="at-most-once-through-fetch-lua-none"),
    pytest.param("record_modules", ONE_LIST, "progress", RECORDS,
                 id="a-progress-report-loads-the-records"),
])
def test_a_worker_imports_only_the_parts_its_plan_runs(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path, handler: str,
        flags: tuple[str, ...], payload: str, loaded: set[str]) -> None:
    redis_sync.lpush("q", payload)
    with running(redis_url, "--handler", f"{HANDLERS}:{handler}", *flags,
                 log_path=tmp_path / "worker.log"):
        wait_for("the task ran", lambda: redis_sync.llen(test_handlers.MODULES) == 1,
                 timeout=20)
    modules = set(json.loads(redis_sync.lindex(test_handlers.MODULES, 0) or "[]"))
    assert "taskqueue.worker.runner" in modules
    assert modules & PARTS == loaded
