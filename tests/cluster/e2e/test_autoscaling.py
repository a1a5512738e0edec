"""End to end: operator + real control plane + process kubelet running real `taskqueue-worker`s.

Three phases as KEDA's e2e tests (activation, scale-out, scale-in), with what KEDA cannot do:
busy pods survive scale-in (pod-deletion-cost, honoured by the real ReplicaSet controller), and a
worker pod deleted mid-task has its tasks requeued at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from taskqueue.api import manifest
from taskqueue.wire import keys
from taskqueue_devcluster import ControlPlane
from tests.fixtures.cluster import ProcessKubeletFactory
from tests.helpers.kube import OperatorThread, apply, events, get, replicas, taskqueue
from tests.helpers.wait import wait_for


def running_pods(cp: ControlPlane, ns: str) -> set[str]:
    pods = get(cp, "pods", "-n", ns, "-l", "taskqueue.dev/taskqueue") or {"items": []}
    return {p["metadata"]["name"] for p in pods["items"]
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"}


def holder(r: redis.Redis, schema: keys.KeySchema) -> str | None:
    for key in r.scan_iter(f"{schema.processing_prefix}*"):
        if r.llen(key):
            return str(key)[len(schema.processing_prefix):]
    return None


def completed(r: redis.Redis, schema: keys.KeySchema) -> int:
    return int(r.hget(schema.stats, "completed") or 0)


def setup(cp: ControlPlane, ns: str, redis_url: str, name: str, **scaling: Any) -> tuple[
        redis.Redis, keys.KeySchema]:
    body = taskqueue(name, redis_url, scaling={"targetBacklogPerReplica": 2, "maxReplicas": 3,
                                               "idleCooldownSeconds": 3, **scaling})
    apply(cp, ns, body)
    schema = keys.KeySchema.from_spec(manifest.parse(body).spec)
    return redis.Redis.from_url(redis_url, decode_responses=True), schema


def test_activation_scale_out_idle_first_scale_in_and_zero(
    control_plane: ControlPlane, namespace: str, chart_operator: Callable[[str], OperatorThread],
    process_kubelet: ProcessKubeletFactory, redis_url: str,
) -> None:
    cp, ns, dep = control_plane, namespace, "e2e-worker"
    process_kubelet(ns)
    chart_operator(ns)
    r, schema = setup(cp, ns, redis_url, "e2e")
    wait_for("Deployment at 0", lambda: replicas(cp, ns, dep) == 0)

    # 1. activation: one task into the idle queue -> 0 -> 1 within a poll (+1 s)
    r.lpush("e2e:jobs", "0.2")
    pushed = time.monotonic()
    wait_for("0 -> 1", lambda: replicas(cp, ns, dep) == 1, every=0.05)
    assert time.monotonic() - pushed <= 2.0
    wait_for("the task done", lambda: completed(r, schema) == 1, timeout=30)

    # 2. scale-out on a burst, bounded by maxReplicas (demand 20 / 2 = 10 -> 3)
    r.lpush("e2e:jobs", *["0.5"] * 20)
    seen: set[int] = set()

    def at_max() -> bool:
        # Pods first: three running pods mean the scale was already 3 when it is read next
        # (each kubectl call takes long enough on a busy machine for the scale-out to happen
        # between two reads in the other order).
        running = running_pods(cp, ns)
        seen.add(replicas(cp, ns, dep) or 0)
        return len(running) == 3
    wait_for("3 running workers", at_max, timeout=30)
    wait_for("burst drained", lambda: completed(r, schema) == 21, timeout=60)
    assert max(seen) == 3

    # 3. idle-first scale-in: hold 3 replicas, give one pod a long task, then allow scale-in
    patch = '{"spec":{"scaling":{"minReplicas":3}}}'
    cp.kubectl("patch", "tq", "e2e", "-n", ns, "--type=merge", "-p", patch)
    wait_for("3 running workers", lambda: len(running_pods(cp, ns)) == 3, timeout=30)
    r.lpush("e2e:jobs", "6")
    busy = wait_for("a worker holding the long task", lambda: holder(r, schema))
    cp.kubectl("patch", "tq", "e2e", "-n", ns, "--type=merge",
               "-p", '{"spec":{"scaling":{"minReplicas":0}}}')
    wait_for("3 -> 1", lambda: replicas(cp, ns, dep) == 1, timeout=10)
    wait_for("idle pods gone", lambda: running_pods(cp, ns) == {busy}, timeout=30)
    pod = get(cp, "pod", busy, "-n", ns)
    assert pod["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"] == "1"
    wait_for("the long task done on the busy pod", lambda: completed(r, schema) == 22, timeout=30)

    # ... and back to zero after the idle cooldown; no task lost, none retried
    wait_for("1 -> 0", lambda: replicas(cp, ns, dep) == 0, timeout=30)
    assert r.llen("e2e:jobs") == 0 and r.llen(schema.dead_letter) == 0
    assert int(r.hget(schema.stats, "recovered") or 0) == 0
    assert get(cp, "tq", "e2e", "-n", ns)["status"]["desiredReplicas"] == 0
    # why it went to 0 (the status may already show a later poll's "hold 0"): the Event says
    assert any(m.startswith(f"{dep} 1 -> 0: ") and "idle" in m
               for m in events(cp, ns, "ScaledDown")), events(cp, ns, "ScaledDown")


def test_worker_pod_deleted_mid_task_requeued_at_once(
    control_plane: ControlPlane, namespace: str, chart_operator: Callable[[str], OperatorThread],
    process_kubelet: ProcessKubeletFactory, redis_url: str,
) -> None:
    cp, ns = control_plane, namespace
    process_kubelet(ns)
    chart_operator(ns)
    r, schema = setup(cp, ns, redis_url, "kill", minReplicas=1, maxReplicas=2)
    wait_for("1 running worker", lambda: len(running_pods(cp, ns)) == 1, timeout=30)
    r.lpush("kill:jobs", "30")
    victim = wait_for("a worker holding the task", lambda: holder(r, schema))
    cp.kubectl("delete", "pod", victim, "-n", ns, "--grace-period=0", "--force")
    deleted = time.monotonic()
    # requeued (attempts 1) into the queue, or already taken again by the replacement pod
    wait_for("requeued", lambda: int(r.hget(schema.stats, "recovered") or 0) == 1, every=0.05)
    assert time.monotonic() - deleted < 3
    new = wait_for("taken by another pod", lambda: (h := holder(r, schema)) != victim and h,
                   timeout=30)
    assert new != victim
    entry = keys.Entry.decode(r.lindex(schema.processing(new), 0) or "")
    assert keys.unwrap(entry.element).attempts == 1
