"""`taskqueue inflight`: each worker's processing list, heartbeat and task ages."""

from __future__ import annotations

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
                               "payload": "raw payload"}]


def test_text_view_names_the_worker_and_its_tasks(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    now = time.time()
    redis_sync.zadd("vip:workers", {"pod-a": (now + 12) * 1000})
    _hold(redis_sync, "pod-a", *(keys.wrap(f"task {i}", task_id=f"t{i}",
                                           enqueued_at=now - 90) for i in range(3)))
    out = cli("inflight", "-f", manifest_file(), "--limit", "2").out.splitlines()
    assert out[0].split() == ["WORKER", "STATE", "HEARTBEAT", "HOLDS", "QUEUE", "TASK",
                              "ATTEMPTS", "AGE", "PAYLOAD"]
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
