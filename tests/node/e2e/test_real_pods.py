"""The chart and the operator on a real node: kubelet + containerd + runc, real pods.

One release for the module, in order: the operator pod (its ServiceAccount, in-cluster config,
leader election, probes, metrics); `helm test`, its pod reaching the operator through the metrics
Service (kube-proxy's rules), and failing when the Service has no endpoint; Service names
resolved by the cluster DNS (CoreDNS); a TaskQueue whose
worker image is built `FROM` the base with the handler package `e2etasks`; activation 0 -> 1; a
burst scaling out to maxReplicas; idle scale-in to zero, the kubelet delivering SIGTERM (workers
deregister: they drained); a worker pod deleted mid-task (its task requeued and finished
elsewhere); a container SIGKILLed mid-task behind the kubelet's back (restarted in place; the
restarted worker recovers its task).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.node.e2e.conftest import HANDLER_IMAGE, NodeCluster, uninstall_release

# The first test also pays for the fixtures: images, control plane, node, helm install --wait.
pytestmark = pytest.mark.timeout(900)

CHART = Path(__file__).resolve().parents[3] / "charts" / "taskqueue-operator"
NS = "e2e-node"
RELEASE = "tq"
TQ = "jobs"
QUEUE = "jobs:q"


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 120,
             diagnose: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout}s waiting for {what}\n{diagnose()}")


class Cluster:
    """kubectl/redis helpers over the module's release."""

    def __init__(self, nc: NodeCluster) -> None:
        self.nc = nc
        self.r = redis.Redis(port=nc.redis.port, decode_responses=True)

    def get(self, *args: str) -> Any:
        return json.loads(self.nc.cp.kubectl("get", "-n", NS, "-o", "json", *args).stdout)

    def pods(self, selector: str, *, terminating: bool = False) -> list[Any]:
        """The pods matching `selector`; those being deleted only with `terminating`."""
        return [p for p in self.get("pods", "-l", selector)["items"]
                if terminating or not p["metadata"].get("deletionTimestamp")]

    def worker_pods(self) -> list[Any]:
        return self.pods(f"taskqueue.dev/taskqueue={TQ}")

    def running_workers(self) -> list[str]:
        return [p["metadata"]["name"] for p in self.worker_pods()
                if p["status"].get("phase") == "Running"
                and all(c.get("ready") for c in p["status"].get("containerStatuses", []))]

    def replicas(self) -> int:
        dep = self.get("deployment", f"{TQ}-worker")
        return int(dep["spec"].get("replicas", 0))

    def completed(self) -> int:
        return int(self.r.hget(f"{QUEUE}:stats", "completed") or 0)

    def holder(self) -> str | None:
        """The worker (pod name) whose processing list is not empty, if any."""
        for key in self.r.scan_iter(f"{QUEUE}:processing:*"):
            if self.r.llen(key):
                return str(key).rsplit(":", 1)[1]
        return None

    def registered(self) -> str:
        """The workers zset (id, deadline ms) beside Redis's clock and the quiesced set."""
        sec, usec = self.r.time()
        return (f"redis now {sec * 1000 + usec // 1000} ms; workers "
                f"{self.r.zrange(f'{QUEUE}:workers', 0, -1, withscores=True)}; quiesced "
                f"{sorted(self.r.smembers(f'{QUEUE}:quiesced'))}")

    def diagnose(self) -> str:
        out = self.nc.cp.kubectl("get", "pods,deploy,tq", "-n", NS, "-o", "wide", check=False)
        return (out.stdout + out.stderr + "\n--- kubelet:\n" + self.nc.node.log_tail("kubelet", 15)
                + "\n--- containerd:\n" + self.nc.node.log_tail("containerd", 10))


def taskqueue(redis_url: str) -> dict[str, Any]:
    return {
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": TQ, "namespace": NS},
        "spec": {
            "redis": {"url": redis_url},
            "queues": [{"key": QUEUE}],
            "worker": {"image": HANDLER_IMAGE, "handler": "e2etasks.tasks:work",
                       "concurrency": 1, "terminationGracePeriodSeconds": 5,
                       "heartbeatSeconds": 2},
            "scaling": {"minReplicas": 0, "maxReplicas": 3, "targetBacklogPerReplica": 2,
                        "pollIntervalSeconds": 1, "idleCooldownSeconds": 4},
        },
    }


@pytest.fixture(scope="module")
def cluster(node_cluster: NodeCluster) -> Iterator[Cluster]:
    cp = node_cluster.cp
    cp.kubectl("create", "namespace", NS)
    c = Cluster(node_cluster)
    try:
        cp.helm("install", RELEASE, str(CHART), "-n", NS, "--set", f"watchNamespaces={{{NS}}}",
                "--wait", "--timeout", "240s", timeout=300)
    except Exception:
        print(c.diagnose())
        raise
    cp.kubectl("apply", "-f", "-", input=json.dumps(taskqueue(node_cluster.redis_url_for_pods)))
    yield c
    uninstall_release(cp, release=RELEASE, namespace=NS, taskqueues=[TQ])


def test_operator_runs_as_a_pod_with_its_service_account(cluster: Cluster) -> None:
    [pod] = cluster.pods("app.kubernetes.io/name=taskqueue-operator")
    assert pod["spec"]["serviceAccountName"] == f"{RELEASE}-taskqueue-operator"
    [status] = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0, status
    assert status["imageID"], "the kubelet reports the image it ran"
    lease = wait_for(lambda: cluster.get("lease", "taskqueue-operator")["spec"]
                     .get("holderIdentity"), "the operator to take its Lease")
    assert lease.startswith(pod["metadata"]["name"]), lease
    url = f"http://{pod['status']['podIP']}:9090/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert "taskqueue_poll_duration_seconds" in resp.read().decode()


def test_helm_test_passes_through_the_service(cluster: Cluster) -> None:
    """The chart's test pod runs on the node and reaches the operator through its Service's
    ClusterIP (kube-proxy's rules), found by the variables the kubelet injects."""
    out = cluster.nc.cp.helm("test", RELEASE, "-n", NS, "--logs", "--timeout", "180s",
                             timeout=240).stdout
    assert re.search(r"Phase:\s+Succeeded", out), out
    service = cluster.get("service", f"{RELEASE}-taskqueue-operator-metrics")
    assert f"ok: http://{service['spec']['clusterIP']}:9090/metrics" in out, out


DNS_CHECK = """
import socket, sys, urllib.request
for name in sys.argv[1:]:
    print(name, socket.gethostbyname(name))
with urllib.request.urlopen(f"http://{sys.argv[1]}:9090/metrics", timeout=10) as resp:
    print("metrics", resp.status)
"""


def test_pods_resolve_service_names_through_the_cluster_dns(cluster: Cluster) -> None:
    """CoreDNS behind the kube-dns Service: a pod resolves Service names (short, and fully
    qualified) to their ClusterIPs and reaches the operator by name."""
    service = f"{RELEASE}-taskqueue-operator-metrics"
    names = [service, f"{service}.{NS}.svc.cluster.local", "kubernetes.default"]
    [operator] = cluster.pods("app.kubernetes.io/component=operator")
    image = operator["spec"]["containers"][0]["image"]  # present on the node
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dns-check", "namespace": NS},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "check", "image": image,
            "command": ["python3", "-c", DNS_CHECK, *names]}]},
    }
    cp = cluster.nc.cp
    cp.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:
        phase = wait_for(lambda: cluster.get("pod", "dns-check")["status"].get("phase")
                         in ("Succeeded", "Failed") and
                         cluster.get("pod", "dns-check")["status"]["phase"],
                         "the DNS check pod to finish", diagnose=cluster.diagnose)
        logs = cp.kubectl("logs", "-n", NS, "dns-check").stdout
        assert phase == "Succeeded", logs
    finally:
        cp.kubectl("delete", "pod", "-n", NS, "dns-check", "--wait=false", check=False)
    cluster_ip = cluster.get("service", service)["spec"]["clusterIP"]
    assert f"{service} {cluster_ip}" in logs
    assert f"{service}.{NS}.svc.cluster.local {cluster_ip}" in logs
    assert "kubernetes.default 10.0.0.1" in logs
    assert "metrics 200" in logs


def test_helm_test_fails_when_the_service_has_no_endpoint(cluster: Cluster) -> None:
    name = f"{RELEASE}-taskqueue-operator-metrics"
    selector = cluster.get("service", name)["spec"]["selector"]
    patch = json.dumps({"spec": {"selector": {"app.kubernetes.io/component": "nothing"}}})
    cluster.nc.cp.kubectl("patch", "service", name, "-n", NS, "-p", patch)
    try:
        proc = cluster.nc.cp.helm("test", RELEASE, "-n", NS, "--logs", "--timeout", "180s",
                                  check=False, timeout=240)
    finally:
        restore = json.dumps({"spec": {"selector": selector}})
        cluster.nc.cp.kubectl("patch", "service", name, "-n", NS, "-p", restore)
    assert proc.returncode != 0, proc.stdout
    assert "FAIL: http://" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_activation_from_zero(cluster: Cluster) -> None:
    wait_for(lambda: cluster.get("tq", TQ).get("status"), "the TaskQueue's first status")
    assert cluster.replicas() == 0 and not cluster.worker_pods()
    cluster.r.lpush(QUEUE, "0.2")
    wait_for(lambda: cluster.replicas() >= 1, "scale 0 -> 1", diagnose=cluster.diagnose)
    wait_for(lambda: cluster.completed() == 1, "the first task handled by a real pod",
             diagnose=cluster.diagnose)


def test_burst_scales_out_to_max_replicas(cluster: Cluster) -> None:
    cluster.r.lpush(QUEUE, *["1.5"] * 24)
    wait_for(lambda: len(cluster.running_workers()) == 3, "3 running worker pods",
             diagnose=cluster.diagnose)
    assert cluster.replicas() == 3
    wait_for(lambda: cluster.completed() == 25, "the burst to be handled", timeout=180,
             diagnose=cluster.diagnose)


def test_idle_scale_in_to_zero_drains_on_sigterm(cluster: Cluster) -> None:
    wait_for(lambda: cluster.replicas() == 0, "scale-in to 0", diagnose=cluster.diagnose)
    # Gone, not just Terminating: a pod being deleted may not have had its SIGTERM yet (one
    # step 3 -> 0 marks all of them at once); its object is removed once its container exited.
    wait_for(lambda: not cluster.pods(f"taskqueue.dev/taskqueue={TQ}", terminating=True),
             "the worker pods to be gone", diagnose=cluster.diagnose)
    # A worker that got SIGTERM drains and deregisters before it exits; a SIGKILLed one would
    # stay registered (until its heartbeat expires, or the operator's reaper sees the pod's
    # DELETED event and recovers it: the check right after the pods are gone can race that).
    assert cluster.r.zcard(f"{QUEUE}:workers") == 0, cluster.registered()
    assert cluster.completed() == 25 and cluster.r.llen(QUEUE) == 0


def test_worker_pod_deleted_mid_task_requeues_it(cluster: Cluster) -> None:
    cluster.r.lpush(QUEUE, "12")
    victim = wait_for(cluster.holder, "a pod to take the 12 s task", diagnose=cluster.diagnose)
    cluster.nc.cp.kubectl("delete", "pod", "-n", NS, victim, "--wait=false")
    # The worker's grace (5 s) ends before the task: it gives the task back and exits.
    other = wait_for(lambda: (h := cluster.holder()) not in (None, victim) and h,
                     "the task to be taken by another pod", timeout=90,
                     diagnose=cluster.diagnose)
    assert other != victim
    wait_for(lambda: cluster.completed() == 26, "the requeued task to finish",
             diagnose=cluster.diagnose)


def test_container_killed_mid_task_restarts_and_recovers(cluster: Cluster) -> None:
    cluster.r.lpush(QUEUE, "8")
    holder = wait_for(cluster.holder, "a pod to take the 8 s task", diagnose=cluster.diagnose)
    pod = cluster.get("pod", holder)
    [status] = pod["status"]["containerStatuses"]
    cluster.nc.node.kill_container(status["containerID"])
    wait_for(lambda: cluster.get("pod", holder)["status"]["containerStatuses"][0]
             ["restartCount"] >= 1, "the kubelet to restart the killed container",
             diagnose=cluster.diagnose)
    wait_for(lambda: cluster.completed() == 27, "the recovered task to finish",
             diagnose=cluster.diagnose)
    assert cluster.r.llen(f"{QUEUE}:dead") == 0, "the recovered task was dead-lettered"
