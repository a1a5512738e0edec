"""The operator against a real kube-apiserver + controller-manager and a real redis-server."""

from __future__ import annotations

import base64
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from taskqueue import client
from taskqueue.api import manifest
from taskqueue.controller.kube import KubeClient
from taskqueue.controller.leader import LeaderElector
from taskqueue.wire import keys
from taskqueue_devcluster import ControlPlane
from tests.fixtures.redis_server import RedisServer
from tests.helpers.kube import (
    OperatorThread,
    apply,
    condition,
    events,
    get,
    replicas,
    taskqueue,
)
from tests.helpers.wait import wait_for
from tests.redis.worker import procs

Start = Callable[..., OperatorThread]


# -- the API server rejects what the schema can say ------------------------------------------------
@pytest.mark.parametrize("spec, field", [
    pytest.param({"scaling": {"minReplicas": 5, "maxReplicas": 2}}, "minReplicas", id="min>max"),
    pytest.param({"redis": {"url": "redis://r:6379", "urlSecretRef": {"name": "s", "key": "k"}}},
                 "urlSecretRef", id="url-and-secret"),
    pytest.param({"redis": {"url": "http://r"}}, "spec.redis.url", id="bad-url-scheme"),
    pytest.param({"worker": {"handler": "m:f", "command": ["x"]}}, "command",
                 id="handler-and-command"),
    pytest.param({"queues": [{"key": "a"}, {"key": "a"}]}, "spec.queues", id="duplicate-keys"),
    pytest.param({"scaling": {"pollIntervalSeconds": 0.5}}, "pollIntervalSeconds",
                 id="poll-too-fast"),
    pytest.param({"delivery": "Sometimes"}, "spec.delivery", id="bad-enum"),
    pytest.param({"history": {"retentionSeconds": 604800, "intervalSeconds": 1}},
                 "more than 100000 history points", id="history-too-long"),
    pytest.param({"queues": [{"key": "a"}, {"key": "a:history"}]}, "own keys",
                 id="queue-is-the-history-stream"),
    pytest.param({"queues": [{"key": "has space"}]}, "spec.queues[0].key", id="bad-key"),
    pytest.param({"redis": {"url": "redis://r", "mode": "cluster"},
                  "queues": [{"key": "{a}:x"}, {"key": "a:y"}]}, "must share one hash tag",
                 id="cluster-queue-without-the-tag"),
    pytest.param({"redis": {"url": "redis+cluster://r"}, "queues": [{"key": "{a}:x"}],
                  "retry": {"deadLetterKey": "{b}:dead"}}, "must share one hash tag",
                 id="cluster-dead-letter-other-tag"),
    pytest.param({"redis": {"url": "redis://r", "mode": "cluster"},
                  "queues": [{"key": "a{}b{a}"}]}, "must share one hash tag",
                 id="cluster-empty-first-tag"),
])
def test_invalid_manifests_rejected_naming_the_field(
    control_plane: ControlPlane, crd: None, namespace: str, spec: dict[str, Any], field: str
) -> None:
    manifest_ = taskqueue("bad", "redis://r:6379/0")
    manifest_["spec"].update(spec)
    proc = apply(control_plane, namespace, manifest_, check=False)
    assert proc.returncode != 0
    assert field in proc.stderr, proc.stderr


@pytest.mark.parametrize("spec", [
    pytest.param({"redis": {"url": "redis://r", "mode": "cluster"},
                  "queues": [{"key": "{a}:x"}, {"key": "x{a}y"}], "keyPrefix": "{a}:p"},
                 id="cluster-one-tag"),
    pytest.param({"redis": {"url": "redis://r"}, "queues": [{"key": "a"}, {"key": "b"}]},
                 id="one-server-no-tag"),
])
def test_valid_topologies_accepted(control_plane: ControlPlane, crd: None, namespace: str,
                                   spec: dict[str, Any]) -> None:
    manifest_ = taskqueue("ok", "redis://r:6379/0")
    manifest_["spec"].update(spec)
    proc = apply(control_plane, namespace, manifest_, check=False)
    assert proc.returncode == 0, proc.stderr
    manifest.parse(manifest_)  # and pydantic agrees


def test_defaults_applied_by_the_api_server(
    control_plane: ControlPlane, crd: None, namespace: str
) -> None:
    apply(control_plane, namespace, {
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue", "metadata": {"name": "d"},
        "spec": {"redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "q"}]},
    })
    body = get(control_plane, "tq", "d", "-n", namespace)
    assert body["spec"]["scaling"]["pollIntervalSeconds"] == 2
    assert body["spec"]["delivery"] == "AtLeastOnce"
    assert manifest.parse(body).spec.scaling.maxReplicas == 10


# -- workload, activation, status ------------------------------------------------------------------
def test_deployment_created_owned_and_activated_within_a_poll(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    run_operator(namespace)
    apply(control_plane, namespace, taskqueue("act", redis_url))
    deployment = wait_for("the Deployment", lambda: get(
        control_plane, "deployment", "act-worker", "-n", namespace))
    (owner,) = deployment["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TaskQueue", "act", True)
    assert deployment["spec"]["replicas"] == 0
    wait_for("RedisReachable", lambda: (condition(control_plane, namespace, "act",
                                                  "RedisReachable") or {}).get("status") == "True")

    redis.Redis.from_url(redis_url).lpush("act:jobs", "0.1")
    pushed = time.monotonic()
    wait_for("0 -> 1", lambda: replicas(control_plane, namespace, "act-worker") == 1, every=0.05)
    assert time.monotonic() - pushed <= 1 + 1.0  # pollIntervalSeconds + 1 s
    wait_for("status", lambda: (get(control_plane, "tq", "act", "-n", namespace)
                                or {}).get("status", {}).get("desiredReplicas") == 1)
    body = get(control_plane, "tq", "act", "-n", namespace)
    assert body["status"]["totalBacklog"] == 1 and body["status"]["backlog"] == {"act:jobs": 1}
    # the reason is the latest poll's: "scale up 0 -> 1", or "hold 1" once the next poll ran
    assert "demand 1 (1 queued + 0 in flight)" in body["status"]["reason"]
    assert any("0 -> 1" in m for m in events(control_plane, namespace, "ScaledUp"))
    columns = control_plane.kubectl("get", "tq", "act", "-n", namespace).stdout
    assert "BACKLOG" in columns and "IN-FLIGHT" in columns and "DESIRED" in columns


def test_deployment_scaled_by_hand_is_noticed_and_a_deleted_one_recreated(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    """The poll uses the Deployment as the watch last saw it, not a GET: changes still count."""
    cp, ns = control_plane, namespace
    run_operator(ns)
    apply(cp, ns, taskqueue("hand", redis_url))
    first = wait_for("the Deployment", lambda: get(cp, "deployment", "hand-worker", "-n", ns))
    wait_for("RedisReachable", lambda: (condition(cp, ns, "hand", "RedisReachable")
                                        or {}).get("status") == "True")
    time.sleep(2)  # several polls on the cached Deployment
    cp.kubectl("scale", "deployment", "hand-worker", "-n", ns, "--replicas=3")
    wait_for("3 -> back to 0 (idle)", lambda: any(
        m.startswith("hand-worker 3 -> ") for m in events(cp, ns, "ScaledDown")), timeout=10)
    wait_for("back to 0", lambda: replicas(cp, ns, "hand-worker") == 0, timeout=10)

    cp.kubectl("delete", "deployment", "hand-worker", "-n", ns, "--wait=true")
    again = wait_for("recreated", lambda: get(cp, "deployment", "hand-worker", "-n", ns),
                     timeout=10)
    assert again["metadata"]["uid"] != first["metadata"]["uid"]

    redis.Redis.from_url(redis_url).lpush("hand:jobs", "0.1")
    wait_for("0 -> 1 on the new one", lambda: replicas(cp, ns, "hand-worker") == 1, timeout=5)


def test_unreadable_redis_shows_an_unknown_backlog_not_zero(
    control_plane: ControlPlane, namespace: str, run_operator: Start, tmp_path: Path
) -> None:
    """While Redis cannot be read the counts are removed (BACKLOG empty, not 0)."""
    cp, ns = control_plane, namespace
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        run_operator(ns)
        apply(cp, ns, taskqueue("gone", server.url))
        redis.Redis.from_url(server.url).lpush("gone:jobs", "x", "y")
        wait_for("backlog 2", lambda: ((get(cp, "tq", "gone", "-n", ns) or {})
                                       .get("status") or {}).get("totalBacklog") == 2)
    finally:
        server.stop()
    down = wait_for("RedisReachable=False", lambda: (
        c := condition(cp, ns, "gone", "RedisReachable")) and c["status"] == "False" and c)
    assert f"127.0.0.1:{server.port}" in down["message"]
    status = wait_for("the counts removed", lambda: (
        s := (get(cp, "tq", "gone", "-n", ns) or {}).get("status") or {}) and
        "totalBacklog" not in s and s)
    assert not {"backlog", "inFlight", "workers"} & status.keys()
    header, row = cp.kubectl("get", "tq", "gone", "-n", ns).stdout.splitlines()[:2]
    backlog = row[header.index("BACKLOG"):header.index("IN-FLIGHT")].strip()
    assert backlog in ("", "<none>"), (header, row)  # unknown, not 0


def test_a_spec_change_is_acted_on_before_the_next_poll(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    """The update handler wakes the daemon: the Deployment follows a new spec at once."""
    cp, ns = control_plane, namespace
    run_operator(ns)
    apply(cp, ns, taskqueue("slow", redis_url, scaling={"pollIntervalSeconds": 60}))
    first = wait_for("the Deployment", lambda: get(cp, "deployment", "slow-worker", "-n", ns))
    apply(cp, ns, taskqueue("slow", redis_url, scaling={"pollIntervalSeconds": 60},
                            worker={"handler": "taskqueue.worker.builtin:noop"}))
    changed = wait_for("the new spec in the Deployment", lambda: (
        d := get(cp, "deployment", "slow-worker", "-n", ns)) and d["metadata"]["annotations"][
        "taskqueue.dev/spec-hash"] != first["metadata"]["annotations"][
        "taskqueue.dev/spec-hash"] and d, timeout=15)
    assert "taskqueue.worker.builtin:noop" in str(changed["spec"]["template"])


def test_redis_url_from_a_secret_and_a_missing_secret_reported(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "redis-auth"},
              "data": {"url": base64.b64encode(redis_url.encode()).decode()}}
    apply(control_plane, namespace, secret)
    run_operator(namespace)
    apply(control_plane, namespace, taskqueue(
        "sec", "", redis={"url": None, "urlSecretRef": {"name": "redis-auth", "key": "url"}}))
    apply(control_plane, namespace, taskqueue(
        "nosec", "", redis={"url": None, "urlSecretRef": {"name": "missing", "key": "url"}}))
    redis.Redis.from_url(redis_url).lpush("sec:jobs", "x")
    wait_for("sec scaled", lambda: replicas(control_plane, namespace, "sec-worker") == 1)
    env = get(control_plane, "deployment", "sec-worker", "-n", namespace)["spec"]["template"][
        "spec"]["containers"][0]["env"]
    assert {"name": "TASKQUEUE_REDIS_URL",
            "valueFrom": {"secretKeyRef": {"name": "redis-auth", "key": "url"}}} in env
    ready = wait_for("Ready=False on nosec", lambda: condition(
        control_plane, namespace, "nosec", "Ready"))
    assert ready["status"] == "False"
    assert "spec.redis.urlSecretRef" in ready["message"] and "create it" in ready["message"]
    assert any("missing" in m for m in events(control_plane, namespace, "InvalidSpec"))


def test_paused_holds_and_scale_target_ref_missing_is_reported(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    run_operator(namespace)
    apply(control_plane, namespace, taskqueue("ext", redis_url, scaleTargetRef={"name": "nope"}))
    ready = wait_for("Ready=False", lambda: condition(control_plane, namespace, "ext", "Ready"))
    assert "spec.scaleTargetRef.name" in ready["message"]
    apply(control_plane, namespace, taskqueue("p", redis_url, scaling={"paused": True}))
    redis.Redis.from_url(redis_url).lpush("p:jobs", "x")
    wait_for("Scaling=False Paused", lambda: (condition(control_plane, namespace, "p", "Scaling")
                                              or {}).get("reason") == "Paused")
    assert replicas(control_plane, namespace, "p-worker") == 0


# -- reaper ----------------------------------------------------------------------------------------
def test_deleted_worker_pod_tasks_requeued_at_once(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    run_operator(namespace)
    apply(control_plane, namespace, taskqueue("reap", redis_url))
    wait_for("status", lambda: condition(control_plane, namespace, "reap", "RedisReachable"))
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "reap-worker-abc", "labels": {"taskqueue.dev/taskqueue": "reap"}},
           "spec": {"containers": [{"name": "w", "image": "x"}]}}
    apply(control_plane, namespace, pod)
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    schema = keys.KeySchema.from_spec(manifest.parse(taskqueue("reap", redis_url)).spec)
    held = [keys.Entry("reap:jobs", "", keys.wrap(f"t{i}")).encode() for i in range(3)]
    r.lpush(schema.processing("reap-worker-abc"), *held)
    r.zadd(schema.workers, {"reap-worker-abc": int(time.time() * 1000) + 60_000})
    deleted = time.monotonic()
    control_plane.kubectl("delete", "pod", "reap-worker-abc", "-n", namespace, "--grace-period=0",
                          "--force")
    wait_for("requeued", lambda: r.llen("reap:jobs") == 3, every=0.05)
    assert time.monotonic() - deleted < 3
    assert r.llen(schema.processing("reap-worker-abc")) == 0
    assert r.zscore(schema.workers, "reap-worker-abc") is None
    assert [keys.unwrap(e).attempts for e in r.lrange("reap:jobs", 0, -1)] == [1, 1, 1]
    wait_for("RecoveredTasks event", lambda: events(control_plane, namespace, "RecoveredTasks"))


def test_a_deleted_pods_tracked_task_shows_queued_once_the_reaper_requeues_it(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str,
    tmp_path: Path,
) -> None:
    """spec.worker.tracking: a real worker process (the pod's id) runs a tracked task and is
    SIGKILLed; the pod is deleted; the reaper's recovery indexes the task as queued again."""
    run_operator(namespace)
    tq = taskqueue("track", redis_url, worker={"tracking": True})
    apply(control_plane, namespace, tq)
    wait_for("status", lambda: condition(control_plane, namespace, "track", "RedisReachable"))
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "track-worker-abc",
                        "labels": {"taskqueue.dev/taskqueue": "track"}},
           "spec": {"containers": [{"name": "w", "image": "x"}]}}
    apply(control_plane, namespace, pod)
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    task = client.enqueue_sync(r, "track:jobs", "long", track=True)
    with procs.running(redis_url, "--queue", "track:jobs", "--tracking", "--worker-id",
                       "track-worker-abc", "--handler", "tests.helpers.handlers:until_cancelled",
                       log_path=tmp_path / "worker.log") as proc:
        wait_for("the task running", lambda: client.status_sync(
            r, task, key_prefix="track:jobs").worker == "track-worker-abc")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert client.status_sync(r, task, key_prefix="track:jobs").state == "running"
    control_plane.kubectl("delete", "pod", "track-worker-abc", "-n", namespace,
                          "--grace-period=0", "--force")
    wait_for("requeued", lambda: r.llen("track:jobs") == 1)
    requeued = client.status_sync(r, task, key_prefix="track:jobs")
    assert (requeued.state, requeued.queue, requeued.worker) == ("queued", "track:jobs", "")


# -- garbage collection ----------------------------------------------------------------------------
def test_deleting_the_taskqueue_deletes_its_deployment_not_a_scale_target(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    run_operator(namespace)
    mine = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mine"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "mine"}},
                     "template": {"metadata": {"labels": {"app": "mine"}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    apply(control_plane, namespace, mine)
    apply(control_plane, namespace, taskqueue("owned", redis_url))
    apply(control_plane, namespace, taskqueue("ext", redis_url, scaleTargetRef={"name": "mine"}))
    redis.Redis.from_url(redis_url).lpush("ext:jobs", "x")
    wait_for("owned Deployment", lambda: get(control_plane, "deployment", "owned-worker", "-n",
                                             namespace))
    wait_for("mine scaled by ext", lambda: replicas(control_plane, namespace, "mine") == 1)
    control_plane.kubectl("delete", "tq", "owned", "ext", "-n", namespace, "--timeout=30s")
    wait_for("GC of owned-worker", lambda: get(control_plane, "deployment", "owned-worker", "-n",
                                               namespace) is None)
    time.sleep(1)
    survivor = get(control_plane, "deployment", "mine", "-n", namespace)
    assert survivor is not None and not survivor["metadata"].get("ownerReferences")


# -- HA --------------------------------------------------------------------------------------------
def test_lease_has_one_holder_and_is_handed_over_on_release(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = KubeClient(str(control_plane.kubeconfig))
    try:
        a = LeaderElector(client.api, namespace, "tq-op", "a", lease_seconds=2)
        b = LeaderElector(client.api, namespace, "tq-op", "b", lease_seconds=2)
        assert a.try_acquire()
        assert not b.try_acquire()
        assert a.try_acquire()  # renew
        a.release()
        assert b.try_acquire()
        assert not a.try_acquire()
        time.sleep(2.5)  # b stops renewing: the lease expires
        assert a.try_acquire()
    finally:
        client.close()


def test_standby_operator_does_not_act_until_the_leader_stops(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    leader = run_operator(namespace)
    standby = run_operator(namespace, wait_ready=False)
    apply(control_plane, namespace, taskqueue("ha", redis_url))
    wait_for("Deployment", lambda: get(control_plane, "deployment", "ha-worker", "-n", namespace))
    assert not standby.ready.is_set()
    lease = get(control_plane, "lease", "taskqueue-operator", "-n", namespace)
    assert lease["spec"]["holderIdentity"]
    leader.stop()
    wait_for("standby takes over", standby.ready.is_set, timeout=15)
    redis.Redis.from_url(redis_url).lpush("ha:jobs", "x")
    wait_for("scaled by the new leader", lambda: replicas(control_plane, namespace,
                                                          "ha-worker") == 1)


def test_console_script_exits_0_on_sigterm_and_releases_the_lease(
    control_plane: ControlPlane, namespace: str, crd: None, tmp_path: Path
) -> None:
    """In a pod the operator is the main thread, where kopf takes over SIGTERM: still exit 0."""
    log = (tmp_path / "operator.log").open("wb")
    proc = subprocess.Popen(
        ["taskqueue-operator", "--kubeconfig", str(control_plane.kubeconfig),
         "--namespace", namespace, "--leader-election-namespace", namespace,
         "--metrics-port", "0", "--health-port", "0"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        wait_for("the Lease", lambda: (get(control_plane, "lease", "taskqueue-operator",
                                           "-n", namespace) or {}).get("spec", {})
                 .get("holderIdentity"), timeout=30)
        time.sleep(1)  # kopf is up and has its handlers installed
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, (tmp_path / "operator.log").read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    lease = get(control_plane, "lease", "taskqueue-operator", "-n", namespace)
    assert not lease["spec"].get("holderIdentity")
