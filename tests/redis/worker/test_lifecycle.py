"""One task by id, on real worker processes and a real redis-server: `client.status` follows it
(queued, delayed, running with its progress, done, cancelled), `client.cancel` stops a running
task in each handler kind (never retried; the worker takes its next task) and keeps a queued
one from ever starting; a tracked task held by a SIGKILLed worker shows its new state once
recovered (by the operator's call, or by another worker's heartbeat)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path

import pytest
import redis

from taskqueue import client
from taskqueue.redisio import clients, queueops
from taskqueue.wire import keys, lifecycle
from taskqueue.worker import lifecycle as lifecycle_thread
from tests.helpers import handlers as h
from tests.helpers.cli import Run
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import running

Q = "q"
SCHEMA = keys.KeySchema(prefix=Q, queues=(keys.QueueRef(Q),), dead_letter=f"{Q}:dead")

HANDLER_KINDS = {
    "sync": ["--handler", "tests.helpers.handlers:until_cancelled"],
    "async": ["--handler", "tests.helpers.handlers:async_until_cancelled", "--concurrency", "2"],
    "command": ["--command", sys.executable,
                str(Path(h.__file__).with_name("until_cancelled_cmd.py"))],
}


def status(r: redis.Redis, task_id: str) -> lifecycle.TaskStatus:
    return client.status_sync(r, task_id, key_prefix=Q)


def started(r: redis.Redis, task_id: str) -> bool:
    return task_id in r.lrange(h.STARTED, 0, -1)


def stat(r: redis.Redis, field: str) -> int:
    return int(r.hget(SCHEMA.stats, field) or 0)


@pytest.mark.parametrize("kind", list(HANDLER_KINDS))
def test_a_cancelled_running_task_stops_is_not_retried_and_the_worker_goes_on(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path, kind: str) -> None:
    with running(redis_url, "--queue", Q, "--tracking", *HANDLER_KINDS[kind],
                 log_path=tmp_path / "worker.log"):
        long = client.enqueue_sync(redis_sync, Q, "long", track=True)
        wait_for("the long task to start", lambda: started(redis_sync, long))
        seen = wait_for("the task running in status", lambda: (
            s := status(redis_sync, long)).state == "running" and s)
        assert seen.worker and seen.worker_alive and seen.attempt == 1 and seen.queue == Q

        result = client.cancel_sync(redis_sync, long, key_prefix=Q)
        assert result.recorded and result.state == "running" and result.workers_told == 1

        wait_for("the cancel to be counted", lambda: stat(redis_sync, "cancelled") == 1)
        assert status(redis_sync, long).state == "cancelled"
        assert redis_sync.llen(SCHEMA.processing_prefix + seen.worker) == 0
        quick = client.enqueue_sync(redis_sync, Q, "quick", track=True)
        wait_for("the next task to be done", lambda: status(redis_sync, quick).state == "done")
    assert redis_sync.lrange(h.DONE, 0, -1) == ["quick"]  # "long" never finished
    assert redis_sync.zcard(SCHEMA.delayed) == 0 and redis_sync.llen(SCHEMA.dead_letter) == 0
    assert redis_sync.zcard(SCHEMA.cancels) == 0
    assert stat(redis_sync, "retried") == 0 and stat(redis_sync, "failed") == 0
    if kind != "command":
        assert redis_sync.lrange(h.CANCELLED, 0, -1) == [long]


@pytest.mark.parametrize("delayed", [False, True], ids=["queued", "delayed"])
def test_a_task_cancelled_before_it_runs_is_never_started(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path, delayed: bool,
        cli: Run) -> None:
    doomed = client.enqueue_sync(redis_sync, Q, "doomed", track=True,
                                 delay=0.5 if delayed else None)
    assert status(redis_sync, doomed).state == ("delayed" if delayed else "queued")
    result = client.cancel_sync(redis_sync, doomed, key_prefix=Q)
    assert result.recorded and result.workers_told == 0
    assert status(redis_sync, doomed).state == "cancelling"
    after = client.enqueue_sync(redis_sync, Q, "quick", track=True, delay=1 if delayed else None)
    with running(redis_url, "--queue", Q, "--tracking", *HANDLER_KINDS["sync"],
                 log_path=tmp_path / "worker.log"):
        wait_for("the task after it to be done", lambda: status(redis_sync, after).state == "done")
    assert not started(redis_sync, doomed)
    assert status(redis_sync, doomed).state == "cancelled"
    assert stat(redis_sync, "cancelled") == 1 and redis_sync.zcard(SCHEMA.cancels) == 0
    shown = cli("stats", "--redis-url", redis_url, "--queue", Q, "--json", "--interval", "0")
    assert json.loads(shown.out)["cancelled_total"] == 1


def test_a_worker_that_saw_no_cancel_for_a_while_still_never_starts_a_cancelled_queued_task(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    """A worker that has run for a while with no cancel in the zset (fetch.lua reads the zset
    only when it exists; the lifecycle thread read it once, when it subscribed) still drops the
    task queued behind the running one unrun: the cancel exists by the next fetch."""
    with running(redis_url, "--queue", Q, "--tracking", *HANDLER_KINDS["sync"],
                 log_path=tmp_path / "worker.log"):
        long = client.enqueue_sync(redis_sync, Q, "long", track=True)
        wait_for("the long task to start", lambda: started(redis_sync, long))
        time.sleep(1.5 * lifecycle_thread.WATCH_SECONDS)  # it has read the zset: empty
        doomed = client.enqueue_sync(redis_sync, Q, "doomed", track=True)
        told = client.cancel_sync(redis_sync, doomed, key_prefix=Q)
        assert told.recorded and told.state == "queued" and told.workers_told == 1
        assert client.cancel_sync(redis_sync, long, key_prefix=Q).recorded
        quick = client.enqueue_sync(redis_sync, Q, "quick", track=True)
        wait_for("the task after them to be done",
                 lambda: status(redis_sync, quick).state == "done")
    assert not started(redis_sync, doomed)
    assert status(redis_sync, doomed).state == "cancelled"
    assert stat(redis_sync, "cancelled") == 2 and redis_sync.zcard(SCHEMA.cancels) == 0
    assert redis_sync.lrange(h.DONE, 0, -1) == ["quick"]


def test_many_tasks_enqueued_tracked_are_followed_from_queued_to_done(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    """`enqueue_many_sync(track=True)` and the asyncio `enqueue_many(track=True)` index every
    task with its push (as `enqueue --track`), in order; untracked, the index knows nothing."""
    ids = client.enqueue_many_sync(redis_sync, Q, ["a", "b", "c"], track=True)

    async def push_async() -> list[str]:
        r = clients.async_client(clients.RedisSettings.from_dsn(redis_url))
        try:
            return await client.enqueue_many(r, Q, ["d", "e"], track=True, key_prefix=Q)
        finally:
            await r.aclose()

    ids += asyncio.run(push_async())
    plain = client.enqueue_many_sync(redis_sync, Q, ["f"])
    assert [(s.state, s.queue, s.tracked) for s in map(lambda i: status(redis_sync, i), ids)] == [
        ("queued", Q, True)] * 5
    assert not status(redis_sync, plain[0]).tracked
    assert [keys.unwrap(e).payload for e in reversed(redis_sync.lrange(Q, 0, -1))] == list(
        "abcdef")  # served in the order pushed
    with running(redis_url, "--queue", Q, "--tracking", "--handler",
                 "tests.helpers.handlers:record", log_path=tmp_path / "worker.log"):
        wait_for("every task done", lambda: all(
            status(redis_sync, i).state == "done" for i in ids))
    assert redis_sync.lrange(h.DONE, 0, -1) == list("abcdef")


def test_status_of_a_dead_task_shows_its_dead_letter_record(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path, cli: Run) -> None:
    task = client.enqueue_sync(redis_sync, Q, "doomed payload", track=True)
    with running(redis_url, "--queue", Q, "--tracking", "--max-attempts", "1", "--handler",
                 "tests.helpers.handlers:always_fail", log_path=tmp_path / "worker.log"):
        wait_for("the task dead-lettered", lambda: status(redis_sync, task).state == "dead")
    shown = cli("status", task, "--redis-url", redis_url, "--queue", Q).out
    lines = shown.splitlines()
    assert "state: dead" in lines and f"queue: {Q}" in lines and "attempts: 1" in lines, shown
    assert "error: ValueError: this handler fails every task" in lines, shown
    assert 'payload: "doomed payload"' in lines, shown
    [failed] = [line for line in lines if line.startswith("failed at: ")]
    assert failed.endswith(" ago)") and "T" in failed and "Z (" in failed, failed
    data = cli("status", task, "--redis-url", redis_url, "--queue", Q, "--json").json()
    [pushed] = redis_sync.lrange(SCHEMA.dead_letter, 0, -1)
    assert data["record"] == json.loads(pushed) and data["record"]["id"] == task
    assert (data["state"], data["attempt"], data["queue"]) == ("dead", 1, Q)


def test_status_and_inflight_follow_a_task_with_its_progress(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path, cli: Run) -> None:
    assert status(redis_sync, "no-such-id").state == "unknown"
    task = client.enqueue_sync(redis_sync, Q, "long", track=True)
    queued = status(redis_sync, task)
    assert (queued.state, queued.queue, queued.tracked) == ("queued", Q, True)
    with running(redis_url, "--queue", Q, "--tracking", *HANDLER_KINDS["sync"],
                 log_path=tmp_path / "worker.log"):
        seen = wait_for("the progress report", lambda: (
            s := status(redis_sync, task)).progress is not None and s)
        assert seen.state == "running" and seen.progress is not None
        assert (seen.progress.fraction, seen.progress.message) == (0.25, "a quarter")
        shown = cli("status", task, "--redis-url", redis_url, "--queue", Q)
        assert "progress: 25% a quarter (" in shown.out, shown.out
        held = cli("inflight", "--redis-url", redis_url, "--queue", Q, "--json").json()
        [report] = [t["progress"] for h in held for t in h["tasks"] if t["id"] == task]
        assert (report["fraction"], report["message"]) == (0.25, "a quarter")
        client.cancel_sync(redis_sync, task, key_prefix=Q)
        wait_for("the progress report to go", lambda: not redis_sync.hlen(
            SCHEMA.progress(seen.worker)))
    again = client.cancel_sync(redis_sync, task, key_prefix=Q)
    assert not again.recorded and again.state == "cancelled"


@pytest.mark.slow
def test_a_progress_report_made_once_stays_while_the_task_runs(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    """The handler reports 25 % once, then works on: the report outlives the progress hash's
    TTL (three heartbeats, at least 10 s) because the worker keeps it while the task runs."""
    task = client.enqueue_sync(redis_sync, Q, "long", track=True)
    with running(redis_url, "--queue", Q, "--tracking", *HANDLER_KINDS["sync"],
                 log_path=tmp_path / "worker.log"):
        seen = wait_for("the progress report", lambda: (
            s := status(redis_sync, task)).progress is not None and s)
        key = SCHEMA.progress(seen.worker)
        ttl = redis_sync.pttl(key)
        assert ttl > 0, ttl
        time.sleep(ttl / 1000 + 1)  # past the TTL the report was written with
        still = status(redis_sync, task)
        assert still.state == "running" and still.progress is not None
        assert (still.progress.fraction, still.progress.message) == (0.25, "a quarter")
        client.cancel_sync(redis_sync, task, key_prefix=Q)
        wait_for("the progress report to go", lambda: not redis_sync.hlen(key))


def test_without_tracking_a_running_task_is_still_cancelled(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    with running(redis_url, "--queue", Q, *HANDLER_KINDS["sync"],
                 log_path=tmp_path / "worker.log"):
        task = client.enqueue_sync(redis_sync, Q, "long")
        wait_for("the task to start", lambda: started(redis_sync, task))
        assert status(redis_sync, task).state == "unknown"  # no index, no idempotency
        client.cancel_sync(redis_sync, task, key_prefix=Q)
        wait_for("the cancel to be counted", lambda: stat(redis_sync, "cancelled") == 1)
    assert redis_sync.lrange(h.CANCELLED, 0, -1) == [task]
    assert not redis_sync.keys(f"{Q}:task:*")


def _killed_holding(redis_url: str, r: redis.Redis, task: str, log_path: Path) -> None:
    """A worker "doomed" takes `task` and is SIGKILLed while running it."""
    with running(redis_url, "--queue", Q, "--tracking", "--worker-id", "doomed",
                 "--heartbeat", "0.5", *HANDLER_KINDS["sync"], log_path=log_path) as proc:
        wait_for("the task to run on doomed", lambda: status(r, task).worker == "doomed")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert r.llen(SCHEMA.processing("doomed")) == 1
    assert status(r, task).state == "running"


async def _operator_recovers(redis_url: str) -> tuple[int, int]:
    """The reaper's call (controller/reaper.py) for a gone pod of a TaskQueue with tracking."""
    aclient = clients.async_client(clients.RedisSettings.from_dsn(redis_url))
    try:
        return await queueops.recover_worker(aclient, SCHEMA, worker_id="doomed",
                                             max_attempts=5, reason="pod doomed gone",
                                             tracking=True)
    finally:
        await aclient.aclose()


def test_a_task_of_a_killed_worker_recovered_by_the_operator_shows_queued_then_runs_again(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    task = client.enqueue_sync(redis_sync, Q, "long", track=True)
    _killed_holding(redis_url, redis_sync, task, tmp_path / "doomed.log")
    assert asyncio.run(_operator_recovers(redis_url)) == (1, 0)
    requeued = status(redis_sync, task)
    assert (requeued.state, requeued.queue, requeued.worker) == ("queued", Q, "")
    with running(redis_url, "--queue", Q, "--tracking", "--worker-id", "heir",
                 *HANDLER_KINDS["sync"], log_path=tmp_path / "heir.log"):
        again = wait_for("the task to run again", lambda: (
            s := status(redis_sync, task)).worker == "heir" and s)
        assert (again.state, again.attempt) == ("running", 2)
        client.cancel_sync(redis_sync, task, key_prefix=Q)
        wait_for("the cancel", lambda: status(redis_sync, task).state == "cancelled")


def test_a_task_of_a_killed_worker_recovered_by_a_peers_heartbeat_shows_queued(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path, cli: Run) -> None:
    task = client.enqueue_sync(redis_sync, Q, "long", track=True)
    _killed_holding(redis_url, redis_sync, task, tmp_path / "doomed.log")
    paused = cli("pause", Q, "--redis-url", redis_url, "--queue", Q)
    assert paused.code == 0, paused.err
    # the peer takes nothing from the paused queue, so the recovered task stays queued
    with running(redis_url, "--queue", Q, "--tracking", "--worker-id", "peer",
                 "--heartbeat", "0.5", *HANDLER_KINDS["sync"], log_path=tmp_path / "peer.log"):
        wait_for("the peer to recover doomed", lambda: not redis_sync.llen(
            SCHEMA.processing("doomed")))
        requeued = status(redis_sync, task)
        assert (requeued.state, requeued.queue, requeued.worker) == ("queued", Q, "")
        assert redis_sync.llen(Q) == 1
        resumed = cli("resume", Q, "--redis-url", redis_url, "--queue", Q)
        assert resumed.code == 0, resumed.err
        again = wait_for("the task to run again", lambda: (
            s := status(redis_sync, task)).worker == "peer" and s)
        assert (again.state, again.attempt) == ("running", 2)
        client.cancel_sync(redis_sync, task, key_prefix=Q)
        wait_for("the cancel", lambda: status(redis_sync, task).state == "cancelled")


AT_MOST_ONCE = ["--delivery", "AtMostOnce", "--tracking", *HANDLER_KINDS["sync"]]


def test_at_most_once_a_cancelled_running_task_stops_and_status_follows(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    with running(redis_url, "--queue", Q, *AT_MOST_ONCE, log_path=tmp_path / "worker.log"):
        long = client.enqueue_sync(redis_sync, Q, "long", track=True)
        seen = wait_for("the task running in status", lambda: (
            s := status(redis_sync, long)).state == "running" and s)
        assert seen.worker and seen.attempt == 1
        assert client.cancel_sync(redis_sync, long, key_prefix=Q).recorded
        wait_for("the cancel", lambda: status(redis_sync, long).state == "cancelled")
        quick = client.enqueue_sync(redis_sync, Q, "quick", track=True)
        wait_for("the next task to be done", lambda: status(redis_sync, quick).state == "done")
    assert redis_sync.lrange(h.CANCELLED, 0, -1) == [long]
    assert stat(redis_sync, "cancelled") == 1 and redis_sync.zcard(SCHEMA.cancels) == 0
    assert redis_sync.zcard(SCHEMA.delayed) == 0 and redis_sync.llen(SCHEMA.dead_letter) == 0


@pytest.mark.parametrize("tracking", [True, False], ids=["tracking", "off"])
def test_at_most_once_a_task_cancelled_while_queued_is_never_started(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path, tracking: bool) -> None:
    doomed = client.enqueue_sync(redis_sync, Q, "doomed", track=tracking)
    assert client.cancel_sync(redis_sync, doomed, key_prefix=Q).recorded
    after = client.enqueue_sync(redis_sync, Q, "quick", track=tracking)
    argv = AT_MOST_ONCE if tracking else [a for a in AT_MOST_ONCE if a != "--tracking"]
    with running(redis_url, "--queue", Q, *argv, log_path=tmp_path / "worker.log"):
        wait_for("the task after it to run", lambda: redis_sync.lrange(h.DONE, 0, -1))
        wait_for("the cancel to be counted", lambda: stat(redis_sync, "cancelled") == 1)
    assert not started(redis_sync, doomed)
    assert redis_sync.zcard(SCHEMA.cancels) == 0
    if tracking:
        assert status(redis_sync, doomed).state == "cancelled"
        assert status(redis_sync, after).state == "done"


def test_cancel_with_idempotent_consumption_leaves_the_id_free_to_run_again(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    """Without the task index, status reads the idempotency markers: the running lease names
    the worker (alive), a cancel drops the lease and leaves no done marker, so the same id
    enqueued again runs and is then known as done."""
    with running(redis_url, "--queue", Q, "--idempotency-window", "60", "--worker-id", "idem",
                 *HANDLER_KINDS["sync"], log_path=tmp_path / "worker.log"):
        long = client.enqueue_sync(redis_sync, Q, "long", task_id="job-1")
        wait_for("the task to start", lambda: started(redis_sync, long))
        seen = status(redis_sync, long)
        assert (seen.state, seen.worker, seen.worker_alive, seen.tracked) == (
            "running", "idem", True, False)
        assert client.cancel_sync(redis_sync, long, key_prefix=Q).recorded
        wait_for("the cancel to be counted", lambda: stat(redis_sync, "cancelled") == 1)
        wait_for("the lease to be dropped", lambda: not redis_sync.exists(SCHEMA.running(long)))
        assert not redis_sync.exists(SCHEMA.done(long))
        assert status(redis_sync, long).state == "unknown"
        again = client.enqueue_sync(redis_sync, Q, "quick", task_id="job-1")
        wait_for("the id to run again", lambda: redis_sync.lrange(h.DONE, 0, -1) == ["quick"])
        wait_for("the done marker", lambda: status(redis_sync, again).state == "done")
    assert stat(redis_sync, "duplicates") == 0 and stat(redis_sync, "retried") == 0


def test_a_unique_task_cancelled_while_queued_is_not_pushed_again_within_its_window(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    task = client.enqueue_sync(redis_sync, Q, "doomed", task_id="job-2", unique_for=60,
                               track=True)
    assert client.cancel_sync(redis_sync, task, key_prefix=Q).recorded
    same = client.enqueue_sync(redis_sync, Q, "doomed", task_id="job-2", unique_for=60,
                               track=True)
    assert same == task and redis_sync.llen(Q) == 1  # the unique no-op pushed nothing
    assert status(redis_sync, task).state == "cancelling"
    after = client.enqueue_sync(redis_sync, Q, "quick", track=True)
    with running(redis_url, "--queue", Q, "--tracking", *HANDLER_KINDS["sync"],
                 log_path=tmp_path / "worker.log"):
        wait_for("the task after it", lambda: status(redis_sync, after).state == "done")
    assert not started(redis_sync, task)
    assert status(redis_sync, task).state == "cancelled" and stat(redis_sync, "cancelled") == 1
