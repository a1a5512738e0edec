"""Scheduled tasks as demand, end to end: the real operator against a real kube-apiserver and a
real redis-server scales a TaskQueue from 0 before a scheduled task falls due, and reports the
delayed set in its status (seed 004 §1.2 delay queue, operator side)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from taskqueue import client as producer
from taskqueue_devcluster import ControlPlane
from tests.helpers.kube import OperatorThread, apply, get, replicas, taskqueue
from tests.helpers.wait import wait_for

Start = Callable[..., OperatorThread]


def test_seed_004_1_2_task_due_within_poll_plus_startup_activates_workers_early(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    run_operator(namespace)
    apply(control_plane, namespace, taskqueue("sched", redis_url,
                                              scaling={"podStartupSeconds": 20}))
    wait_for("the Deployment", lambda: get(control_plane, "deployment", "sched-worker", "-n",
                                           namespace))
    r = redis.Redis.from_url(redis_url)
    producer.enqueue_sync(r, "sched:jobs", "0.1", delay=3600)  # far: not demand
    time.sleep(2.5)
    assert replicas(control_plane, namespace, "sched-worker") == 0
    producer.enqueue_sync(r, "sched:jobs", "0.1", delay=15)  # within 1 s poll + 20 s start-up
    wait_for("0 -> 1 ahead of the due time",
             lambda: replicas(control_plane, namespace, "sched-worker") == 1, every=0.05)
    status = wait_for("status", lambda: (get(control_plane, "tq", "sched", "-n", namespace)
                                         or {}).get("status", {}).get("dueSoon") == 1)
    assert status
    body = get(control_plane, "tq", "sched", "-n", namespace)
    assert body["status"]["delayed"] == 2 and body["status"]["nextDueTime"]
    assert "1 due soon" in body["status"]["reason"]
