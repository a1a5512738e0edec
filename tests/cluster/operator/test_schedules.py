"""Schedules end to end: real `taskqueue-operator` processes against a real kube-apiserver and a
real redis-server. Two operators race on one TaskQueue (no leader election), one is SIGKILLed
at a slot, then both are down for longer than catchUpSeconds: every slot is fired exactly once
or counted as missed, never both, and the status and `kubectl get tq` show the schedule. Two
leader-elected operators: the leader SIGKILLed at a slot, the standby taking the Lease over,
then redis-server (AOF, fsync always) SIGKILLed and restarted under it: every slot fired once,
none missed (the gap is within catchUpSeconds)."""

from __future__ import annotations

import calendar
import shutil
import signal
import subprocess
import time
from collections import Counter
from typing import Any

import redis

from taskqueue.wire import keys
from taskqueue_devcluster import ControlPlane
from tests.fixtures.processes import Spawn
from tests.fixtures.redis_server import RedisServer
from tests.helpers.kube import apply, get, taskqueue
from tests.helpers.wait import wait_for

CATCH_UP = 3


def _operator(spawn: Spawn, cp: ControlPlane, namespace: str, *, elect: bool = False,
              ) -> subprocess.Popen[bytes]:
    exe = shutil.which("taskqueue-operator")
    assert exe is not None
    election = (["--leader-election-namespace", namespace] if elect
                else ["--no-leader-election"])
    return spawn([exe, "--namespace", namespace, *election, "--health-port", "0",
                  "--metrics-port", "0", "--kubeconfig", str(cp.kubeconfig)])


def _task_ids(r: redis.Redis, queue: str = "sch:jobs") -> list[str]:
    """The ids of the tasks fired (no worker runs: they are in the delayed zset or the queue)."""
    entries = [keys.Entry.decode(e).element for e in r.zrange(f"{queue}:delayed", 0, -1)]
    return [keys.unwrap(e).id for e in entries + r.lrange(queue, 0, -1)]


def _seconds(ids: list[str]) -> list[int]:
    stamps = [i.removeprefix("tick:") for i in ids]
    return sorted(calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ")) for s in stamps)


def test_every_slot_fires_once_or_is_missed_through_races_kills_and_downtime(
        control_plane: ControlPlane, namespace: str, crd: None, spawn_process: Spawn,
        redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    apply(control_plane, namespace, taskqueue(
        "sch", redis_url,
        scaling={"maxReplicas": 1, "pollIntervalSeconds": 1, "podStartupSeconds": 0},
        schedules=[{"name": "tick", "cron": "* * * * * *", "queue": "sch:jobs",
                    "payload": "hello", "catchUpSeconds": CATCH_UP}]))
    first, second = (_operator(spawn_process, control_plane, namespace) for _ in range(2))
    wait_for("slots fired", lambda: len(_task_ids(r)) >= 5, timeout=120)
    # SIGKILL one operator right at a slot boundary; the other goes on
    time.sleep(1 - time.time() % 1)
    first.send_signal(signal.SIGKILL)
    count = len(_task_ids(r))
    wait_for("the survivor fires on", lambda: len(_task_ids(r)) >= count + 3, timeout=60)
    second.send_signal(signal.SIGKILL)
    second.wait()
    # down for longer than the fire-ahead horizon (1 s poll + 0 s start-up + 1 s) plus
    # catchUpSeconds: some slots are missed
    time.sleep(CATCH_UP + 6)
    third = _operator(spawn_process, control_plane, namespace)
    status = wait_for("missed slots in the status", lambda: ((get(
        control_plane, "tq", "sch", "-n", namespace) or {}).get("status", {})
        .get("schedules", {}).get("tick", {}).get("missed", 0) > 0), timeout=120)
    assert status
    count = len(_task_ids(r))
    wait_for("firing after the gap", lambda: len(_task_ids(r)) >= count + 3, timeout=60)
    third.send_signal(signal.SIGKILL)
    third.wait()

    ids = _task_ids(r)
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    fired = _seconds(ids)
    gaps = sorted(set(range(fired[0], fired[-1] + 1)) - set(fired))
    missed = int(r.hget("sch:jobs:schedules", "missed:tick") or 0)
    assert missed == len(gaps) > 0  # each slot of the range is either fired or missed
    assert gaps == list(range(gaps[0], gaps[-1] + 1))  # the missed ones: one run, the gap
    assert all(keys.unwrap(keys.Entry.decode(e).element).payload == "hello"
               for e in r.zrange("sch:jobs:delayed", 0, -1))
    body = get(control_plane, "tq", "sch", "-n", namespace)
    tick = body["status"]["schedules"]["tick"]
    assert tick["lastTaskId"].startswith("tick:") and tick["nextSlotTime"]
    assert body["status"]["nextScheduleTime"]
    table = control_plane.kubectl("get", "tq", "sch", "-n", namespace).stdout
    assert "NEXT-SCHEDULE" in table.splitlines()[0]


def _holder(cp: ControlPlane, namespace: str) -> str:
    lease = get(cp, "lease", "taskqueue-operator", "-n", namespace) or {}
    return str(lease.get("spec", {}).get("holderIdentity") or "")


def test_a_killed_leader_and_a_redis_restart_with_aof_fire_every_slot_exactly_once(
        control_plane: ControlPlane, namespace: str, crd: None, spawn_process: Spawn,
        redis_factory: Any) -> None:
    server: RedisServer = redis_factory(appendonly=True)
    r = redis.Redis.from_url(server.url, decode_responses=True)
    apply(control_plane, namespace, taskqueue(
        "ha", server.url,
        scaling={"maxReplicas": 1, "pollIntervalSeconds": 1, "podStartupSeconds": 0},
        schedules=[{"name": "tick", "cron": "* * * * * *", "queue": "ha:jobs",
                    "payload": "hello", "catchUpSeconds": 60}]))
    leader = _operator(spawn_process, control_plane, namespace, elect=True)
    first_holder = wait_for("the Lease", lambda: _holder(control_plane, namespace), timeout=60)
    standby = _operator(spawn_process, control_plane, namespace, elect=True)
    wait_for("slots fired by the leader", lambda: len(_task_ids(r, "ha:jobs")) >= 5,
             timeout=120)
    # SIGKILL the leader at a slot boundary (it fires each poll, 1 s apart, 2 s ahead); the
    # standby takes the Lease once it expires (15 s) and fires the gap as catch-up
    time.sleep(1 - time.time() % 1)
    leader.send_signal(signal.SIGKILL)
    leader.wait()
    count = len(_task_ids(r, "ha:jobs"))
    wait_for("the standby to take the Lease",
             lambda: _holder(control_plane, namespace) not in ("", first_holder), timeout=60)
    wait_for("the new leader firing", lambda: len(_task_ids(r, "ha:jobs")) >= count + 3,
             timeout=60)
    # redis-server SIGKILLed (every acknowledged write is in the AOF) and restarted in place
    server.restart(down_seconds=2)
    count = len(_task_ids(r, "ha:jobs"))
    wait_for("firing after the Redis restart",
             lambda: len(_task_ids(r, "ha:jobs")) >= count + 3, timeout=60)
    standby.send_signal(signal.SIGKILL)
    standby.wait()

    ids = _task_ids(r, "ha:jobs")
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    fired = _seconds(ids)
    assert sorted(set(range(fired[0], fired[-1] + 1)) - set(fired)) == []
    assert int(r.hget("ha:jobs:schedules", "missed:tick") or 0) == 0
