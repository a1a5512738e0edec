"""What a producer in another language may get wrong never stops a worker or loses a task: a
malformed envelope is dead-lettered unrun with the problem named, a malformed delayed entry is
dead-lettered without touching its queue's key, and the dead-letter list keeps its cap.
In-process workers on a real redis-server."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from taskqueue.wire import keys
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, wait_done

MARK = keys.ENVELOPE_MARK
HANDLERS = "tests.helpers.handlers"
MODES: dict[str, dict[str, Any]] = {
    "sync": {"handler": f"{HANDLERS}:record"},
    "async": {"handler": f"{HANDLERS}:record_async"},
    "idempotent": {"handler": f"{HANDLERS}:record", "worker": {"idempotency": {}}},
    "at-most-once": {"handler": f"{HANDLERS}:record", "delivery": "AtMostOnce"},
}


def _dead(r: redis.Redis, n: int) -> list[dict[str, Any]]:
    wait_for(f"{n} dead letter(s)", lambda: r.llen("q:dead") >= n, timeout=15)
    return [json.loads(x) for x in r.lrange("q:dead", 0, -1)]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(
    ("element", "problem"),
    [
        pytest.param(MARK + '1e999,"enqueued_at":0,"id":"x","payload":"p"}',
                     "attempts is not a count", id="attempts-overflow"),
        pytest.param(MARK + '0,"enqueued_at":0,"id":"x","payload":{"a":1}}',
                     "payload is not a string", id="payload-an-object"),
        pytest.param(MARK + '0,"enqueued_at":1e999,"id":"x","payload":"p"}',
                     "enqueued_at is not a time", id="enqueued-at-infinite"),
        pytest.param(MARK + '0,"enqueued_at":0,"payload":"unterminated',
                     "not valid JSON", id="not-json"),
    ],
)
def test_a_malformed_envelope_is_dead_lettered_unrun(
        redis_sync: redis.Redis, make_worker: MakeWorker, mode: str, element: str,
        problem: str) -> None:
    redis_sync.lpush("q", element, "good")  # the bad one is taken first
    make_worker(sweep=0.05, **MODES[mode])
    assert wait_done(redis_sync, 1) == ["good"]
    [record] = _dead(redis_sync, 1)
    assert record["payload"] == element  # byte for byte: the producer can see what it wrote
    assert record["error"] == f"malformed envelope: {problem}"
    assert (record["queue"], record["attempts"]) == ("q", 0)
    time.sleep(0.3)
    assert redis_sync.lrange("test:done", 0, -1) == ["good"]  # the handler never saw it
    assert redis_sync.llen("q:processing:w1") == 0


def test_scheduled_tasks_keep_running_after_a_scored_entry_for_a_list_queue(
        redis_sync: redis.Redis, make_worker: MakeWorker) -> None:
    """A score on a delayed entry of an empty list queue once made the queue key a zset: the
    worker skipped the queue, and later scheduled tasks were dead-lettered as 'queue is not in
    this TaskQueue any more'."""
    make_worker(sweep=0.05)
    now = int(time.time() * 1000)
    redis_sync.zadd("q:delayed", {"q\n5\nscored by mistake": now})
    [record] = _dead(redis_sync, 1)
    assert record["payload"] == "scored by mistake"
    assert record["error"] == 'list queue q takes no score (got "5")'
    assert redis_sync.type("q") == "none"
    redis_sync.zadd("q:delayed", {"q\n\nscheduled later": now})
    assert wait_done(redis_sync, 1) == ["scheduled later"]
    assert redis_sync.llen("q:dead") == 1


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        pytest.param("no newline", 'entry is not "<queue>\\n<score>\\n<payload>"',
                     id="no-newline"),
        pytest.param("z\nsoon\npayload", 'zset queue z needs a numeric score (got "soon")',
                     id="non-numeric-score"),
        pytest.param("z\n\npayload", 'zset queue z needs a numeric score (got "")',
                     id="empty-score-for-a-zset"),
    ],
)
def test_a_malformed_delayed_entry_is_dead_lettered_and_the_rest_promoted(
        redis_sync: redis.Redis, make_worker: MakeWorker, entry: str, error: str) -> None:
    make_worker(sweep=0.05, queues=[{"key": "q"}, {"key": "z", "type": "zset"}])
    now = int(time.time() * 1000)
    redis_sync.zadd("q:delayed", {entry: now - 1, "q\n\nafter": now, "z\n3\nzz": now})
    assert sorted(wait_done(redis_sync, 2)) == ["after", "zz"]
    [record] = _dead(redis_sync, 1)
    assert record["error"] == error
    assert record["payload"] == ("no newline" if entry == "no newline" else "payload")
    assert redis_sync.type("z") in ("zset", "none") and redis_sync.type("q") in ("list", "none")


def test_the_worker_keeps_the_dead_letter_list_at_its_cap(
        redis_sync: redis.Redis, make_worker: MakeWorker) -> None:
    redis_sync.lpush("q", *[f"t{i}" for i in range(5)])  # t0 is taken first
    make_worker(handler=f"{HANDLERS}:explode", sweep=0.05,
                retry={"maxAttempts": 1, "deadLetterMaxLength": 3})
    wait_for("5 tasks dead", lambda: redis_sync.hget("q:stats", "dead") == "5", timeout=15)
    assert [json.loads(r)["payload"] for r in redis_sync.lrange("q:dead", 0, -1)] == [
        "t4", "t3", "t2"]
    assert redis_sync.hget("q:stats", keys.DEAD_TRIMMED_FIELD) == "2"
