"""`taskqueue dlq list|requeue|purge` against a real redis-server."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from taskqueue.wire import keys
from tests.helpers.cli import Run


def _dead(r: redis.Redis, n: int, *, queue: str = "vip", start: int = 0) -> list[str]:
    """LPUSH n records like the worker does (newest at the left); returns their ids, oldest
    first."""
    ids = [f"t{start + i}" for i in range(n)]
    for i, task_id in enumerate(ids):
        entry = keys.Entry(queue, "", keys.wrap(f"payload {task_id}", task_id=task_id))
        r.lpush("vip:dead", keys.dead_letter_record(
            entry=entry, task=keys.unwrap(entry.element), attempts=3,
            error=f"ValueError: bad input {i}", failed_at=time.time() - 60))
    return ids


def test_list_shows_error_and_attempts_newest_first(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _dead(redis_sync, 3)
    records = cli("dlq", "list", "-f", manifest_file(), "--json").json()
    assert [(r["id"], r["attempts"], r["error"]) for r in records] == [
        ("t2", 3, "ValueError: bad input 2"), ("t1", 3, "ValueError: bad input 1"),
        ("t0", 3, "ValueError: bad input 0"),
    ]
    assert records[0]["age_seconds"] == pytest.approx(60, abs=2)
    out = cli("dlq", "list", "-f", manifest_file(), "--limit", "2").out.splitlines()
    assert out[0] == "vip:dead: 3 dead letter(s), showing the newest 2"
    assert out[2].split()[:4] == ["t2", "vip", "3", "1m00s"] or out[2].split()[:4] == [
        "t2", "vip", "3", "1m01s"]
    assert "ValueError: bad input 2" in out[2]


def test_requeue_all_round_trips_to_the_original_queue_with_attempts_reset(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _dead(redis_sync, 2, queue="vip")
    _dead(redis_sync, 1, queue="normal", start=2)
    result = cli("dlq", "requeue", "-f", manifest_file(), "--all")
    assert (result.code, result.out) == (0, "requeued 3 task(s) from vip:dead\n")
    assert redis_sync.exists("vip:dead") == 0
    # RPUSHed to the right end, oldest last: the worker takes t0 first, then t1
    vip = [keys.unwrap(str(e)) for e in reversed(redis_sync.lrange("vip", 0, -1))]
    assert [(t.id, t.payload, t.attempts, t.enveloped) for t in vip] == [
        ("t0", "payload t0", 0, True), ("t1", "payload t1", 0, True)
    ]
    assert [keys.unwrap(str(e)).id for e in redis_sync.lrange("normal", 0, -1)] == ["t2"]


def test_requeue_by_id_moves_only_those(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _dead(redis_sync, 3)
    result = cli("dlq", "requeue", "-f", manifest_file(), "--id", "t1")
    assert (result.code, result.out) == (0, "requeued 1 task(s)\n")
    assert [keys.unwrap(str(e)).id for e in redis_sync.lrange("vip", 0, -1)] == ["t1"]
    left = cli("dlq", "list", "-f", manifest_file(), "--json").json()
    assert [r["id"] for r in left] == ["t2", "t0"]


def test_requeue_of_an_unknown_id_fails(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _dead(redis_sync, 1)
    result = cli("dlq", "requeue", "-f", manifest_file(), "--id", "t0", "--id", "nope")
    assert (result.code, result.out) == (1, "requeued 1 task(s); 1 id(s) not found\n")


def test_requeue_count_takes_the_oldest_in_batches(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    ids = _dead(redis_sync, 1200)
    result = cli("dlq", "requeue", "-f", manifest_file(), "--count", "1100")
    assert result.code == 0, result.err
    assert redis_sync.llen("vip:dead") == 100
    requeued = [keys.unwrap(str(e)).id for e in redis_sync.lrange("vip", 0, -1)]
    assert sorted(requeued) == sorted(ids[:1100])


def test_records_without_a_queue_stay_and_fail_the_command(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _dead(redis_sync, 1)
    redis_sync.lpush("vip:dead", '{"queue": "", "payload": "?", "error": "unreadable"}')
    _dead(redis_sync, 1, start=1)
    result = cli("dlq", "requeue", "-f", manifest_file(), "--all")
    assert result.code == 1
    assert result.out == "requeued 2 task(s) from vip:dead; 1 record(s) kept\n"
    assert "kept record '{\"queue\": \"\", \"payload\"" in result.err
    assert "names no queue; pass --to KEY" in result.err
    assert redis_sync.llen("vip:dead") == 1


def test_requeue_to_a_zset_queue_uses_the_priority(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    path = manifest_file([{"key": "vip", "type": "zset"}])
    _dead(redis_sync, 1)
    assert cli("dlq", "requeue", "-f", path, "--all", "--priority", "7").code == 0
    members: Any = redis_sync.zrange("vip", 0, -1, withscores=True)
    [(element, score)] = members
    assert (keys.unwrap(str(element)).id, score) == ("t0", 7.0)


def test_requeue_needs_exactly_one_selection(
    cli: Run, manifest_file: Callable[..., str]
) -> None:
    result = cli("dlq", "requeue", "-f", manifest_file(), "--all", "--count", "2")
    assert result.code == 2
    assert "give exactly one of --id ID..., --count N, --all" in result.err


def test_purge_refuses_without_yes_and_then_empties(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _dead(redis_sync, 5)
    refused = cli("dlq", "purge", "-f", manifest_file())
    assert refused.code == 6
    assert "Delete 5 dead letters from vip:dead (list)? — refusing without --yes" in refused.err
    assert redis_sync.llen("vip:dead") == 5
    done = cli("dlq", "purge", "-f", manifest_file(), "--yes", "--batch", "2")
    assert done.code == 0
    assert done.out == "vip:dead: removed 5 dead letters in 3 batch(es) of <= 2\n"
    assert redis_sync.exists("vip:dead") == 0


def test_dead_letter_key_of_the_wrong_type(
    cli: Run, redis_url: str, redis_sync: redis.Redis
) -> None:
    redis_sync.set("dlq", "oops")
    result = cli("dlq", "list", "--redis-url", redis_url, "--dead-letter-key", "dlq")
    assert result.code == 5
    assert "key 'dlq' holds a string, not a list" in result.err
