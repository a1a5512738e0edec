"""`taskqueue inflight`: each worker's processing list, heartbeat, task ages and progress."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
import redis

from taskqueue.wire import keys
from tests.helpers.cli import Run


def _hold(r: redis.Redis, worker: str, *elements: str, queue: str = "vip") -> None:
    for element in elements:
        r.lpush(f"vip:processing:{worker}", keys.Entry(queue, "", element).encode())


def test_json_lists_each_workers_tasks_with_age_and_heartbeat(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    now = time.time()
    redis_sync.zadd("vip:workers", {"pod-a": (now + 12) * 1000, "pod-idle": (now - 5) * 1000})
    _hold(redis_sync, "pod-a", keys.wrap("resize 1", task_id="t1", enqueued_at=now - 30))
    _hold(redis_sync, "pod-a", keys.wrap("resize 2", task_id="t2", attempts=2,
                                         enqueued_at=now - 3), queue="normal")
    _hold(redis_sync, "ghost", "raw payload")  # a processing list whose worker is gone
    result = cli("inflight", "-f", manifest_file(), "--json")
    assert result.code == 0, result.err
    found = {h["worker"]: h for h in result.json()}
    assert sorted(found) == ["ghost", "pod-a", "pod-idle"]
    a = found["pod-a"]
    assert (a["state"], a["in_flight"]) == ("alive", 2)
    assert a["heartbeat_in_seconds"] == pytest.approx(12, abs=2)
    tasks = {t["id"]: t for t in a["tasks"]}
    assert (tasks["t1"]["queue"], tasks["t1"]["payload"]) == ("vip", "resize 1")
    assert tasks["t1"]["age_seconds"] == pytest.approx(30, abs=2)
    assert (tasks["t2"]["queue"], tasks["t2"]["attempts"]) == ("normal", 2)
    assert (found["pod-idle"]["state"], found["pod-idle"]["tasks"]) == ("expired", [])
    ghost = found["ghost"]
    assert (ghost["state"], ghost["heartbeat_in_seconds"]) == ("unregistered", None)
    assert ghost["tasks"] == [{"queue": "vip", "id": "", "attempts": 0, "age_seconds": None,
                               "progress": None, "payload": "raw payload"}]


def test_text_view_names_the_worker_and_its_tasks(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    now = time.time()
    redis_sync.zadd("vip:workers", {"pod-a": (now + 12) * 1000})
    _hold(redis_sync, "pod-a", *(keys.wrap(f"task {i}", task_id=f"t{i}",
                                           enqueued_at=now - 90) for i in range(3)))
    out = cli("inflight", "-f", manifest_file(), "--limit", "2").out.splitlines()
    assert out[0].split() == ["WORKER", "STATE", "HEARTBEAT", "HOLDS", "QUEUE", "TASK",
                              "ATTEMPTS", "AGE", "PROGRESS", "PAYLOAD"]
    assert out[1].split()[:5] == ["pod-a", "alive", "in", "11s", "3"] or out[1].split()[:5] == [
        "pod-a", "alive", "in", "12s", "3"]
    assert "1m30s" in out[1]
    assert "… 1 more" in out[3]


def test_nothing_in_flight(cli: Run, manifest_file: Callable[..., str]) -> None:
    result = cli("inflight", "-f", manifest_file())
    assert (result.code, result.out) == (0, "no workers registered and no tasks in flight\n")


def test_glob_characters_in_the_prefix_are_escaped(
    cli: Run, redis_url: str, redis_sync: redis.Redis
) -> None:
    redis_sync.lpush("q[1]:processing:w", keys.Entry("q[1]", "", "x").encode())
    redis_sync.lpush("q1:processing:other", keys.Entry("q1", "", "y").encode())
    result = cli("inflight", "--redis-url", redis_url, "--queue", "q[1]", "--json")
    assert [h["worker"] for h in result.json()] == ["w"]


def test_each_task_shows_its_handlers_last_progress_report(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    now = time.time()
    redis_sync.zadd("vip:workers", {"pod-a": (now + 12) * 1000, "pod-b": (now + 12) * 1000})
    _hold(redis_sync, "pod-a", keys.wrap("resize 1", task_id="t1"), keys.wrap("resize 2",
                                                                              task_id="t2"))
    redis_sync.hset("vip:progress:pod-a", mapping={
        "t1": json.dumps({"fraction": 0.4, "message": "copying", "at": now - 3}),
        "gone": json.dumps({"fraction": 1, "message": "", "at": now}),  # a finished task's
        "t2": "not json"})
    _hold(redis_sync, "pod-b", keys.wrap("resize 3", task_id="t3"))
    redis_sync.set("vip:progress:pod-b", "a string")  # another type: read as no report
    result = cli("inflight", "-f", manifest_file(), "--json")
    assert result.code == 0, result.err
    tasks = {t["id"]: t for h in result.json() for t in h["tasks"]}
    assert tasks["t1"]["progress"] == {"fraction": 0.4, "message": "copying",
                                       "at": pytest.approx(now - 3, abs=0.01)}
    assert tasks["t2"]["progress"] is None and tasks["t3"]["progress"] is None
    text = cli("inflight", "-f", manifest_file()).out
    [row] = [line for line in text.splitlines() if "t1" in line]
    assert "40% copying (3s ago)" in row or "40% copying (2s ago)" in row
    assert redis_sync.type("vip:progress:pod-b") == "string"
