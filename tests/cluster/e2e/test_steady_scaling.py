"""End to end: a steady load for a minute settles at the need (+-1), with a wait target and with
the default length target, and no pod is deleted while its processing list holds a task
(operator + real control plane + process kubelet running real `taskqueue-worker`s with packing
and quiesce)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from taskqueue.api import manifest
from taskqueue.wire import keys
from taskqueue_devcluster import ControlPlane
from tests.cluster.e2e.test_autoscaling import running_pods
from tests.fixtures.cluster import ProcessKubeletFactory
from tests.helpers.kube import OperatorThread, apply, get, replicas, taskqueue
from tests.helpers.wait import wait_for

SERVICE = 0.5


def terminating_busy(cp: ControlPlane, ns: str, r: redis.Redis,
                     schema: keys.KeySchema) -> list[str]:
    """Pods being deleted whose processing list is not empty."""
    pods = get(cp, "pods", "-n", ns, "-l", "taskqueue.dev/taskqueue") or {"items": []}
    return [p["metadata"]["name"] for p in pods["items"]
            if p["metadata"].get("deletionTimestamp")
            and r.llen(schema.processing(p["metadata"]["name"]))]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("rate, concurrency, need, scaling", [
    # ceil(6/s x 0.5 s / 2 slots) = ceil(1.5)
    pytest.param(6.0, 2, 2, {"targetWaitSeconds": {"steady:jobs": 2.0}}, id="wait-target"),
    # 40/s x 0.5 s = 20 busy slots = 5 pods of 4 (6 once the workers' own time per task is
    # counted); 10 tasks per replica alone asks for 2 pods while nothing is queued, the
    # measured load holds the rest (`policy._held_load`)
    pytest.param(40.0, 4, 5, {}, id="default-length-target"),
])
def test_steady_load_settles_at_the_need_and_no_busy_pod_is_deleted(
    control_plane: ControlPlane, namespace: str, chart_operator: Callable[[str], OperatorThread],
    process_kubelet: ProcessKubeletFactory, redis_url: str, rate: float, concurrency: int,
    need: int, scaling: dict[str, object],
) -> None:
    cp, ns, dep = control_plane, namespace, "steady-worker"
    process_kubelet(ns)
    chart_operator(ns)
    body = taskqueue("steady", redis_url,
                     worker={"concurrency": concurrency},
                     scaling={"maxReplicas": 8, "idleCooldownSeconds": 5,
                              "scaleDownStabilizationSeconds": 5, **scaling})
    apply(cp, ns, body)
    schema = keys.KeySchema.from_spec(manifest.parse(body).spec)
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    stop = threading.Event()

    def produce() -> None:
        producer = redis.Redis.from_url(redis_url)
        next_at = time.monotonic()
        while not stop.is_set():
            producer.lpush("steady:jobs", str(SERVICE))
            next_at += 1 / rate
            stop.wait(max(0.0, next_at - time.monotonic()))

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    seen: list[tuple[float, int]] = []
    violations: set[str] = set()
    started = time.monotonic()
    try:
        while time.monotonic() - started < 90:
            seen.append((time.monotonic() - started, replicas(cp, ns, dep) or 0))
            violations.update(terminating_busy(cp, ns, r, schema))
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join(timeout=5)
    print(f"replicas over time: {[(round(t), n) for t, n in seen]}")
    # the last minute: at the need, +-1
    settled = [n for t, n in seen if t >= 30]
    assert settled and all(need - 1 <= n <= need + 1 for n in settled), seen
    assert not violations
    # the load gone: back to zero, nothing requeued by the reaper (no pod left holding a task)
    wait_for("0 replicas", lambda: replicas(cp, ns, dep) == 0, timeout=60)
    wait_for("no pod left", lambda: not running_pods(cp, ns), timeout=60)
    assert int(r.hget(schema.stats, "recovered") or 0) == 0
    assert r.llen(schema.dead_letter) == 0
