"""What a steady TaskQueue costs the API server: no GET of its Deployment (the Deployment watch
is its state between the operator's writes) and no status rewrite every poll, while a change
(tasks pushed, the Deployment scaled by hand) is still acted on and shown within a poll.

Counted by the operator's own request counter (`taskqueue_kube_requests_total{call}`; the
operator runs in this process, one at a time)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from taskqueue.telemetry import metrics
from taskqueue.wire import keys
from taskqueue_devcluster import ControlPlane
from tests.helpers.kube import OperatorThread, apply, events, get, replicas, taskqueue
from tests.helpers.wait import wait_for

Start = Callable[..., OperatorThread]
GET = "read_namespaced_deployment"
PATCH_STATUS = "patch_namespaced_custom_object_status"
WINDOW_SECONDS = 65.0
"""Longer than the 60 s after which the operator used to re-read a Deployment no event had
refreshed, and than four of the former 15 s status rewrites of an aging backlog."""


def requests(call: str) -> float:
    return metrics.OPERATOR.get_sample_value("taskqueue_kube_requests_total",
                                             {"call": call}) or 0.0


def polls(namespace: str, name: str) -> float:
    return metrics.OPERATOR.get_sample_value(
        "taskqueue_poll_duration_seconds_count",
        {"namespace": namespace, "taskqueue": name}) or 0.0


def status(cp: ControlPlane, ns: str, name: str) -> dict[str, object]:
    return dict((get(cp, "tq", name, "-n", ns) or {}).get("status") or {})


def test_a_steady_taskqueue_reads_no_deployment_and_rewrites_no_status(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    cp, ns = control_plane, namespace
    r = redis.Redis.from_url(redis_url)
    # a backlog an hour old that no worker takes (no kubelet: the pods stay Pending)
    hour_ago = time.time() - 3600
    r.lpush("stuck:jobs", *(keys.wrap("0.1", task_id=f"t{i}", enqueued_at=hour_ago)
                            for i in range(3)))
    run_operator(ns)
    apply(cp, ns, taskqueue("idle", redis_url))
    apply(cp, ns, taskqueue("stuck", redis_url, scaling={"maxReplicas": 1}))
    wait_for("both steady", lambda: (
        replicas(cp, ns, "idle-worker") == 0 and replicas(cp, ns, "stuck-worker") == 1
        and status(cp, ns, "stuck").get("totalBacklog") == 3
        and status(cp, ns, "idle").get("totalBacklog") == 0), timeout=30)
    time.sleep(3)  # the Deployment controller's status updates arrive as watch events

    gets, patches = requests(GET), requests(PATCH_STATUS)
    polled = polls(ns, "idle") + polls(ns, "stuck")
    time.sleep(WINDOW_SECONDS)
    polled = polls(ns, "idle") + polls(ns, "stuck") - polled
    assert polled >= 2 * WINDOW_SECONDS * 0.8  # both polled every second
    assert requests(GET) - gets == 0
    # the idle one shows nothing new; the stuck one's age (an hour) is rewritten every
    # quarter of it, at most every 120 s: at most once in the window (every 15 s before)
    assert requests(PATCH_STATUS) - patches <= 1
    # ... and `kubectl get tq` shows it within the 120 s it may lag
    header, row = cp.kubectl("get", "tq", "stuck", "-n", ns).stdout.splitlines()[:2]
    oldest = int(row[header.index("OLDEST"):].split()[0])  # the columns are aligned
    assert time.time() - hour_ago - 121 <= oldest <= time.time() - hour_ago

    # a change is written within a poll (1 s)
    r.lpush("idle:jobs", keys.wrap("0.1", task_id="new"))
    pushed = time.monotonic()
    wait_for("the backlog shown", lambda: status(cp, ns, "idle").get("totalBacklog") == 1,
             every=0.05, timeout=5)
    assert time.monotonic() - pushed <= 1 + 1.0
    r.delete("idle:jobs")
    wait_for("idle again", lambda: status(cp, ns, "idle").get("totalBacklog") == 0
             and replicas(cp, ns, "idle-worker") == 0, timeout=20)

    # scaled behind the operator's back: the watch event brings it, put right without a GET
    gets = requests(GET)
    cp.kubectl("scale", "deployment", "idle-worker", "-n", ns, "--replicas=3")
    wait_for("3 -> back to 0", lambda: any(
        m.startswith("idle-worker 3 -> ") for m in events(cp, ns, "ScaledDown"))
        and replicas(cp, ns, "idle-worker") == 0, timeout=15)
    assert requests(GET) - gets == 0
