"""The console's read of the workers' progress hashes against a real redis-server: each held
task shows its handler's last report; a hash of another type or an unreadable report is none."""

from __future__ import annotations

import json
import time

import redis
import redis.asyncio as aioredis

from taskqueue.console import reads, views
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.wire import keys

SCHEMA = keys.KeySchema(prefix="vip", queues=(keys.QueueRef("vip"),), dead_letter="vip:dead")


async def test_held_tasks_show_their_last_progress_report(
        redis_client: aioredis.Redis, redis_sync: redis.Redis) -> None:
    now = time.time()
    for worker, tid in (("pod-a", "t1"), ("pod-b", "t2")):
        redis_sync.lpush(SCHEMA.processing(worker),
                         keys.Entry("vip", "", keys.wrap("x", task_id=tid)).encode())
    redis_sync.hset(SCHEMA.progress("pod-a"), mapping={
        "t1": json.dumps({"fraction": 0.75, "message": "resizing", "at": now - 2}),
        "gone": "not json"})
    redis_sync.set(SCHEMA.progress("pod-b"), "a string")
    ids = ["pod-a", "pod-b", "pod-c"]
    held = await reads.held(redis_client, SCHEMA, ids)
    found = await reads.progress(redis_client, SCHEMA, ids)
    assert set(found["pod-a"]) == {"t1"} and found["pod-b"] == {} and found["pod-c"] == {}
    obs = QueueObservation(at=now, backlog={"vip": 0}, workers=tuple(
        WorkerObservation(worker_id=w, deadline_ms=int((now + 10) * 1000), in_flight=1)
        for w in ids))
    rows = {r["id"]: r for r in views.worker_rows(obs, held, now, progress=found)}
    assert rows["pod-a"]["tasks"][0]["progress"] in ("75% resizing (2s ago)",
                                                      "75% resizing (1s ago)")
    assert rows["pod-b"]["tasks"][0]["progress"] == ""
    assert redis_sync.type(SCHEMA.progress("pod-b")) == "string"
