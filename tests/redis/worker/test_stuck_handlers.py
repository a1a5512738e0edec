"""A handler that keeps its worker from working does not strand tasks (`worker/watchdog.py`),
on real worker processes and a real redis-server:

- a coroutine that blocks the event loop past the task timeout: the worker names the handler,
  requeues what it holds and exits with status 4, and another worker runs every task;
- SIGTERM while a coroutine blocks the loop: the drain ends after the grace period;
- threads a handler leaves running: the process still exits after its drain;
- a drain that cannot end (a task still running, Redis refusing writes): the process exits
  once the grace period and a margin are over;
- and what must not trip the watchdog: a paused Redis while the loop fetches, a paused process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from taskqueue.wire import keys
from taskqueue.worker.watchdog import EXIT_STALLED
from tests.helpers import handlers as test_handlers
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import running

HANDLERS = "tests.helpers.handlers"
BLOCKING = f"{HANDLERS}:block_loop_on_first_attempt"
EXIT_WITHIN = 30.0
"""Generous: the worker exits about a second after the limit it broke."""


def _exit_status(proc: subprocess.Popen[bytes], *, within: float, what: str) -> int:
    try:
        return proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the worker was still running {within:g}s after {what}") from None


def _contexts(r: redis.Redis) -> dict[str, int]:
    """payload -> attempt of its run (the last one when it ran twice)."""
    return {c["payload"]: c["attempt"]
            for c in map(json.loads, r.lrange(test_handlers.CONTEXTS, 0, -1))}


@pytest.mark.timeout(120)
def test_a_coroutine_blocking_the_loop_past_the_timeout_ends_the_worker_and_others_run_its_tasks(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    payloads = ["block:600", *[f"t{i}" for i in range(7)]]
    common = ("--queue", "q", "--handler", BLOCKING, "--task-timeout", "1", "--heartbeat", "0.5")
    with running(redis_url, *common, "--concurrency", "4", "--worker-id", "stuck",
                 log_path=tmp_path / "stuck.log") as stuck:
        wait_for("the worker registered", lambda: redis_sync.zscore("q:workers", "stuck"),
                 timeout=20)
        redis_sync.lpush("q", *payloads)  # the blocking one is taken first
        wait_for("the loop is blocked",
                 lambda: redis_sync.lrange(test_handlers.STARTED, 0, -1) == ["block:600"],
                 timeout=20)
        assert _exit_status(stuck, within=EXIT_WITHIN, what="the loop blocked") == EXIT_STALLED
    text = (tmp_path / "stuck.log").read_text()
    (line,) = [ln for ln in text.splitlines() if "has held the event loop" in ln]
    assert f"handler {BLOCKING} has held the event loop for " in line
    assert "past taskTimeoutSeconds 1" in line
    assert "in block_loop_on_first_attempt" in line  # where: the handler's own frame
    assert "must not block" in line
    assert redis_sync.llen("q:processing:stuck") == 0  # requeued before the exit
    with running(redis_url, *common, "--worker-id", "peer", log_path=tmp_path / "peer.log"):
        ran = wait_for("every task ran on the peer",
                       lambda: (c := _contexts(redis_sync)).keys() >= set(payloads) and c,
                       timeout=30)
    assert ran["block:600"] == 2  # the stuck attempt counted: a task that always blocks dies
    assert redis_sync.llen("q:dead") == 0
    assert redis_sync.llen("q") == 0
    assert redis_sync.llen("q:processing:peer") == 0


@pytest.mark.timeout(120)
def test_sigterm_while_a_coroutine_blocks_the_loop_ends_after_the_grace_period(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """No task timeout (the watchdog does not judge the loop), 40 coroutines held behind the
    blocked one: the drain gives them all back once the grace period is over."""
    payloads = ["block:600", *[f"t{i}" for i in range(44)]]
    with running(redis_url, "--queue", "q", "--handler", BLOCKING, "--concurrency", "40",
                 "--grace", "2", "--worker-id", "w1", log_path=tmp_path / "w1.log") as proc:
        wait_for("the worker registered", lambda: redis_sync.zscore("q:workers", "w1"),
                 timeout=20)
        redis_sync.lpush("q", *payloads)
        wait_for("the loop is blocked",
                 lambda: redis_sync.lrange(test_handlers.STARTED, 0, -1) == ["block:600"],
                 timeout=20)
        held = redis_sync.llen("q:processing:w1")
        proc.send_signal(signal.SIGTERM)
        assert _exit_status(proc, within=EXIT_WITHIN, what="SIGTERM") == 0
    assert held > 1
    assert redis_sync.llen("q:processing:w1") == 0
    assert sorted(redis_sync.lrange("q", 0, -1)) == sorted(payloads)  # none lost, none run
    assert "grace period over: gave back" in (tmp_path / "w1.log").read_text()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("handler", "named"),
    [
        pytest.param("start_non_daemon_thread", "'lingering-x'", id="non-daemon-thread"),
        pytest.param("submit_a_long_job", "'handler-pool_0'", id="executor-job"),
    ],
)
def test_threads_a_handler_leaves_running_do_not_keep_the_process_alive(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis, handler: str,
        named: str) -> None:
    log = tmp_path / "w1.log"
    with running(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:{handler}",
                 "--worker-id", "w1", log_path=log) as proc:
        redis_sync.lpush("q", "x")
        wait_for("the task ran", lambda: redis_sync.lrange(test_handlers.DONE, 0, -1) == ["x"],
                 timeout=20)
        wait_for("the task acked", lambda: redis_sync.llen("q:processing:w1") == 0, timeout=10)
        proc.send_signal(signal.SIGTERM)
        assert _exit_status(proc, within=EXIT_WITHIN, what="the drain") == 0
    (line,) = [ln for ln in log.read_text().splitlines() if "still running after the drain" in ln]
    assert named in line
    assert "in _linger" in line


@pytest.mark.timeout(120)
def test_a_paused_redis_or_a_paused_process_does_not_trip_the_watchdog(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """Redis paused longer than the task timeout + margin while coroutines finish and the loop
    makes the fetch itself (the handler never waits for Redis), then the worker process stopped
    as long: it lives on, and every task runs once."""
    # 2.5 s of work at concurrency 4: little gets done while Redis is paused, so tasks are still
    # running when the process is stopped
    payloads = [f"t{i}:0.05" for i in range(200)]
    with running(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:async_sleep",
                 "--concurrency", "4", "--task-timeout", "1", "--worker-id", "w1",
                 log_path=tmp_path / "w1.log") as proc:
        wait_for("the worker registered", lambda: redis_sync.zscore("q:workers", "w1"),
                 timeout=20)
        redis_sync.lpush("q", *payloads)
        pauser = redis.Redis.from_url(redis_url)
        wait_for("the worker is busy", lambda: int(redis_sync.hget("q:stats", "completed") or 0)
                 >= 8, timeout=20)
        pauser.execute_command("CLIENT", "PAUSE", 3500, "ALL")
        time.sleep(4.0)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(3.5)
        proc.send_signal(signal.SIGCONT)
        wait_for("every task ran",
                 lambda: redis_sync.hget("q:stats", "completed") == str(len(payloads)),
                 timeout=60)
        assert proc.poll() is None
    assert "held the event loop" not in (tmp_path / "w1.log").read_text()


@pytest.mark.timeout(120)
def test_a_drain_that_overruns_the_grace_period_ends_the_process(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """A sync handler still running at the end of a 1 s grace period and Redis refusing to
    write (paused), so the give-back cannot finish: the watchdog ends the process with status 4
    once the grace period + its margin are over, and the task is still held for recovery (or was
    given back): never lost, never twice."""
    log = tmp_path / "w1.log"
    with running(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:sleep_then_record",
                 "--grace", "1", "--worker-id", "w1", log_path=log) as proc:
        wait_for("the worker registered", lambda: redis_sync.zscore("q:workers", "w1"),
                 timeout=20)
        redis_sync.lpush("q", "x:600")
        wait_for("the task is held", lambda: redis_sync.llen("q:processing:w1") == 1,
                 timeout=20)
        redis_sync.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
        try:
            proc.send_signal(signal.SIGTERM)
            status = _exit_status(proc, within=25, what="SIGTERM")
        finally:
            redis_sync.execute_command("CLIENT", "UNPAUSE")
        assert status == EXIT_STALLED
    held = [keys.Entry.decode(e).element for e in redis_sync.lrange("q:processing:w1", 0, -1)]
    assert sorted(held + redis_sync.lrange("q", 0, -1)) == ["x:600"]
    (line,) = [ln for ln in log.read_text().splitlines() if "the drain did not end" in ln]
    assert "grace period" in line


@pytest.mark.timeout(90)
def test_a_child_a_handler_forked_and_returned_ends_before_it_touches_redis(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """The handler forks and both processes return from it: the child ends at once (status
    70) instead of running the worker's code on copies of its connections, and the worker goes
    on, every later task run once, by the worker."""
    log = tmp_path / "w1.log"
    payloads = [f"t{i}" for i in range(10)]
    with running(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:fork_or_record_pid",
                 "--worker-id", "w1", log_path=log) as proc:
        redis_sync.lpush("q", "fork")
        (forked,) = wait_for("the forked child ended",
                             lambda: redis_sync.lrange(test_handlers.FORKED, 0, -1), timeout=30)
        try:
            assert forked == "exit:70"
        finally:
            if forked.startswith("running:"):  # the child kept running the worker's code
                os.kill(int(forked.split(":")[1]), signal.SIGKILL)
        redis_sync.lpush("q", *payloads)
        wait_for("every task ran", lambda: sorted(redis_sync.lrange(test_handlers.DONE, 0, -1))
                 == sorted(payloads), timeout=30)
        wait_for("every task acked", lambda: redis_sync.llen("q:processing:w1") == 0, timeout=10)
        assert redis_sync.lrange(test_handlers.PIDS, 0, -1) == [str(proc.pid)] * len(payloads)
        assert proc.poll() is None
    assert "the handler forked and returned in the child process" in log.read_text()
