"""`taskqueue enqueue` against a real redis-server."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
import redis

from taskqueue.wire import keys
from tests.helpers.cli import Run


def test_payloads_are_enveloped_and_pushed_oldest_right(
    cli: Run, redis_url: str, redis_sync: redis.Redis
) -> None:
    result = cli("enqueue", "--redis-url", redis_url, "jobs", "first", '{"n": 2}')
    assert result.code == 0, result.err
    ids = result.out.split()
    tasks = [keys.unwrap(str(e)) for e in redis_sync.lrange("jobs", 0, -1)]
    # LPUSH: the first task is at the right end, where the worker takes from
    assert [t.payload for t in reversed(tasks)] == ["first", '{"n": 2}']
    assert [t.id for t in reversed(tasks)] == ids
    assert all(t.enveloped and t.attempts == 0 and t.enqueued_at for t in tasks)
    assert "enqueued 2 task(s) to jobs (list)" in result.err


def test_dash_reads_one_payload_per_line_from_stdin(
    cli: Run, redis_url: str, redis_sync: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb b\n\nc\n"))
    assert cli("enqueue", "--redis-url", redis_url, "jobs", "-").code == 0
    payloads = [keys.unwrap(str(e)).payload for e in redis_sync.lrange("jobs", 0, -1)]
    assert payloads == ["c", "b b", "a"]


def test_raw_pushes_the_payload_unchanged(
    cli: Run, redis_url: str, redis_sync: redis.Redis
) -> None:
    result = cli("enqueue", "--redis-url", redis_url, "--raw", "jobs", "plain")
    assert (result.code, result.out) == (0, "")
    assert redis_sync.lrange("jobs", 0, -1) == ["plain"]


def test_priority_scores_a_zset_queue_of_the_manifest(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    path = manifest_file([{"key": "urgent", "type": "zset"}, {"key": "normal"}])
    assert cli("enqueue", "-f", path, "urgent", "--priority", "5", "later").code == 0
    assert cli("enqueue", "-f", path, "urgent", "sooner").code == 0  # default score 0
    members: Any = redis_sync.zrange("urgent", 0, -1, withscores=True)
    assert [(keys.unwrap(m).payload, s) for m, s in members] == [
        ("sooner", 0.0), ("later", 5.0)
    ]


def test_priority_on_a_list_queue_is_refused(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    result = cli("enqueue", "-f", manifest_file(), "vip", "--priority", "1", "x")
    assert result.code == 2
    assert "--priority applies to zset queues" in result.err
    assert redis_sync.exists("vip") == 0


def test_a_key_that_is_not_a_queue_of_the_manifest_is_refused(
    cli: Run, manifest_file: Callable[..., str]
) -> None:
    result = cli("enqueue", "-f", manifest_file(), "typo", "x")
    assert result.code == 2
    assert "'typo' is not a queue of TaskQueue media/thumbs (queues: vip, normal)" in result.err


@pytest.mark.parametrize(
    ("setup", "found"),
    [
        pytest.param(lambda r: r.set("jobs", "x"), "string", id="string"),
        pytest.param(lambda r: r.hset("jobs", "a", "1"), "hash", id="hash"),
    ],
)
def test_wrong_key_type_exits_5_without_traceback(
    cli: Run, redis_url: str, redis_sync: redis.Redis, setup: Callable[[redis.Redis], object],
    found: str,
) -> None:
    setup(redis_sync)
    result = cli("enqueue", "--redis-url", redis_url, "jobs", "x")
    assert result.code == 5
    assert result.err == (
        f"taskqueue: WRONGTYPE: key 'jobs' holds a {found}, not a list or zset; "
        "check the key name\n"
    )


def test_track_writes_each_tasks_index_with_its_push(
    cli: Run, redis_url: str, redis_sync: redis.Redis
) -> None:
    result = cli("enqueue", "--redis-url", redis_url, "--track", "jobs", "a", "b")
    assert result.code == 0, result.err
    ids = result.out.split()
    assert len(ids) == 2 and redis_sync.llen("jobs") == 2
    for task_id in ids:
        index = redis_sync.hgetall(f"jobs:task:{task_id}")
        assert (index["state"], index["queue"]) == ("queued", "jobs")
        assert 0 < redis_sync.pttl(f"jobs:task:{task_id}") <= 86_400_000
    later = cli("enqueue", "--redis-url", redis_url, "--track", "--in", "1h", "jobs", "c")
    assert later.code == 0, later.err
    shown = cli("status", later.out.strip(), "--redis-url", redis_url, "--queue", "jobs")
    assert "state: delayed" in shown.out and "due: in 59m" in shown.out, shown.out


def test_track_needs_the_envelope(cli: Run, redis_url: str, redis_sync: redis.Redis) -> None:
    result = cli("enqueue", "--redis-url", redis_url, "--raw", "--track", "jobs", "a")
    assert result.code == 2
    assert "--track" in result.err and len(result.err.strip().splitlines()) == 1
    assert redis_sync.llen("jobs") == 0
