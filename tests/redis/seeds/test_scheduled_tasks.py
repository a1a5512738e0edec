"""Seed 004 §1.2 ("ZSet can do delayed queues") and §5.3 (a ZSet for delay/timeout control):
tasks scheduled with `enqueue(..., delay=/at=)`, `taskqueue enqueue --in/--at`, or a raw ZADD
to the TaskQueue's delayed zset, promoted by the workers when due; real redis-server."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import redis

from taskqueue import client as producer
from taskqueue.cli.enqueue import point_in_time
from taskqueue.cli.numbers import duration
from taskqueue.wire import keys
from taskqueue.worker.promoter import sleep_for
from tests.helpers.cli import Run
from tests.helpers.handlers import CONTEXTS, DONE
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker

RECORD = "tests.helpers.handlers:record_with_context"


def picked_at(r: redis.Redis, payload: str, *, timeout: float = 10) -> float:
    """The wall-clock time the worker ran `payload`."""
    wait_for("the task done", lambda: payload in r.lrange(DONE, 0, -1), timeout=timeout)
    return time.time()


def test_seed_004_1_2_zset_delay_queue_runs_task_when_due(make_worker: MakeWorker,
                                                          redis_sync: redis.Redis) -> None:
    make_worker(handler=RECORD)
    due = time.time() + 1.5
    tid = producer.enqueue_sync(redis_sync, "q", "later", at=due)
    assert redis_sync.zcard("q:delayed") == 1 and redis_sync.llen("q") == 0
    producer.enqueue_sync(redis_sync, "q", "now")
    wait_for("the immediate task done", lambda: "now" in redis_sync.lrange(DONE, 0, -1))
    time.sleep(max(0.0, due - time.time() - 0.3))
    assert "later" not in redis_sync.lrange(DONE, 0, -1)  # not before it is due
    ran = picked_at(redis_sync, "later")
    assert ran - due < 1.0, f"promoted {ran - due:.2f}s late"
    ctx = next(c for c in redis_sync.lrange(CONTEXTS, 0, -1) if '"later"' in c)
    assert tid in ctx and '"attempt": 1' in ctx  # scheduling is not an attempt


def test_seed_004_5_3_scheduled_task_of_a_zset_queue_keeps_its_priority(
        make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    """Promoted into its zset with its priority score, then served by priority: the scheduled
    p1 (due by now) comes before the p5 that waited in the zset all along."""
    producer.enqueue_sync(redis_sync, "jobs", "p1", priority=1, delay=0.3, key_prefix="jobs")
    redis_sync.zadd("jobs", {keys.wrap("p5"): 5})
    assert redis_sync.zcard("jobs:delayed") == 1
    time.sleep(0.4)
    make_worker(handler=RECORD, queues=[{"key": "jobs", "type": "zset"}])
    wait_for("2 tasks done", lambda: len(redis_sync.lrange(DONE, 0, -1)) == 2, timeout=5)
    assert redis_sync.lrange(DONE, 0, -1) == ["p1", "p5"]


def test_seed_004_1_2_raw_zadd_recipe(make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    """The docs' recipe for any language:
    ZADD <prefix>:delayed <due ms> "<queue>\\n\\n<payload>"."""
    make_worker(handler="tests.helpers.handlers:record", queues=[{"key": "vip"}, {"key": "q"}],
                keyPrefix="app")
    due_ms = int((time.time() + 0.5) * 1000)
    redis_sync.zadd("app:delayed", {"q\n\nraw payload": due_ms})
    ran = picked_at(redis_sync, "raw payload")
    assert ran * 1000 >= due_ms
    assert ran * 1000 - due_ms < 1000


def test_scheduled_task_wakes_an_idle_worker_with_a_long_sweep(
        make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    """Promotion does not wait for the idle sweep: the promoter thread promotes on time."""
    make_worker(handler=RECORD, sweep=30.0)
    time.sleep(0.3)
    due = time.time() + 0.7
    producer.enqueue_sync(redis_sync, "q", "on-time", at=due)
    assert picked_at(redis_sync, "on-time") - due < 1.0


def test_cli_in_and_at(cli: Run, manifest_file: Callable[..., str],
                       redis_sync: redis.Redis) -> None:
    path = manifest_file([{"key": "vip"}, {"key": "normal"}])
    before = time.time()
    result = cli("enqueue", "-f", path, "normal", "--in", "30s", "a", "b")
    assert result.code == 0, result.err
    assert "vip:delayed (scheduled)" in result.err
    members = redis_sync.zrange("vip:delayed", 0, -1, withscores=True)
    assert len(members) == 2
    for member, score in members:
        entry = keys.Entry.decode(member)
        assert entry.queue == "normal" and entry.score == ""
        assert before + 30 <= score / 1000 <= time.time() + 30
    assert sorted(keys.unwrap(keys.Entry.decode(m).element).id for m, _ in members) == \
        sorted(result.out.split())
    at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    assert cli("enqueue", "-f", path, "vip", "--at", at.isoformat(), "c").code == 0
    assert redis_sync.zscore("vip:delayed", redis_sync.zrange("vip:delayed", -1, -1)[0]) == \
        at.timestamp() * 1000


def test_cli_in_and_at_are_exclusive(cli: Run, redis_url: str) -> None:
    with pytest.raises(SystemExit):
        cli("enqueue", "--redis-url", redis_url, "q", "--in", "5s", "--at", "0", "x")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("30s", 30.0, id="seconds"),
        pytest.param("5m", 300.0, id="minutes"),
        pytest.param("2h", 7200.0, id="hours"),
        pytest.param("1d", 86400.0, id="days"),
        pytest.param("1.5", 1.5, id="plain-number"),
    ],
)
def test_duration(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "-3s", "1w", "s"])
def test_duration_rejects(text: str) -> None:
    with pytest.raises(Exception, match="is not a duration"):
        duration(text)


@pytest.mark.parametrize(
    ("text", "unix"),
    [
        pytest.param("2026-12-01T12:00:00Z", 1796126400.0, id="iso-z"),
        pytest.param("2026-12-01T12:00:00", 1796126400.0, id="iso-naive-is-utc"),
        pytest.param("2026-12-01T13:00:00+01:00", 1796126400.0, id="iso-offset"),
        pytest.param("1796126400", 1796126400.0, id="unix-seconds"),
    ],
)
def test_point_in_time(text: str, unix: float) -> None:
    assert point_in_time(text) == unix


def test_point_in_time_rejects() -> None:
    with pytest.raises(Exception, match="is not a time"):
        point_in_time("tomorrow")


@pytest.mark.parametrize(
    ("delay", "at", "due"),
    [
        pytest.param(None, None, None, id="neither"),
        pytest.param(2.5, None, 1002500, id="delay-seconds"),
        pytest.param(timedelta(seconds=1), None, 1001000, id="delay-timedelta"),
        pytest.param(None, 1003.0, 1003000, id="at-unix"),
        pytest.param(None, datetime.fromtimestamp(1004, UTC), 1004000, id="at-datetime"),
        pytest.param(None, 999.0, None, id="at-in-the-past-pushes-now"),
        pytest.param(0, None, None, id="zero-delay-pushes-now"),
    ],
)
def test_due_ms(delay: float | timedelta | None, at: float | datetime | None,
                due: int | None) -> None:
    assert producer.due_ms(delay=delay, at=at, now=1000.0) == due


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"delay": 1, "at": 5.0}, "not both", id="both"),
        pytest.param({"delay": -1}, r"delay=-1: give seconds from 0 to", id="negative"),
    ],
)
def test_due_ms_rejects(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        producer.due_ms(now=1000.0, **{"delay": None, "at": None, **kwargs})


@pytest.mark.parametrize(
    ("next_due", "now", "wait"),
    [
        pytest.param(None, 1000, 0.25, id="empty-polls"),
        pytest.param(1100.0, 1000, 0.1, id="due-soon"),
        pytest.param(900.0, 1000, 0.0, id="overdue"),
        pytest.param(60000.0, 1000, 0.25, id="far-capped-by-poll"),
    ],
)
def test_promoter_sleep(next_due: float | None, now: int, wait: float) -> None:
    assert sleep_for(next_due, now) == pytest.approx(wait)


def test_example_scheduled_producer_runs(redis_url: str, redis_sync: redis.Redis) -> None:
    """examples/scheduled_producer.py against a real Redis: one task now, one in 30 s, and one
    reminder for three unique calls."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[3] / "examples" / "scheduled_producer.py"
    spec = importlib.util.spec_from_file_location("scheduled_producer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(redis_url)
    assert redis_sync.llen("payments") == 1
    assert redis_sync.zcard("payments:delayed") == 2
    assert redis_sync.exists("payments:unique:reminder-41")


def test_cli_without_a_manifest_uses_key_prefix(cli: Run, redis_url: str,
                                                redis_sync: redis.Redis) -> None:
    assert cli("enqueue", "--redis-url", redis_url, "--key-prefix", "app", "jobs", "--in", "1m",
               "x").code == 0
    assert redis_sync.zcard("app:delayed") == 1
    assert cli("enqueue", "--redis-url", redis_url, "jobs", "--in", "1m", "y").code == 0
    assert redis_sync.zcard("jobs:delayed") == 1  # default prefix: the queue key


@pytest.mark.parametrize(
    ("kwargs", "target", "how", "score", "queue_score"),
    [
        pytest.param({}, "q", "lpush", 0, None, id="plain-list"),
        pytest.param({"priority": 4.0}, "q", "zadd", 4.0, None, id="plain-zset"),
        pytest.param({"delay": 10}, "app:delayed", "zadd", 1_010_000, "", id="scheduled-list"),
        pytest.param({"delay": 10, "priority": 2.5}, "app:delayed", "zadd", 1_010_000, "2.5",
                     id="scheduled-zset-keeps-priority"),
    ],
)
def test_plan(kwargs: dict[str, float], target: str, how: str, score: float,
              queue_score: str | None) -> None:
    push = producer.plan("q", "p", task_id="t1", key_prefix="app", now=1000.0, **kwargs)
    assert (push.target, push.how, push.score, push.task_id) == (target, how, score, "t1")
    assert push.script == (target != "q")
    if queue_score is not None:
        entry = keys.Entry.decode(push.element)
        assert (entry.queue, entry.score, keys.unwrap(entry.element).payload) == (
            "q", queue_score, "p")


@pytest.mark.parametrize(("kwargs", "enqueued_at"), [
    pytest.param({}, 1000.0, id="now"),
    pytest.param({"delay": 10}, 1010.0, id="scheduled-queued-from-its-due-time"),
    pytest.param({"at": 900.0}, 1000.0, id="due-in-the-past-queued-now"),
])
def test_a_tasks_wait_starts_when_it_is_due(kwargs: dict[str, float],
                                            enqueued_at: float) -> None:
    # the wait the workers measure (and the age of the oldest task) starts at enqueued_at
    push = producer.plan("q", "p", key_prefix="app", now=1000.0, **kwargs)
    element = keys.Entry.decode(push.element).element if push.how == "zadd" else push.element
    assert keys.unwrap(element).enqueued_at == enqueued_at


def test_plan_unique_without_id_uses_the_content_id() -> None:
    push = producer.plan("q", "same", unique_for=5, key_prefix="app", now=1000.0)
    assert push.task_id == keys.content_id("same") and push.script
    assert (push.unique_key, push.unique_ms) == (f"app:unique:{push.task_id}", 5000)
