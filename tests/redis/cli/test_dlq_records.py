"""`taskqueue dlq` and `inflight` on what the worker really writes, and on malformed records
(real redis-server): never a traceback, byte-exact requeues, one bad record never stops a batch,
and requeues only into the TaskQueue's queues unless `--to` says otherwise."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from taskqueue.wire import keys
from tests.helpers.cli import Run

BINARY = b"\xff\xfe raw \x80 bytes \xc3\x28 end"
"""A payload that is not UTF-8 (the worker keeps payloads byte-exact)."""


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    """A client without decoding: reads and writes bytes as they are."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def _worker_record(payload: bytes, *, task_id: str, queue: str = "vip") -> bytes:
    """A dead-letter record as the worker pushes it (store.py: surrogateescape both ways)."""
    text = payload.decode("utf-8", "surrogateescape")
    entry = keys.Entry(queue, "", keys.wrap(text, task_id=task_id))
    record = keys.dead_letter_record(entry=entry, task=keys.unwrap(entry.element), attempts=3,
                                     error="ValueError: boom", failed_at=time.time() - 5)
    return record.encode("utf-8", "surrogateescape")


def _payloads(raw: redis.Redis, key: str) -> list[tuple[str, bytes, int]]:
    """(id, payload bytes, attempts) of each envelope in list `key`, as the worker reads them."""
    out = []
    for element in reversed(raw.lrange(key, 0, -1)):
        task = keys.unwrap(element.decode("utf-8", "surrogateescape"))
        out.append((task.id, task.payload.encode("utf-8", "surrogateescape"), task.attempts))
    return out


MALFORMED = [
    pytest.param(b'{"queue": "vip", "payload": "p", "attempts": "x", "id": "ax"}', True,
                 id="attempts-not-a-number"),
    pytest.param(b'{"queue": "vip", "payload": "p", "attempts": 1e999, "failed_at": "y"}',
                 True, id="attempts-infinite"),
    pytest.param(b'{"queue": "vip", "payload": {"a": 1}, "id": "obj"}', False,
                 id="payload-not-a-string"),
    pytest.param(b'[1, 2]', False, id="not-an-object"),
    pytest.param(b'\xff{not json', False, id="not-json-nor-utf8"),
    pytest.param(b'{"queue": 7, "payload": "p", "id": 9, "error": {"e": 1}}', False,
                 id="queue-and-id-not-strings"),
    pytest.param(b'{"queue": "vip", "payload": "a\\ud800b", "id": "s"}', False,
                 id="payload-escapes-a-lone-surrogate"),
    pytest.param(b'{"queue": "vip", "payload": "p", "id": "\\udfff", "error": "\\ud800"}',
                 True, id="id-and-error-escape-lone-surrogates"),
]


def test_requeue_is_byte_exact_for_a_payload_that_is_not_utf8(
    cli: Run, manifest_file: Callable[..., str], raw: redis.Redis
) -> None:
    raw.lpush("vip:dead", _worker_record(BINARY, task_id="bin"))
    listed = cli("dlq", "list", "-f", manifest_file(), "--json")
    assert listed.code == 0, listed.err
    [doc] = listed.json()
    assert base64.b64decode(doc["payload_base64"]) == BINARY
    assert doc["payload_utf8"] is False and "\\xff" in doc["payload"]
    text = cli("dlq", "list", "-f", manifest_file())
    assert text.code == 0 and "\\xff\\xfe raw" in text.out
    result = cli("dlq", "requeue", "-f", manifest_file(), "--all")
    assert (result.code, result.err) == (0, "")
    assert _payloads(raw, "vip") == [("bin", BINARY, 0)]
    assert raw.exists("vip:dead") == 0


@pytest.mark.parametrize(("record", "movable"), MALFORMED)
def test_list_shows_a_malformed_record_without_a_traceback(
    cli: Run, manifest_file: Callable[..., str], raw: redis.Redis, record: bytes,
    movable: bool,
) -> None:
    raw.lpush("vip:dead", record)
    for argv in (["--json"], []):
        result = cli("dlq", "list", "-f", manifest_file(), *argv)
        assert (result.code, result.err) == (0, "")
    [doc] = cli("dlq", "list", "-f", manifest_file(), "--json").json()
    assert doc["problems"]


@pytest.mark.parametrize(("record", "movable"), MALFORMED)
def test_requeue_all_skips_a_bad_record_and_moves_the_others(
    cli: Run, manifest_file: Callable[..., str], raw: redis.Redis, record: bytes,
    movable: bool,
) -> None:
    raw.lpush("vip:dead", _worker_record(b"first", task_id="t0"))
    raw.lpush("vip:dead", record)
    raw.lpush("vip:dead", _worker_record(BINARY, task_id="t2"))
    result = cli("dlq", "requeue", "-f", manifest_file(), "--all")
    assert "Traceback" not in result.err
    moved = [(i, p) for i, p, _ in _payloads(raw, "vip")]
    if movable:  # a bad attempt count does not matter: the requeue starts at attempt 0
        assert result.code == 0
        assert [p for _, p in moved] == [b"first", b"p", BINARY]
        assert raw.llen("vip:dead") == 0
    else:
        assert result.code == 1
        assert moved == [("t0", b"first"), ("t2", BINARY)]
        assert raw.lrange("vip:dead", 0, -1) == [record]  # kept byte for byte
        assert result.out == "requeued 2 task(s) from vip:dead; 1 record(s) kept\n"
        assert result.err.startswith("taskqueue: kept ")
        assert result.err.count("\n") == 1


def test_a_queue_outside_the_taskqueue_needs_to(
    cli: Run, manifest_file: Callable[..., str], raw: redis.Redis
) -> None:
    raw.lpush("vip:dead", _worker_record(b"mine", task_id="ok"))
    raw.lpush("vip:dead", _worker_record(b"elsewhere", task_id="far", queue="other:queue"))
    result = cli("dlq", "requeue", "-f", manifest_file(), "--all")
    assert result.code == 1
    assert "kept task far: queue 'other:queue' is not a queue of this TaskQueue; pass --to KEY" \
        in result.err
    assert raw.exists("other:queue") == 0
    assert [i for i, _, _ in _payloads(raw, "vip")] == ["ok"]
    sent = cli("dlq", "requeue", "-f", manifest_file(), "--id", "far", "--to", "retry:queue")
    assert (sent.code, sent.out) == (0, "requeued 1 task(s)\n")
    assert _payloads(raw, "retry:queue") == [("far", b"elsewhere", 0)]
    assert raw.exists("vip:dead") == 0


def test_a_destination_of_the_wrong_type_keeps_only_its_records(
    cli: Run, manifest_file: Callable[..., str], raw: redis.Redis
) -> None:
    raw.hset("normal", "f", "v")  # the queue key was overwritten by a hash
    raw.lpush("vip:dead", _worker_record(b"a", task_id="a", queue="normal"))
    raw.lpush("vip:dead", _worker_record(b"b", task_id="b", queue="vip"))
    result = cli("dlq", "requeue", "-f", manifest_file(), "--all")
    assert result.code == 1
    assert "kept task a: queue key 'normal' holds a hash, not a list" in result.err
    assert [i for i, _, _ in _payloads(raw, "vip")] == ["b"]
    assert json.loads(raw.lindex("vip:dead", 0) or b"")["id"] == "a"
    assert raw.hgetall("normal") == {b"f": b"v"}


def test_inflight_shows_binary_and_malformed_entries(
    cli: Run, manifest_file: Callable[..., str], raw: redis.Redis
) -> None:
    raw.zadd("vip:workers", {"w1": time.time() * 1000 + 30_000})
    element = keys.wrap(BINARY.decode("utf-8", "surrogateescape"), task_id="bin")
    raw.rpush("vip:processing:w1", b"vip\n\n" + element.encode("utf-8", "surrogateescape"))
    raw.rpush("vip:processing:w1", b'vip\n\n{"__taskqueue__":1,"attempts":1e999,"x":1}')
    raw.rpush("vip:processing:w1", b'vip\n\n{"__taskqueue__":1,"attempts":"x"}')
    raw.rpush("vip:processing:w1", b"\xff no header")
    for argv in (["--json"], []):
        result = cli("inflight", "-f", manifest_file(), *argv)
        assert (result.code, result.err) == (0, "")
    [worker] = cli("inflight", "-f", manifest_file(), "--json").json()
    assert worker["in_flight"] == 4
    assert base64.b64decode(worker["tasks"][0]["payload_base64"]) == BINARY
