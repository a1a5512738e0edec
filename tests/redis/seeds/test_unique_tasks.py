"""Unique tasks at enqueue (`enqueue(..., unique_for=)`, `taskqueue enqueue --unique-for`): a
second enqueue of the same id within the window is a no-op returning that id; real redis-server.
With spec.worker.idempotency (seed 004 §4.3) this also covers an id enqueued after its window."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from taskqueue import client as producer
from taskqueue.wire import keys
from tests.helpers.cli import Run

SCHEMA = keys.KeySchema(prefix="q", queues=(keys.QueueRef("q"),), dead_letter="q:dead")


def test_second_enqueue_within_the_window_is_a_no_op(redis_sync: redis.Redis) -> None:
    first = producer.enqueue_sync(redis_sync, "q", "a", task_id="invoice-1", unique_for=60)
    second = producer.enqueue_sync(redis_sync, "q", "changed", task_id="invoice-1",
                                   unique_for=60)
    assert first == second == "invoice-1"
    assert [keys.unwrap(e).payload for e in redis_sync.lrange("q", 0, -1)] == ["a"]
    assert 59_000 < redis_sync.pttl(SCHEMA.unique("invoice-1")) <= 60_000


def test_after_the_window_the_id_is_enqueued_again(redis_sync: redis.Redis) -> None:
    producer.enqueue_sync(redis_sync, "q", "a", task_id="t", unique_for=0.2)
    time.sleep(0.3)
    producer.enqueue_sync(redis_sync, "q", "a", task_id="t", unique_for=0.2)
    assert redis_sync.llen("q") == 2


def test_without_an_id_the_payload_is_the_identity(redis_sync: redis.Redis) -> None:
    ids = {producer.enqueue_sync(redis_sync, "q", "same", unique_for=60) for _ in range(3)}
    assert ids == {keys.content_id("same")}
    assert redis_sync.llen("q") == 1
    producer.enqueue_sync(redis_sync, "q", "other", unique_for=60)
    assert redis_sync.llen("q") == 2


def test_unique_and_scheduled_in_one_script(redis_sync: redis.Redis) -> None:
    for _ in range(2):
        producer.enqueue_sync(redis_sync, "q", "x", task_id="rep-1", unique_for=60, delay=30)
    assert redis_sync.zcard(SCHEMA.delayed) == 1 and redis_sync.llen("q") == 0


def test_unique_on_a_zset_queue(redis_sync: redis.Redis) -> None:
    for prio in (3, 1):
        producer.enqueue_sync(redis_sync, "z", "x", task_id="z-1", unique_for=60, priority=prio)
    assert redis_sync.zrange("z", 0, -1, withscores=True)[0][1] == 3.0


def test_concurrent_producers_push_once(redis_url: str, redis_sync: redis.Redis) -> None:
    """Atomic: 8 threads racing on one id push exactly one task."""
    import threading
    barrier = threading.Barrier(8)

    def produce() -> None:
        r = redis.Redis.from_url(redis_url, decode_responses=True)
        barrier.wait()
        producer.enqueue_sync(r, "q", "x", task_id="race", unique_for=60)

    threads = [threading.Thread(target=produce) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert redis_sync.llen("q") == 1


async def test_async_enqueue_unique(redis_client: object) -> None:
    import redis.asyncio as aioredis
    assert isinstance(redis_client, aioredis.Redis)
    for _ in range(2):
        assert await producer.enqueue(redis_client, "q", "x", task_id="a-1",
                                      unique_for=60) == "a-1"
    assert await redis_client.llen("q") == 1


@pytest.mark.parametrize("bad", [0, -5])
def test_unique_for_must_be_positive(redis_sync: redis.Redis, bad: float) -> None:
    with pytest.raises(ValueError, match="unique_for"):
        producer.enqueue_sync(redis_sync, "q", "x", unique_for=bad)


def test_cli_unique_for_prints_the_id_and_counts_the_no_ops(
        cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis) -> None:
    path = manifest_file([{"key": "vip"}, {"key": "normal"}])
    first = cli("enqueue", "-f", path, "normal", "--unique-for", "1h", "--id", "ord-5", "p")
    again = cli("enqueue", "-f", path, "normal", "--unique-for", "1h", "--id", "ord-5", "p")
    assert (first.code, again.code) == (0, 0)
    assert first.out.split() == again.out.split() == ["ord-5"]
    assert "1 already enqueued (unique)" in again.err
    assert redis_sync.llen("normal") == 1
    assert redis_sync.exists("vip:unique:ord-5")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--id", "x", "a", "b"], "--id names one task", id="id-with-two"),
        pytest.param(["--raw", "--unique-for", "5s", "a"], "--raw pushes no envelope",
                     id="raw-unique"),
    ],
)
def test_cli_refuses(cli: Run, redis_url: str, argv: list[str], message: str) -> None:
    result = cli("enqueue", "--redis-url", redis_url, "q", *argv)
    assert result.code != 0 and message in result.err
