"""The lifecycle hooks of the scripts on a real redis-server: fetch.lua drops cancelled tasks
(whatever the envelope's field order or id escapes), tracks taken and acked ones, and leaves raw
payloads alone; fail.lua tracks retries and dead letters; recover.lua, release.lua and the
promotion index what they put back or dead-letter; an index key of another type is left alone."""

from __future__ import annotations

import json

import pytest
import redis

from taskqueue import client
from taskqueue.redisio import queueops
from taskqueue.wire import keys, scripts

SCHEMA = keys.KeySchema(prefix="q", queues=(keys.QueueRef("q"),), dead_letter="q:dead")


def fetch(r: redis.Redis, *, count: int, acks: tuple[str, ...] = (),
          tracking: bool = True) -> list[str]:
    return list(queueops.script("fetch").sync(
        r, keys=scripts.fetch_keys(SCHEMA, "w"),
        args=scripts.fetch_args(SCHEMA, now_ms=None, count=count, hold=True, acks=acks,
                                 tracking=tracking)))


ENVELOPES = [
    pytest.param(keys.wrap("p", task_id="t1"), "t1", id="as-the-client-writes-it"),
    pytest.param('{"__taskqueue__":1,"attempts":0,"payload":"p","id":"t1","enqueued_at":1}',
                 "t1", id="fields-reordered"),
    pytest.param(keys.wrap("p", task_id='t"1'), 't"1', id="id-with-an-escape"),
    pytest.param(keys.wrap('x","id":"t1', task_id="t2"), "t2", id="payload-mimics-an-id"),
]


@pytest.mark.parametrize(("element", "task_id"), ENVELOPES)
def test_fetch_drops_a_cancelled_task_and_counts_it(redis_sync: redis.Redis, element: str,
                                                    task_id: str) -> None:
    redis_sync.lpush("q", "raw", keys.wrap("other", task_id="t3"), element)
    redis_sync.zadd(SCHEMA.cancels, {task_id: 2**40})
    taken = fetch(redis_sync, count=10)
    assert sorted(keys.unwrap(keys.Entry.decode(e).element).payload for e in taken) == [
        "other", "raw"]
    assert redis_sync.hget(SCHEMA.stats, "cancelled") == "1"
    assert redis_sync.zcard(SCHEMA.cancels) == 0
    assert redis_sync.hget(SCHEMA.task(task_id), "state") == "cancelled"
    assert redis_sync.llen(SCHEMA.processing("w")) == 2


def _calls(r: redis.Redis) -> dict[str, int]:
    """Calls per command so far (INFO commandstats; Lua's redis.call counted too)."""
    return {name.removeprefix("cmdstat_"): int(stat["calls"])
            for name, stat in r.info("commandstats").items()}


def test_a_fetch_reads_the_cancels_zset_only_while_it_exists(redis_sync: redis.Redis) -> None:
    """No cancel pending (no cancels zset, no flow hash): one EXISTS is all fetch.lua spends on
    them, no TYPE or ZSCORE of the cancels; once a cancel is recorded the next fetch drops the
    cancelled task (no worker flag to wait for)."""
    redis_sync.lpush("q", keys.wrap("p", task_id="t1"))
    before = _calls(redis_sync)
    assert [keys.unwrap(keys.Entry.decode(e).element).id
            for e in fetch(redis_sync, count=1)] == ["t1"]
    after = _calls(redis_sync)
    spent = {c: after.get(c, 0) - before.get(c, 0) for c in ("exists", "zscore", "zcard")}
    assert spent == {"exists": 1, "zscore": 0, "zcard": 0}, spent
    redis_sync.lpush("q", keys.wrap("p", task_id="t2"), keys.wrap("p", task_id="t3"))
    redis_sync.zadd(SCHEMA.cancels, {"t2": 2**40})
    assert [keys.unwrap(keys.Entry.decode(e).element).id
            for e in fetch(redis_sync, count=2)] == ["t3"]
    assert redis_sync.hget(SCHEMA.stats, "cancelled") == "1"


def test_fetch_tracks_taken_and_acked_tasks_and_fail_tracks_retries(
        redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", keys.wrap("a", task_id="ta"), keys.wrap("b", task_id="tb"))
    a, b = fetch(redis_sync, count=2)
    index = redis_sync.hgetall(SCHEMA.task("ta"))
    assert (index["state"], index["queue"], index["attempt"]) == ("running", "q", "1")
    assert index["processing"] == SCHEMA.processing("w")
    assert 0 < redis_sync.pttl(SCHEMA.task("ta")) <= 86_400_000
    fetch(redis_sync, count=0, acks=(a,))
    assert redis_sync.hget(SCHEMA.task("ta"), "state") == "done"
    task = keys.unwrap(keys.Entry.decode(b).element)
    retry = keys.Entry("q", "", keys.rewrap(task, attempts=1)).encode()
    queueops.script("fail").sync(redis_sync, keys=[
        SCHEMA.processing("w"), SCHEMA.delayed, SCHEMA.dead_letter, SCHEMA.stats,
        SCHEMA.flow_state],
        args=["1", b, "retry", retry, 12345, 100, SCHEMA.task_prefix])
    assert redis_sync.hgetall(SCHEMA.task("tb"))["state"] == "delayed"
    assert redis_sync.hget(SCHEMA.task("tb"), "due") == "12345"
    redis_sync.lpush("q", keys.wrap("c", task_id="tc"))
    [c] = fetch(redis_sync, count=1)
    record = keys.dead_letter_record(entry=keys.Entry.decode(c), task=keys.unwrap(
        keys.Entry.decode(c).element), attempts=1, error="ValueError: bad input")
    queueops.script("fail").sync(redis_sync, keys=[
        SCHEMA.processing("w"), SCHEMA.delayed, SCHEMA.dead_letter, SCHEMA.stats,
        SCHEMA.flow_state], args=["1", c, "dead", record, 0, 100, SCHEMA.task_prefix])
    dead = client.status_sync(redis_sync, "tc", key_prefix="q")
    assert (dead.state, dead.error) == ("dead", "ValueError: bad input")


def test_without_tracking_nothing_is_indexed(redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", keys.wrap("a", task_id="ta"))
    [a] = fetch(redis_sync, count=1, tracking=False)
    fetch(redis_sync, count=0, acks=(a,), tracking=False)
    assert not redis_sync.keys("q:task:*")


def test_status_of_a_running_task_names_its_worker_and_progress(redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", keys.wrap("a", task_id="ta"))
    fetch(redis_sync, count=1)
    redis_sync.zadd(SCHEMA.workers, {"w": 2**42})
    redis_sync.hset(SCHEMA.progress("w"), "ta",
                    json.dumps({"fraction": 0.5, "message": "half", "at": 1.0}))
    s = client.status_sync(redis_sync, "ta", key_prefix="q")
    assert (s.state, s.worker, s.worker_alive, s.attempt) == ("running", "w", True, 1)
    assert s.progress is not None and (s.progress.fraction, s.progress.message) == (0.5, "half")


def test_a_task_cancelled_at_fetch_leaves_no_in_flight_count(redis_sync: redis.Redis) -> None:
    """With an in-flight limit (lib/flow.lua), the cancelled task a fetch drops is not counted
    as held: only the task handed out is."""
    redis_sync.hset(SCHEMA.flow, "max:q", 5)
    redis_sync.lpush("q", keys.wrap("a", task_id="ta"), keys.wrap("b", task_id="tb"))
    redis_sync.zadd(SCHEMA.cancels, {"ta": 2**40})
    taken = fetch(redis_sync, count=2)
    assert [keys.unwrap(keys.Entry.decode(e).element).id for e in taken] == ["tb"]
    assert redis_sync.hget(SCHEMA.flow_state, "held:q") == "1"


def recover(r: redis.Redis, *, worker: str, max_attempts: int = 5,
            tracking: bool = True) -> list[int]:
    keys_, args = scripts.recover_call(SCHEMA, worker_id=worker, max_attempts=max_attempts,
                                       reason="test", tracking=tracking)
    return list(queueops.script("recover").sync(r, keys=keys_, args=args))


@pytest.mark.parametrize("tracking", [True, False], ids=["tracking", "off"])
def test_recovery_indexes_a_requeued_task_as_queued_and_a_poison_one_as_dead(
        redis_sync: redis.Redis, tracking: bool) -> None:
    redis_sync.lpush("q", keys.wrap("a", task_id="ta"), keys.wrap("b", task_id="tb"),
                     "raw")
    fetch(redis_sync, count=3)
    assert redis_sync.hget(SCHEMA.task("ta"), "state") == "running"
    [tb] = [e for e in redis_sync.lrange(SCHEMA.processing("w"), 0, -1) if '"tb"' in e]
    redis_sync.lrem(SCHEMA.processing("w"), 1, tb)
    # tb's fifth attempt fails with the worker: poison (maxAttempts 5)
    redis_sync.lpush(SCHEMA.processing("w"), tb.replace('"attempts":0', '"attempts":4'))
    assert recover(redis_sync, worker="w", tracking=tracking) == [2, 1]
    if not tracking:
        assert redis_sync.hget(SCHEMA.task("ta"), "state") == "running"  # as fetch left it
        return
    index = redis_sync.hgetall(SCHEMA.task("ta"))
    assert (index["state"], index["queue"]) == ("queued", "q")
    assert 0 < redis_sync.pttl(SCHEMA.task("ta")) <= 86_400_000
    assert redis_sync.hget(SCHEMA.task("tb"), "state") == "dead"
    dead = client.status_sync(redis_sync, "tb", key_prefix="q")
    assert (dead.state, dead.error, dead.queue, dead.attempt) == (
        "dead", "worker lost: test", "q", 5)
    [pushed] = redis_sync.lrange(SCHEMA.dead_letter, 0, -1)
    assert dead.record == json.loads(pushed)  # the record as the dead-letter list has it
    assert (dead.record["payload"], dead.record["attempts"]) == ("b", 5)
    s = client.status_sync(redis_sync, "ta", key_prefix="q")
    assert (s.state, s.queue, s.worker) == ("queued", "q", "")
    assert len(redis_sync.keys("q:task:*")) == 2  # the raw payload has no id: not indexed


def test_a_task_given_back_unrun_is_indexed_as_queued(redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", keys.wrap("a", task_id="ta"))
    [a] = fetch(redis_sync, count=1)
    keys_, args = scripts.release_call(SCHEMA, "w", [a], tracking=True)
    assert queueops.script("release").sync(redis_sync, keys=keys_, args=args) == 1
    assert redis_sync.hget(SCHEMA.task("ta"), "state") == "queued"
    assert client.status_sync(redis_sync, "ta", key_prefix="q").state == "queued"


def test_an_index_key_of_another_type_is_left_alone_and_no_task_is_lost(
        redis_sync: redis.Redis) -> None:
    """A task-index key holding another type is not ours to change: the scripts leave it and
    go on (the index is written after the moves, and a failed HSET would have lost them)."""
    redis_sync.set(SCHEMA.task("ta"), "someone's string")
    redis_sync.lpush("q", keys.wrap("a", task_id="ta"))
    [a] = fetch(redis_sync, count=1)
    assert redis_sync.lrange(SCHEMA.processing("w"), 0, -1) == [a]
    assert recover(redis_sync, worker="w") == [1, 0]
    assert redis_sync.llen("q") == 1
    assert redis_sync.get(SCHEMA.task("ta")) == "someone's string"
    assert redis_sync.ttl(SCHEMA.task("ta")) == -1


def test_a_promoted_task_is_indexed_as_queued(redis_sync: redis.Redis) -> None:
    pushed = client.enqueue_sync(redis_sync, "q", "later", delay=60, track=True)
    assert redis_sync.hget(SCHEMA.task(pushed), "state") == "delayed"
    due = int(redis_sync.zrange(SCHEMA.delayed, 0, 0, withscores=True)[0][1])
    queueops.script("fetch").sync(
        redis_sync, keys=scripts.fetch_keys(SCHEMA, "w"),
        args=scripts.fetch_args(SCHEMA, now_ms=due, count=0, hold=True, tracking=True))
    assert redis_sync.llen("q") == 1
    s = client.status_sync(redis_sync, pushed, key_prefix="q")
    assert (s.state, s.queue) == ("queued", "q")


def test_a_unique_no_op_leaves_the_index_as_the_tasks_run_left_it(
        redis_sync: redis.Redis) -> None:
    first = client.enqueue_sync(redis_sync, "q", "p", task_id="u1", unique_for=60, track=True)
    assert redis_sync.hget(SCHEMA.task(first), "state") == "queued"
    fetch(redis_sync, count=1)
    assert redis_sync.hget(SCHEMA.task(first), "state") == "running"
    again = client.enqueue_sync(redis_sync, "q", "p", task_id="u1", unique_for=60, track=True)
    assert again == first and redis_sync.llen("q") == 0
    assert redis_sync.hget(SCHEMA.task(first), "state") == "running"


def test_a_tracked_push_with_an_index_key_of_another_type_is_pushed_untracked(
        redis_sync: redis.Redis) -> None:
    redis_sync.set(SCHEMA.task("t1"), "someone's string")
    assert client.enqueue_sync(redis_sync, "q", "p", task_id="t1", track=True) == "t1"
    assert redis_sync.llen("q") == 1
    assert redis_sync.get(SCHEMA.task("t1")) == "someone's string"
