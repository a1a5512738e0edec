"""spec.retry.deadLetterMaxLength: every script that pushes a dead-letter record keeps the newest
N records and counts the dropped ones in the stats hash (`keys.DEAD_TRIMMED_FIELD`), which
`queueops.observe` reads for `taskqueue stats` and the operator's metric. Real redis-server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pydantic
import pytest
import redis
import redis.asyncio as aioredis

from taskqueue.api import manifest
from taskqueue.controller import act, kube
from taskqueue.redisio import queueops
from taskqueue.scaling import policy
from taskqueue.scaling.observation import QueueObservation
from taskqueue.telemetry import metrics
from taskqueue.wire import keys, scripts
from taskqueue.worker.store import Store

CAP = 5
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
        store.fetch(acks=(), count=0, hold=False)


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


def test_the_operator_exports_the_trimmed_count() -> None:
    obs = QueueObservation(at=0.0, backlog={"q": 0}, dead_letter=CAP,
                           dead_letter_trimmed_total=42)
    decision = policy.Decision(replicas=1, previous=1, reason="", recommendation=1,
                               state=policy.PolicyState(replicas=1))
    deployment = kube.DeploymentState(name="tq-trim-worker", replicas=1, ready_replicas=1,
                                      selector={})
    act.record_metrics(kube.ObjectRef(namespace="ns", name="tq-trim", uid="u"), obs, decision,
                       deployment, 0.01)
    assert metrics.OPERATOR.get_sample_value(
        "taskqueue_dead_letter_trimmed", {"namespace": "ns", "taskqueue": "tq-trim"}) == 42


def _spec(retry: dict[str, object]) -> dict[str, object]:
    return {"kind": "TaskQueue", "spec": {"redis": {"url": "redis://localhost"},
                                          "queues": [{"key": "q"}], "retry": retry}}


def test_the_default_cap_is_ten_thousand() -> None:
    spec = manifest.parse(_spec({})).spec
    assert spec.retry.deadLetterMaxLength == keys.DEAD_LETTER_MAX_LENGTH == 10_000
    assert keys.KeySchema.from_spec(spec).dead_letter_max_length == 10_000


@pytest.mark.parametrize("value", [0, -1, 10_000_001, "100", 2.5])
def test_a_cap_out_of_range_is_refused(value: object) -> None:
    with pytest.raises((pydantic.ValidationError, manifest.ManifestError),
                       match="deadLetterMaxLength"):
        manifest.parse(_spec({"deadLetterMaxLength": value}))


def test_the_lua_helper_names_the_stats_field_keys_owns() -> None:
    assert f"'{keys.DEAD_TRIMMED_FIELD}'" in scripts.lua("fail")

