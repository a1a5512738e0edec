"""The periodic threads of a worker (heartbeat, promoter, lease keeper, watchdog) share one loop
and one error policy (`worker/periodic.py`): any Redis error is logged once per kind and retried
with backoff, and a thread that still ends (a bug) makes the worker exit with status 3.

The promoter scenarios run a real worker process on a real redis-server under a least-privilege
ACL user, and make Redis refuse the promoter's calls for a while: an ACL rule taken away (inside
fetch.lua, or the promoter's own ZRANGE), or the delayed key holding the wrong type. Afterwards
scheduled tasks must start on time again: within the promoter's poll, not at the idle sweep."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from taskqueue import client
from taskqueue.redisio import acl
from taskqueue.wire import keys
from taskqueue.worker import handlers, promoter
from taskqueue.worker.runner import EXIT_THREAD_DIED, Worker
from tests.fixtures.redis_server import RedisServer
from tests.helpers import handlers as test_handlers
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker
from tests.redis.worker.procs import running

HANDLERS = "tests.helpers.handlers"
USER = "tq-worker"
PASSWORD = "worker-secret"
Fault = Callable[[redis.Redis], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def acl_refuses(admin: redis.Redis, command: str) -> Iterator[None]:
    """The worker's user loses `command` for the duration of the block."""
    admin.execute_command("ACL", "SETUSER", USER, f"-{command}")
    try:
        yield
    finally:
        admin.execute_command("ACL", "SETUSER", USER, f"+{command}")


@contextlib.contextmanager
def refused_inside_fetch_lua(admin: redis.Redis) -> Iterator[None]:
    """The worker's user loses ZRANGEBYSCORE, which fetch.lua runs to promote: with a due entry
    waiting, the promoter's fetch.lua call fails with an error from inside the script."""
    with acl_refuses(admin, "zrangebyscore"):
        admin.zadd("q:delayed",
                   {keys.Entry("q", "", "during-the-fault").encode(): time.time() * 1000})
        yield


@contextlib.contextmanager
def zrange_refused(admin: redis.Redis) -> Iterator[None]:
    """The worker's user loses ZRANGE, the promoter's look at the next due time."""
    with acl_refuses(admin, "zrange"):
        yield


@contextlib.contextmanager
def delayed_key_of_the_wrong_type(admin: redis.Redis) -> Iterator[None]:
    admin.set("q:delayed", "not a zset")
    try:
        yield
    finally:
        admin.delete("q:delayed")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("fault", "error"),
    [
        pytest.param(refused_inside_fetch_lua,
                     "no permissions to run the 'zrangebyscore' command (called by fetch.lua",
                     id="script-error-inside-fetch-lua"),
        pytest.param(zrange_refused, "no permissions to run the 'zrange' command",
                     id="acl-refuses-zrange"),
        pytest.param(delayed_key_of_the_wrong_type, "WRONGTYPE", id="wrong-type-delayed-key"),
    ],
)
def test_scheduled_tasks_are_on_time_again_after_redis_refused_the_promoter(
        tmp_path: Path, redis_factory: type[RedisServer], fault: Fault, error: str) -> None:
    server = redis_factory()  # type: ignore[call-arg]
    admin = redis.Redis.from_url(server.url, decode_responses=True)
    admin.execute_command("ACL", "SETUSER", USER, "on", f">{PASSWORD}",
                          *acl.rule("worker", ["q*"]).split())
    url = f"redis://{USER}:{PASSWORD}@127.0.0.1:{server.port}/0"
    log = tmp_path / "worker.log"
    with running(url, "--queue", "q", "--handler", f"{HANDLERS}:record_lateness",
                 "--worker-id", "p1", "--heartbeat", "0.5", log_path=log,
                 handler_url=server.url) as proc:
        wait_for("the worker registered", lambda: admin.zscore("q:workers", "p1"), timeout=20)
        with fault(admin):
            time.sleep(1.5)  # the promoter meets the error several times (backoff)
        wait_for("what was due during the fault ran",
                 lambda: not (admin.zcard("q:delayed") or admin.llen("q")
                              or admin.llen("q:processing:p1")), timeout=20)
        admin.delete(test_handlers.LATENESS)
        start = time.time() + 1.0
        payloads = [f"on-time-{i}" for i in range(20)]
        for i, payload in enumerate(payloads):  # one due time per idle sweep phase
            client.enqueue_sync(admin, "q", payload, at=start + 0.1 * i)
        records = wait_for("every scheduled task ran",
                           lambda: _lateness(admin, len(payloads)), timeout=30)
        assert proc.poll() is None
    assert sorted(records) == sorted(payloads)
    # promoted by the promoter (sleeps until the due time, polls every 0.25 s), not left to the
    # dispatcher's idle sweep (once a second: half a second late in the median)
    late = statistics.median(records.values())
    assert late < promoter.POLL_SECONDS, records
    text = log.read_text()
    failures = [line for line in text.splitlines()
                if "promoter thread: promotion failed (" in line]
    assert len(failures) == 1, failures  # logged once for its kind, though met several times
    assert error in failures[0]
    assert "promoter thread: promotion works again after " in text


@pytest.mark.timeout(120)
def test_a_promotion_fault_leaves_the_fetches_alone(
        tmp_path: Path, redis_factory: type[RedisServer]) -> None:
    """Only the promoter promotes: while Redis refuses the promotion (ZRANGEBYSCORE inside
    fetch.lua, a retry due), tasks are fetched and run without one failed fetch; the promoter
    alone meets the error, and the due retry runs once the refusal ends."""
    server = redis_factory()  # type: ignore[call-arg]
    admin = redis.Redis.from_url(server.url, decode_responses=True)
    admin.execute_command("ACL", "SETUSER", USER, "on", f">{PASSWORD}",
                          *acl.rule("worker", ["q*"]).split())
    url = f"redis://{USER}:{PASSWORD}@127.0.0.1:{server.port}/0"
    log = tmp_path / "worker.log"
    with running(url, "--queue", "q", "--handler", f"{HANDLERS}:record", "--worker-id", "p1",
                 "--concurrency", "4", log_path=log, handler_url=server.url) as proc:
        wait_for("the worker registered", lambda: admin.zscore("q:workers", "p1"), timeout=20)
        with refused_inside_fetch_lua(admin):
            for burst in range(3):  # busy, then idle past a sweep, three times
                admin.lpush("q", *[f"b{burst}-{i}" for i in range(20)])
                wait_for("the burst ran", lambda b=burst: admin.llen(test_handlers.DONE)
                         >= 20 * (b + 1), timeout=20)
                time.sleep(1.2)
            assert admin.zcard("q:delayed") == 1  # not promoted while refused
        wait_for("the due task ran after the refusal",
                 lambda: "during-the-fault" in admin.lrange(test_handlers.DONE, 0, -1),
                 timeout=20)
        assert proc.poll() is None
    text = log.read_text()
    assert "dispatch: Redis call failed" not in text, text
    assert "promoter thread: promotion failed (" in text


def _lateness(r: redis.Redis, n: int) -> dict[str, float] | None:
    raw = r.lrange(test_handlers.LATENESS, 0, -1)
    if len(raw) < n:
        return None
    return {rec["payload"]: rec["late"] for rec in map(json.loads, raw)}


# -- every long-lived thread is watched ------------------------------------------------------
def _bug_in(thread_name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original`, but raising a RuntimeError (a bug, not a Redis error) when called from the
    thread named `thread_name`."""
    def call(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == thread_name:
            raise RuntimeError(f"a bug in the {thread_name} thread")
        return original(*args, **kwargs)
    return call


def _plant_heartbeat(worker: Worker) -> None:
    worker.heartbeat.store.heartbeat = _bug_in(  # type: ignore[method-assign]
        "heartbeat", worker.heartbeat.store.heartbeat)


def _plant_promoter(worker: Worker) -> None:
    worker.promoter.store.call = _bug_in("promoter", worker.promoter.store.call)  # type: ignore[method-assign]


def _plant_leases(worker: Worker) -> None:
    assert worker.lease_keeper is not None
    worker.lease_keeper.leases.snapshot = _bug_in(  # type: ignore[method-assign]
        "leases", worker.lease_keeper.leases.snapshot)


def _plant_wakeup(worker: Worker) -> None:
    assert worker.wakeup is not None
    worker.wakeup._maybe_send_arm = _bug_in(  # type: ignore[method-assign]
        "wakeup", worker.wakeup._maybe_send_arm)


def _plant_event_loop(worker: Worker) -> None:
    """The coroutine handlers' event loop thread ends a second after the worker starts."""
    loop = handlers.shared_loop()
    threading.Timer(1.0, loop.call_soon_threadsafe, (loop.stop,)).start()


def _plant_watchdog(worker: Worker) -> None:
    assert worker.watchdog is not None
    worker.watchdog.watch.check = _bug_in(  # type: ignore[method-assign]
        "watchdog", worker.watchdog.watch.check)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("plant", "spec"),
    [
        pytest.param(_plant_heartbeat, {"worker": {"heartbeatSeconds": 0.5}}, id="heartbeat"),
        pytest.param(_plant_promoter, {}, id="promoter"),
        pytest.param(_plant_leases, {"worker": {"idempotency": {"windowSeconds": 60},
                                                "heartbeatSeconds": 0.2}}, id="lease-keeper"),
        pytest.param(_plant_watchdog, {"handler": f"{HANDLERS}:record_async",
                                       "worker": {"taskTimeoutSeconds": 30}}, id="watchdog"),
        pytest.param(_plant_wakeup, {}, id="wake-up-listener"),
        pytest.param(_plant_event_loop,
                     {"handler": f"{HANDLERS}:record_async",
                      "worker": {"concurrency": 2, "terminationGracePeriodSeconds": 2}},
                     id="event-loop"),
    ],
)
def test_a_periodic_thread_ended_by_a_bug_makes_the_worker_exit_non_zero(
        make_worker: MakeWorker, plant: Callable[[Worker], None], spec: dict[str, Any]) -> None:
    """The thread logs the bug and ends; the runner sees it and the worker drains and returns
    EXIT_THREAD_DIED instead of running on without it (a SIGTERM after 20 s ends a worker
    that did not notice)."""
    worker = make_worker(start=False, worker_id="t1", **spec)
    plant(worker)
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    timer = threading.Timer(20, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        assert worker.run_until_signal() == EXIT_THREAD_DIED
    finally:
        timer.cancel()
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        if plant is _plant_event_loop:  # the next test that needs the loop starts a new one
            handlers._loop = handlers._loop_thread = None
    assert worker.stopped.is_set()
