"""Schedules across daylight-saving transitions through the real fire path: the operator's
`Poller.fire` (plan, one fire.lua call per poll, the reply read back) against a real
redis-server, driven by an injected clock that polls every minute across each transition of a
northern (America/New_York) and a southern (Australia/Sydney) zone. A worker's promoter is
stood in by moving every fired task out of the delayed zset after each poll, so a slot fired
twice would show as a second task. Each slot of `30 2 * * *` and `*/15 * * * *` must fire once,
at the instant docs/operator.md ("Daylight saving time") documents, written here as plain UTC
times (not computed by the code under test)."""

from __future__ import annotations

import datetime
from typing import Any, cast

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue.api import manifest
from taskqueue.controller.kube import ObjectRef
from taskqueue.controller.poller import SCHEDULES_FIRED, Poller
from taskqueue.wire import keys

UTC = datetime.UTC
HOUR, QUARTER = datetime.timedelta(hours=1), datetime.timedelta(minutes=15)


def utc(*args: int) -> datetime.datetime:
    return datetime.datetime(*args, tzinfo=UTC)


def quarters(start: datetime.datetime, end: datetime.datetime,
             *, gap: tuple[datetime.datetime, datetime.datetime] | None = None,
             ) -> list[datetime.datetime]:
    """Every quarter hour in [start, end] in UTC, without those in [gap) (the second pass of a
    repeated local hour)."""
    out, t = [], start
    while t <= end:
        if gap is None or not gap[0] <= t < gap[1]:
            out.append(t)
        t += QUARTER
    return out


# (zone, the UTC instant of the change, the documented `30 2 * * *` slot, the `*/15` slots
# within three hours either side)
TRANSITIONS = [
    pytest.param("America/New_York", utc(2026, 3, 8, 7),
                 utc(2026, 3, 8, 7),  # 02:30 EST does not exist: 03:00 EDT
                 quarters(utc(2026, 3, 8, 4), utc(2026, 3, 8, 10)),  # 01:45 EST, 03:00 EDT
                 id="new-york-spring-forward"),
    pytest.param("America/New_York", utc(2026, 11, 1, 6),
                 utc(2026, 11, 1, 7, 30),  # 02:30 EST (02:xx occurs once in New York)
                 quarters(utc(2026, 11, 1, 3), utc(2026, 11, 1, 9),
                          gap=(utc(2026, 11, 1, 6), utc(2026, 11, 1, 7))),  # 01:xx EST again
                 id="new-york-fall-back"),
    pytest.param("Australia/Sydney", utc(2026, 4, 4, 16),
                 utc(2026, 4, 4, 15, 30),  # 02:30 AEDT, its first occurrence, not 02:30 AEST
                 quarters(utc(2026, 4, 4, 13), utc(2026, 4, 4, 19),
                          gap=(utc(2026, 4, 4, 16), utc(2026, 4, 4, 17))),  # 02:xx AEST again
                 id="sydney-fall-back"),
    pytest.param("Australia/Sydney", utc(2026, 10, 3, 16),
                 utc(2026, 10, 3, 16),  # 02:30 AEST does not exist: 03:00 AEDT
                 quarters(utc(2026, 10, 3, 13), utc(2026, 10, 3, 19)),
                 id="sydney-spring-forward"),
]


class Clock:
    """The operator's clock, moved by the test."""

    def __init__(self, start: datetime.datetime) -> None:
        self.now = start.timestamp()

    def __call__(self) -> float:
        return self.now


def taskqueue(url: str, zone: str) -> Any:
    spec = {"redis": {"url": url}, "queues": [{"key": "q"}],
            "scaling": {"pollIntervalSeconds": 60},
            "schedules": [
                {"name": "daily", "cron": "30 2 * * *", "timeZone": zone, "queue": "q"},
                {"name": "quarter", "cron": "*/15 * * * *", "timeZone": zone, "queue": "q"}]}
    return manifest.parse({"kind": "TaskQueue", "metadata": {"name": "t", "namespace": "n"},
                           "spec": spec})


@pytest.mark.parametrize("zone, change, daily, quarter", TRANSITIONS)
async def test_each_slot_fires_once_at_its_documented_instant_across_a_dst_change(
        redis_client: aioredis.Redis, redis_url: str, redis_sync: redis.Redis, zone: str,
        change: datetime.datetime, daily: datetime.datetime,
        quarter: list[datetime.datetime]) -> None:
    start, end = change - 3 * HOUR - QUARTER / 3, change + 3 * HOUR + QUARTER / 3
    clock = Clock(start)
    poller = Poller(kube=cast(Any, None), clock=clock)
    tq = taskqueue(redis_url, zone)
    schema = keys.KeySchema.from_spec(tq.spec)
    record = poller.record("n", "t")
    ref = ObjectRef("n", "t", "uid")
    fired: dict[str, list[tuple[str, datetime.datetime]]] = {"daily": [], "quarter": []}
    while clock.now <= end.timestamp():
        assert await poller.fire(ref, record, redis_client, schema, tq) == {
            SCHEDULES_FIRED: None}
        for member, score in redis_sync.zpopmin(schema.delayed, 10_000):
            task_id = keys.unwrap(keys.Entry.decode(member).element).id
            assert task_id is not None
            due = datetime.datetime.fromtimestamp(score / 1000, UTC)
            fired[task_id.split(":", 1)[0]].append((task_id, due))
        clock.now += 60

    def within(name: str) -> list[datetime.datetime]:
        return [due for _, due in fired[name] if start <= due <= end]

    for name in fired:
        ids = [task_id for task_id, _ in fired[name]]
        assert len(ids) == len(set(ids)), f"{name}: a slot fired twice"
    assert within("daily") == [daily]
    assert within("quarter") == [t for t in quarter if start <= t <= end]
    assert all(f.missed == 0 and f.skipped == 0 for f in record.fired.values())
