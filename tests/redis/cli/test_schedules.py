"""`taskqueue schedules`: the next slots of each schedule in its zone and in UTC, with what Redis
records of its firing (written here by fire.lua through the operator's own plan)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import redis
import redis.asyncio as aioredis

from taskqueue.api import manifest, schedulespec
from taskqueue.controller import schedules
from taskqueue.redisio import queueops
from taskqueue.wire import keys
from tests.helpers.cli import Run

SCHEDULES = [
    {"name": "nightly", "cron": "30 2 * * *", "timeZone": "Europe/Berlin", "queue": "vip"},
    {"name": "tick", "cron": "* * * * * *", "queue": "normal", "suspend": True},
]


async def test_json_lists_the_next_slots_and_the_firing_record(
        cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis,
        redis_client: aioredis.Redis) -> None:
    path = manifest_file(schedules=SCHEDULES)
    spec = manifest.load(path).spec
    schema = keys.KeySchema.from_spec(spec)
    now = time.time()
    for seen in (None, int(now * 1000)):  # learn `through`, then fire (nothing due: none)
        plans = schedules.plan(spec, schema, seen={"nightly": seen, "tick": seen}, now=now,
                               horizon=2)
        keys_, args = schedules.call(schema, plans)
        await queueops.script("fire")(redis_client, keys=queueops.wire(keys_),
                                      args=queueops.wire(args))
    redis_sync.hset(schema.schedules, mapping={"missed:nightly": 2, "slot:nightly": 1000})
    result = cli("schedules", "-f", path, "--json", "--count", "2")
    assert result.code == 0, result.err
    nightly, tick = (json.loads(line) for line in result.out.splitlines())
    expected = schedulespec.next_slots(spec.schedules[0], after=now, count=2)
    assert [n["utc"] for n in nightly["next"]] == [schedulespec.slot_text(t) for t in expected]
    assert all(n["local"][11:16] in ("02:30", "03:00") for n in nightly["next"])
    assert (nightly["missed"], nightly["lastSlot"]) == (2, "1970-01-01T00:00:01Z")
    assert tick["suspend"] is True and tick["next"] == []


def test_one_schedule_by_name_and_an_unknown_one(
        cli: Run, manifest_file: Callable[..., str]) -> None:
    path = manifest_file(schedules=SCHEDULES)
    result = cli("schedules", "-f", path, "--schedule", "nightly", "--count", "1")
    assert result.code == 0 and "nightly: '30 2 * * *' in Europe/Berlin" in result.out
    assert "tick" not in result.out
    result = cli("schedules", "-f", path, "--schedule", "weekly")
    assert result.code == 2
    assert result.err == ("taskqueue: no schedule named 'weekly' in spec.schedules (names: "
                          "nightly, tick)\n")


def test_queue_flags_are_not_enough(cli: Run) -> None:
    result = cli("schedules", "--queue", "q")
    assert result.code == 2 and "needs a TaskQueue spec" in result.err
