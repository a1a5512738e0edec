"""Quiesce, then remove, against the real API server + controller-manager and a real redis-server.

The worker pods stay Pending (no kubelet here), so the test plays their workers in Redis: each
pod's name is a worker id whose processing list holds what that "worker" holds. The operator must
quiesce the pods it removes, lower the replica count only by the victims that hold nothing, and
leave a busy victim alone until its list is empty.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from taskqueue.api import manifest
from taskqueue.wire import keys
from taskqueue_devcluster import ControlPlane
from tests.cluster.operator.test_operator import Start
from tests.helpers.kube import apply, get, replicas, taskqueue
from tests.helpers.wait import wait_for


def pods(cp: ControlPlane, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    found = get(cp, "pods", "-n", namespace, "-l", f"taskqueue.dev/taskqueue={name}")
    items = (found or {"items": []})["items"]
    return {p["metadata"]["name"]: p for p in items
            if not p["metadata"].get("deletionTimestamp")}


def hold(r: redis.Redis, schema: keys.KeySchema, pod: str, n: int) -> None:
    """Worker `pod` holds `n` tasks (and is registered alive)."""
    r.delete(schema.processing(pod))
    if n:
        r.lpush(schema.processing(pod),
                *[keys.Entry(schema.queues[0].key, "", f"{pod}-{i}").encode() for i in range(n)])
    r.zadd(schema.workers, {pod: int(time.time() * 1000) + 600_000})


def scaled_out(control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str,
               name: str, tasks: int) -> tuple[dict[str, Any], keys.KeySchema, redis.Redis,
                                              list[str]]:
    """A TaskQueue of one task per replica, scaled out to `tasks` pods by `tasks` queued tasks:
    its manifest, key schema, a Redis client and the pod names (sorted)."""
    tq = taskqueue(name, redis_url, scaling={"targetBacklogPerReplica": 1,
                                             "idleCooldownSeconds": 600})
    schema = keys.KeySchema.from_spec(manifest.parse(tq).spec)
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    run_operator(namespace)
    apply(control_plane, namespace, tq)
    r.lpush(f"{name}:jobs", *[str(i) for i in range(tasks)])
    wait_for(f"{tasks} replicas",
             lambda: replicas(control_plane, namespace, f"{name}-worker") == tasks)
    names = wait_for(f"{tasks} pods", lambda: (lambda p: p if len(p) == tasks else None)(
        pods(control_plane, namespace, name)))
    return tq, schema, r, sorted(names)


def test_only_drained_victims_leave_and_a_busy_one_waits(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    tq, schema, r, names = scaled_out(control_plane, namespace, run_operator, redis_url, "qz", 3)
    # the three tasks are taken: two by the first pod, one by the second, none by the third
    r.delete("qz:jobs")
    busy, other, idle = names
    hold(r, schema, busy, 2)
    hold(r, schema, other, 1)
    hold(r, schema, idle, 0)
    # 3 in flight / 1 per replica = 3: nothing to remove. 3 / 2 -> want 2: the idle pod is the
    # victim (fewest in flight), holds nothing once quiesced, and leaves at once
    tq["spec"]["scaling"]["targetBacklogPerReplica"] = 2
    apply(control_plane, namespace, tq)
    wait_for("2 replicas", lambda: replicas(control_plane, namespace, "qz-worker") == 2)
    left = wait_for("idle pod gone", lambda: (lambda p: p if idle not in p else None)(
        pods(control_plane, namespace, "qz")))
    assert {busy, other} <= set(left)
    # want 1 (3 in flight / 10): the victim is `other` (fewest in flight) but it is busy: it is
    # quiesced, and stays while its processing list holds a task
    tq["spec"]["scaling"]["targetBacklogPerReplica"] = 10
    apply(control_plane, namespace, tq)
    wait_for("other quiesced", lambda: schema.processing(other) in r.smembers(schema.quiesced))
    time.sleep(3)  # three polls
    assert replicas(control_plane, namespace, "qz-worker") == 2
    assert other in pods(control_plane, namespace, "qz")
    annotations = pods(control_plane, namespace, "qz")[busy]["metadata"].get("annotations", {})
    assert annotations.get("controller.kubernetes.io/pod-deletion-cost") == "2"
    # its task done: now it leaves, the busy pod stays
    hold(r, schema, other, 0)
    wait_for("1 replica", lambda: replicas(control_plane, namespace, "qz-worker") == 1)
    wait_for("other gone", lambda: other not in pods(control_plane, namespace, "qz"))
    assert busy in pods(control_plane, namespace, "qz")
    # more work again: the quiesced set is released
    r.lpush("qz:jobs", *[keys.wrap(str(i), enqueued_at=time.time() - 7) for i in range(30)])
    wait_for("released", lambda: not r.smembers(schema.quiesced))
    # the measured wait model in the status (OLDEST column = oldestTaskAgeSeconds)
    status = wait_for("measured status", lambda: (lambda s: s if s.get("waitSeconds") else None)(
        (get(control_plane, "tq", "qz", "-n", namespace) or {}).get("status") or {}))
    assert status["waitSeconds"]["qz:jobs"] >= 7
    assert status["arrivalRate"]["qz:jobs"] > 0
    assert status["serviceSeconds"] > 0
    assert "OLDEST" in control_plane.kubectl("get", "tq", "qz", "-n", namespace).stdout
    # the workers' wait histogram (what their heartbeats add): 100 waits, 10 over 2 s, none
    # over 3 s -> a measured p95 of 2.5 s (written within the 15 s drift throttle)
    counted, *over = keys.wait_fields("qz:jobs")
    r.hset(schema.stats, mapping={counted: 100, over[0]: 40, over[1]: 30, over[2]: 10})
    p95 = wait_for("measured p95", lambda: (
        (get(control_plane, "tq", "qz", "-n", namespace) or {}).get("status") or {}
    ).get("waitP95Seconds", {}).get("qz:jobs"), timeout=40)
    assert p95 == 2.5


def test_busy_workers_that_are_not_pods_by_name_keep_the_count(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    # e.g. a scaleTargetRef Deployment whose workers do not take the pod name as their id
    tq, schema, r, _ = scaled_out(control_plane, namespace, run_operator, redis_url, "st", 3)
    r.delete("st:jobs")
    for worker in ("host-1-abc", "host-2-def"):
        hold(r, schema, worker, 1)
    tq["spec"]["scaling"]["targetBacklogPerReplica"] = 10  # wants 1
    apply(control_plane, namespace, tq)
    # the 15 s stabilisation window, then a poll: 12 s alone, past 30 s once on a loaded CI
    wait_for("2 replicas", lambda: replicas(control_plane, namespace, "st-worker") == 2,
             timeout=60.0)
    time.sleep(3)
    assert replicas(control_plane, namespace, "st-worker") == 2
    reason = (get(control_plane, "tq", "st", "-n", namespace) or {})["status"]["reason"]
    assert "not pod names" in reason


def set_pod_status(cp: ControlPlane, namespace: str, pod: str, *, ready: bool) -> None:
    """What a kubelet reports: the worker runs, and its Ready condition (a readiness probe failing
    under load, or a status not yet updated after the worker started fetching)."""
    flag = "True" if ready else "False"
    status = {"phase": "Running", "conditions": [
        {"type": "ContainersReady", "status": flag}, {"type": "Ready", "status": flag}]}
    cp.kubectl("patch", "pod", pod, "-n", namespace, "--subresource=status", "--type=merge",
               "-p", json.dumps({"status": status}))


def test_a_busy_pod_the_replicaset_deletes_first_is_quiesced_not_deleted(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    # The ReplicaSet deletes a not-Ready pod before a Ready one whatever their deletion costs: an
    # idle Ready victim at -1000 would leave a busy not-Ready pod to be deleted in its place.
    tq, schema, r, (busy, idle) = scaled_out(control_plane, namespace, run_operator, redis_url,
                                             "nr", 2)
    with r.pipeline(transaction=True) as taken:  # in one step: 2 tasks, still 2 replicas
        taken.delete("nr:jobs")
        hold(taken, schema, busy, 2)
        hold(taken, schema, idle, 0)
        taken.execute()
    set_pod_status(control_plane, namespace, idle, ready=True)
    set_pod_status(control_plane, namespace, busy, ready=False)
    # wants 1: the busy not-Ready pod is the one the ReplicaSet would delete, so it is the victim
    tq["spec"]["scaling"]["targetBacklogPerReplica"] = 10
    apply(control_plane, namespace, tq)
    wait_for("a scale-in", lambda: schema.processing(busy) in r.smembers(schema.quiesced)
             or schema.processing(idle) in r.smembers(schema.quiesced))
    time.sleep(3)  # three polls: nothing is removed while it holds its task
    assert busy in pods(control_plane, namespace, "nr"), "the busy not-Ready pod was deleted"
    assert schema.processing(busy) in r.smembers(schema.quiesced)
    assert replicas(control_plane, namespace, "nr-worker") == 2
    assert set(pods(control_plane, namespace, "nr")) == {busy, idle}
    wait_for("the reason says why", lambda: "1 still finishing" in (
        (get(control_plane, "tq", "nr", "-n", namespace) or {}).get("status") or {}
    ).get("reason", ""), timeout=30)
    # its task done, it leaves; the Ready pod stays
    hold(r, schema, busy, 0)
    wait_for("1 replica", lambda: replicas(control_plane, namespace, "nr-worker") == 1)
    wait_for("busy pod gone", lambda: busy not in pods(control_plane, namespace, "nr"))
    assert idle in pods(control_plane, namespace, "nr")
