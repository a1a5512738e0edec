"""spec.retry.deadLetterMaxLength: every script that pushes a dead-letter record keeps the newest
N records and counts the dropped ones in the stats hash (`keys.DEAD_TRIMMED_FIELD`), which
`queueops.observe` reads for `taskqueue stats` and the operator's metric. Real redis-server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue.redisio import queueops
from taskqueue.wire import keys
from taskqueue.worker.store import Store
from tests.unit.queueops.test_dead_letter_cap import CAP

SCHEMA = keys.KeySchema(prefix="t", dead_letter="t:dead", dead_letter_max_length=CAP,
                        queues=(keys.QueueRef(key="q"),))


@pytest.fixture
def store(redis_url: str) -> Iterator[Store]:
    s = Store(url=redis_url, schema=SCHEMA, worker_id="w")
    yield s
    s.close()


def _fail(r: redis.Redis, store: Store, n: int) -> None:
    for i in range(n):
        entry = keys.Entry("q", "", keys.wrap(f"p{i}", task_id=f"id{i}")).encode()
        r.lpush(SCHEMA.processing("w"), entry)
        record = keys.dead_letter_record(entry=keys.Entry.decode(entry),
                                         task=keys.unwrap(keys.Entry.decode(entry).element),
                                         attempts=3, error="boom")
        assert store.fail(entry=entry, held=True, dead=True, value=record, due_ms=0)


def _recover_poison(r: redis.Redis, store: Store, n: int) -> None:
    for i in range(n):  # one recovery per record, so the order is the push order
        r.lpush(SCHEMA.processing("gone"),
                keys.Entry("q", "", keys.wrap(f"p{i}", attempts=9, task_id=f"id{i}")).encode())
        store.recover(worker_id="gone", max_attempts=3, reason="test")


def _promote_unusable(r: redis.Redis, store: Store, n: int) -> None:
    for i in range(n):
        r.zadd(SCHEMA.delayed, {keys.Entry("q", "9", keys.wrap(f"p{i}", task_id=f"id{i}"))
                                .encode(): 1})
        store.promote()


def _release_unusable(r: redis.Redis, store: Store, n: int) -> None:
    for i in range(n):
        entry = keys.Entry("gone", "", keys.wrap(f"p{i}", task_id=f"id{i}")).encode()
        r.lpush(SCHEMA.processing("w"), entry)
        store.release([entry])


PUSHERS: dict[str, Callable[[redis.Redis, Store, int], None]] = {
    "fail": _fail, "recover-poison-pill": _recover_poison,
    "fetch-promotes-unusable-entry": _promote_unusable,
    "release-unusable-entry": _release_unusable,
}


@pytest.mark.parametrize("pusher", list(PUSHERS))
@pytest.mark.parametrize("extra", [0, 1, 7])
def test_the_dead_letter_list_keeps_the_newest_and_counts_the_dropped(
        redis_sync: redis.Redis, store: Store, pusher: str, extra: int) -> None:
    PUSHERS[pusher](redis_sync, store, CAP + extra)
    ids = [json.loads(r)["id"] for r in redis_sync.lrange(SCHEMA.dead_letter, 0, -1)]
    assert ids == [f"id{i}" for i in reversed(range(extra, CAP + extra))]  # newest first
    stats = redis_sync.hgetall(SCHEMA.stats)
    assert int(stats.get(keys.DEAD_TRIMMED_FIELD, 0)) == extra
    assert int(stats["dead"]) == CAP + extra


async def test_observe_reads_the_trimmed_count(redis_url: str, store: Store) -> None:
    sync = redis.Redis.from_url(redis_url)
    _fail(sync, store, CAP + 3)
    sync.close()
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        obs = await queueops.observe(client, SCHEMA)
    finally:
        await client.aclose()
    assert (obs.dead_letter, obs.dead_letter_trimmed_total) == (CAP, 3)
