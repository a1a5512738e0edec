"""Malformed raw entries never lose a task, never stop a script half-way and never change a key's
type: each script that puts an entry back (fetch.lua promoting the delayed zset, release.lua,
recover.lua) validates every field before it writes, and moves an entry it cannot use to the
dead-letter list with a reason that names the problem and the payload byte for byte.

Real redis-server; the scripts are called the way the worker calls them (`worker.store.Store`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import redis

from taskqueue.wire import keys
from taskqueue.worker.resp import ReplyError
from taskqueue.worker.store import Store

MARK = keys.ENVELOPE_MARK
SCHEMA = keys.KeySchema(
    prefix="t", dead_letter="t:dead",
    queues=(keys.QueueRef(key="q"), keys.QueueRef(key="z", type="zset"),
            keys.QueueRef(key="h")))
"""q: a list queue, z: a zset queue, h: a list queue whose key a test fills with a hash."""


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Bad:
    """A malformed entry: its bytes, what must be kept as the record's payload, and a phrase of
    the reason the dead-letter record must give."""

    entry: bytes
    payload: bytes
    reason: str
    queue: str = ""


BAD = [
    pytest.param(Bad(b"no newline at all", b"no newline at all",
                     'is not "<queue>\\n<score>\\n<payload>"'), id="no-newline"),
    pytest.param(Bad(b"q\none newline", b"q\none newline",
                     'is not "<queue>\\n<score>\\n<payload>"'), id="one-newline"),
    pytest.param(Bad(b"z\nabc\npayload", b"payload", 'needs a numeric score (got "abc")', "z"),
                 id="zset-non-numeric-score"),
    pytest.param(Bad(b"z\n\npayload", b"payload", 'needs a numeric score (got "")', "z"),
                 id="zset-empty-score"),
    pytest.param(Bad(b"z\nnan\npayload", b"payload", 'needs a numeric score (got "nan")', "z"),
                 id="zset-nan-score"),
    pytest.param(Bad(b"z\n 5\npayload", b"payload", 'needs a numeric score (got " 5")', "z"),
                 id="zset-score-with-space"),
    pytest.param(Bad(b"z\n1e999\npayload", b"payload", 'needs a numeric score (got "1e999")',
                     "z"), id="zset-score-overflows"),
    pytest.param(Bad(b"q\n5\npayload", b"payload", 'takes no score (got "5")', "q"),
                 id="list-with-score"),
    pytest.param(Bad(b"z\nx\n\xff\xfe raw", b"\xff\xfe raw", 'needs a numeric score', "z"),
                 id="non-utf8-payload-bad-score"),
    pytest.param(Bad(b"gone\n\npayload", b"payload", "is not in this TaskQueue", "gone"),
                 id="queue-not-declared"),
    pytest.param(Bad(b"\n\npayload", b"payload", "is not in this TaskQueue"),
                 id="empty-queue-name"),
    pytest.param(Bad(b"h\n\npayload", b"payload", "queue key h holds a hash, not a list", "h"),
                 id="queue-key-holds-a-hash"),
]


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)  # bytes: payloads are compared byte for byte
    client.hset("h", "field", "value")
    yield client
    client.close()


@pytest.fixture
def store(redis_url: str) -> Iterator[Store]:
    s = Store(url=redis_url, schema=SCHEMA, worker_id="w")
    yield s
    s.close()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _promote(raw: redis.Redis, store: Store, entries: list[bytes]) -> None:
    raw.zadd(SCHEMA.delayed, {e: 1 for e in entries})
    store.promote()


def _release(raw: redis.Redis, store: Store, entries: list[bytes]) -> None:
    raw.lpush(SCHEMA.processing("w"), *entries)
    store.release([_text(e) for e in entries])


def _recover(raw: redis.Redis, store: Store, entries: list[bytes]) -> None:
    raw.lpush(SCHEMA.processing("gone-worker"), *entries)
    raw.zadd(SCHEMA.workers, {"gone-worker": 1})
    store.recover(worker_id="gone-worker", max_attempts=10, reason="test")


PUT_BACK: dict[str, Callable[[redis.Redis, Store, list[bytes]], None]] = {
    "fetch-promotes-delayed": _promote, "release": _release, "recover": _recover}


def _records(raw: redis.Redis) -> list[dict[str, object]]:
    return [json.loads(_text(r)) for r in raw.lrange(SCHEMA.dead_letter, 0, -1)]


def _types(raw: redis.Redis) -> dict[str, str]:
    return {k: raw.type(k).decode() for k in ("q", "z", "h")}


@pytest.mark.parametrize("script", list(PUT_BACK))
@pytest.mark.parametrize("bad", BAD)
def test_a_malformed_entry_is_dead_lettered_with_its_reason(
        raw: redis.Redis, store: Store, script: str, bad: Bad) -> None:
    good_list, good_zset = b"q\n\ngood", b"z\n7\ngood-z"
    PUT_BACK[script](raw, store, [good_list, bad.entry, good_zset])

    records = _records(raw)
    assert len(records) == 1, records
    record = records[0]
    assert _b(str(record["payload"])) == bad.payload
    assert bad.reason in str(record["error"])
    assert record["queue"] == bad.queue
    # the entry left the delayed zset or processing list, and the good ones went back
    assert raw.zcard(SCHEMA.delayed) == 0
    assert raw.llen(SCHEMA.processing("w")) == raw.llen(SCHEMA.processing("gone-worker")) == 0
    assert [keys.unwrap(_text(e)).payload for e in raw.lrange("q", 0, -1)] == ["good"]
    assert [(keys.unwrap(_text(m)).payload, s) for m, s in
            raw.zrange("z", 0, -1, withscores=True)] == [("good-z", 7.0)]
    assert _types(raw) == {"q": "list", "z": "zset", "h": "hash"}
    assert raw.hget(SCHEMA.stats, "dead") == b"1"


@pytest.mark.parametrize("script", list(PUT_BACK))
@pytest.mark.parametrize(
    ("entry", "queue", "expected_type"),
    [
        pytest.param(b"q\n5\np", "q", "none", id="score-for-an-empty-list-queue"),
        pytest.param(b"z\n\np", "z", "none", id="no-score-for-an-empty-zset-queue"),
    ],
)
def test_an_absent_queue_key_is_never_created_with_the_wrong_type(
        raw: redis.Redis, store: Store, script: str, entry: bytes, queue: str,
        expected_type: str) -> None:
    PUT_BACK[script](raw, store, [entry])
    assert raw.type(queue).decode() == expected_type
    assert len(_records(raw)) == 1


def test_a_list_queue_keeps_being_served_after_a_scored_entry_for_it(
        raw: redis.Redis, store: Store) -> None:
    """A score on a delayed entry of an empty list queue once turned the queue key into a zset:
    the worker then skipped the queue, and later tasks scheduled for it were dead-lettered as
    'not in this TaskQueue any more'."""
    _promote(raw, store, [b"q\n5\nscored by mistake"])
    _promote(raw, store, [b"q\n\nscheduled later"])
    store.use_queues(skip={"h"})  # the worker skips h: it holds a hash
    taken = store.fetch(acks=(), count=10)
    assert [keys.Entry.decode(e).element for e in taken] == ["scheduled later"]
    [record] = _records(raw)
    assert record["payload"] == "scored by mistake"
    assert "not in this TaskQueue" not in str(record["error"])


def test_a_due_entry_of_a_skipped_queue_is_named_for_what_it_is(
        raw: redis.Redis, store: Store) -> None:
    """The worker skips a queue whose key holds another type, but still declares it to
    fetch.lua: a due entry of that queue is dead-lettered for the key's type, not as a stranger
    ("not in this TaskQueue any more")."""
    store.use_queues(skip={"h"})
    _promote(raw, store, [b"h\n\nfor the skipped queue"])
    [record] = _records(raw)
    assert record["error"] == "queue key h holds a hash, not a list"
    assert record["queue"] == "h"


@pytest.mark.parametrize(
    "element",
    [
        pytest.param(MARK + "1e999,\"enqueued_at\":0,\"id\":\"x\",\"payload\":\"p\"}",
                     id="attempts-overflow"),
        pytest.param(MARK + "2,\"enqueued_at\":0,\"id\":\"x\"}", id="no-payload"),
        pytest.param(MARK + "2,\"enqueued_at\":0,\"id\":\"x\",\"payload\":[1]}",
                     id="payload-not-a-string"),
        pytest.param(MARK + "2,\"enqueued_at\":\"x\",\"id\":\"x\",\"payload\":\"p\"}",
                     id="enqueued-at-not-a-number"),
        pytest.param(MARK + "2,\"enqueued_at\":0,\"id\":7,\"payload\":\"p\"}",
                     id="id-not-a-string"),
        pytest.param(MARK + "2,\"enqueued_at\":0,\"id\":\"x\",\"payload\":\"p\"",
                     id="not-json"),
        pytest.param(MARK + "2.5,\"enqueued_at\":0,\"id\":\"x\",\"payload\":\"p\"}",
                     id="attempts-not-an-integer"),
        pytest.param(MARK + "2,\"enqueued_at\":01,\"payload\":\"p\"}",
                     id="number-with-a-leading-zero"),
        pytest.param(MARK + "2,\"enqueued_at\":+1,\"payload\":\"p\"}",
                     id="number-with-a-plus"),
        pytest.param(MARK + "2,\"enqueued_at\":1.,\"payload\":\"p\"}",
                     id="number-ending-in-a-dot"),
        pytest.param(MARK + "2,\"enqueued_at\":0x10,\"payload\":\"p\"}",
                     id="hex-number"),
        pytest.param(MARK + "2,\"enqueued_at\":inf,\"payload\":\"p\"}",
                     id="lowercase-inf"),
        pytest.param(MARK + "2,\"enqueued_at\":nan,\"payload\":\"p\"}",
                     id="lowercase-nan"),
        pytest.param(MARK + "2,\"enqueued_at\":0,\"payload\":\"a\tb\"}",
                     id="control-character-in-a-string"),
    ],
)
def test_recovery_dead_letters_a_malformed_envelope_byte_for_byte(
        raw: redis.Redis, store: Store, element: str) -> None:
    """recover.lua raises the attempt count of each envelope it requeues: one it cannot read
    goes to the dead-letter list unchanged, never half-rewritten."""
    assert keys.unwrap(element).problem, "the worker's Python reads it as malformed too"
    _recover(raw, store, [_b(f"q\n\n{element}")])
    [record] = _records(raw)
    assert record["payload"] == element
    assert "malformed envelope" in str(record["error"])
    assert raw.llen("q") == 0


def test_recovery_of_many_entries_stops_at_no_bad_one(raw: redis.Redis, store: Store) -> None:
    """Before: the first entry whose put-back raised (a bad score) ended recover.lua with the
    entries after it still in the dead worker's list and that entry gone."""
    entries = [_b(f"q\n\n{i}") for i in range(5)] + [b"z\nbad\nx"] + [
        _b(f"q\n\n{i}") for i in range(5, 10)]
    _recover(raw, store, entries)
    assert raw.llen("q") == 10
    assert len(_records(raw)) == 1
    assert raw.llen(SCHEMA.processing("gone-worker")) == 0
    assert raw.zscore(SCHEMA.workers, "gone-worker") is None


def test_fetch_takes_nothing_when_a_later_queue_key_holds_the_wrong_type(
        raw: redis.Redis, redis_url: str) -> None:
    """A queue key of another type fails the fetch before anything is popped: the tasks of the
    queues before it are not lost with the failed call's reply."""
    schema = keys.KeySchema(prefix="t", dead_letter="t:dead",
                            queues=(keys.QueueRef(key="q"), keys.QueueRef(key="h")))
    s = Store(url=redis_url, schema=schema, worker_id="w")
    raw.lpush("q", b"a", b"b")
    try:
        with pytest.raises(ReplyError, match="WRONGTYPE key h holds a hash, not a list"):
            s.fetch(acks=(), count=5)
    finally:
        s.close()
    assert raw.lrange("q", 0, -1) == [b"b", b"a"]
    assert raw.llen(schema.processing("w")) == 0


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        pytest.param(SCHEMA.processing("w"), "string", id="processing-list"),
        pytest.param(SCHEMA.stats, "string", id="stats-hash"),
    ],
)
def test_fetch_pops_nothing_when_a_bookkeeping_key_holds_the_wrong_type(
        raw: redis.Redis, store: Store, key: str, kind: str) -> None:
    raw.set(key, "x")
    raw.lpush("q", b"a")
    with pytest.raises(ReplyError, match="WRONGTYPE"):
        store.fetch(acks=(), count=1)
    assert raw.lrange("q", 0, -1) == [b"a"]


def test_a_wrong_typed_dead_letter_key_stops_the_promotion_before_any_write(
        raw: redis.Redis, store: Store) -> None:
    raw.set(SCHEMA.dead_letter, "not a list")
    raw.zadd(SCHEMA.delayed, {b"q\n\nfine": 1, b"z\nbad\nx": 2})
    with pytest.raises(ReplyError, match="WRONGTYPE"):
        store.promote()
    assert raw.zcard(SCHEMA.delayed) == 2


def test_fail_never_drops_the_entry_when_the_delayed_key_holds_the_wrong_type(
        raw: redis.Redis, store: Store) -> None:
    entry = "q\n\npayload"
    raw.lpush(SCHEMA.processing("w"), entry)
    raw.set(SCHEMA.delayed, "not a zset")
    retry = keys.Entry("q", "", keys.wrap("payload", attempts=1)).encode()
    with pytest.raises(ReplyError, match="WRONGTYPE"):
        store.fail(entry=entry, held=True, dead=False, value=retry,
                   due_ms=int(time.time() * 1000))
    assert raw.lrange(SCHEMA.processing("w"), 0, -1) == [_b(entry)]
