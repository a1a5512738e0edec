"""The chart on the real control plane: install, upgrade and uninstall succeed, and the chart's
ServiceAccount can do exactly what the operator needs (docs/contracts.md), and no more.

No scheduler runs, so the operator pods stay Pending: these tests check the API objects and RBAC;
the e2e tests run the operator itself with the same ServiceAccount token.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from taskqueue_devcluster import ControlPlane
from taskqueue_devcluster.controlplane import free_port
from tests.helpers.chart import CHART, REPO
from tests.helpers.wait import wait_for

RELEASE = "tq"
SA = f"{RELEASE}-taskqueue-operator"
CRD = "customresourcedefinition/taskqueues.taskqueue.dev"

#: docs/contracts.md "API access it needs": `kubectl auth can-i` arguments in a watched namespace
#: ("resource/name" names one object; subresources need --subresource).
NAMESPACED_NEEDS = [
    *[(v, "taskqueues.taskqueue.dev") for v in ("get", "list", "watch", "patch")],
    *[(v, "taskqueues.taskqueue.dev", "--subresource=status") for v in ("get", "patch", "update")],
    *[(v, "deployments.apps")
      for v in ("get", "list", "watch", "create", "patch", "update", "delete")],
    *[(v, "deployments.apps", "--subresource=scale") for v in ("get", "patch", "update")],
    *[(v, "pods") for v in ("get", "list", "watch", "patch")],
    *[(v, "events") for v in ("create", "patch")],
    *[(v, "events.events.k8s.io") for v in ("create", "patch")],
    ("get", "secrets/redis-url"),
]
LEASE_NEEDS = [(v, "leases.coordination.k8s.io") for v in ("get", "create", "update")]
CLUSTER_NEEDS = [
    *[(v, "customresourcedefinitions.apiextensions.k8s.io") for v in ("list", "watch")],
    *[(v, "namespaces") for v in ("list", "watch")],
]
#: What the operator must not be able to do.
FORBIDDEN = [
    ("get", "secrets/other-secret"),
    ("list", "secrets"),
    ("watch", "secrets"),
    ("create", "pods"),
    ("delete", "pods"),
    ("delete", "taskqueues.taskqueue.dev"),
    ("create", "roles.rbac.authorization.k8s.io"),
    ("create", "serviceaccounts", "--subresource=token"),
    ("update", "taskqueues.taskqueue.dev"),
    ("delete", "deployments.apps", "--subresource=scale"),
    ("delete", "leases.coordination.k8s.io"),
]


def helm_install(cp: ControlPlane, namespace: str, *sets: str, verb: str = "install") -> None:
    args = [verb, RELEASE, str(CHART), "-n", namespace, "--take-ownership", "--timeout", "120s"]
    for s in sets:
        args += ["--set", s]
    cp.helm(*args)


def can_i(cp: ControlPlane, kubeconfig: Path, namespace: str, *args: str) -> bool:
    proc = subprocess.run(
        [str(cp.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig), "auth", "can-i",
         *args, "-n", namespace],
        capture_output=True, text=True, timeout=60,
    )
    return proc.stdout.strip() == "yes"


def kubectl_as(
    cp: ControlPlane, kubeconfig: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cp.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True, text=True, timeout=60,
    )


def get_json(cp: ControlPlane, *args: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(cp.kubectl("get", *args, "-o", "json").stdout)
    return out


def wait_for_pods(cp: ControlPlane, namespace: str, selector: str, count: int) -> None:
    """The ReplicaSet controller created at least `count` pods (none rejected by admission)."""
    def created() -> bool:
        names = cp.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "name").stdout
        return len(names.split()) >= count

    try:
        wait_for(f"{count} operator pod(s) in {namespace}", created, timeout=60, every=0.5)
    except AssertionError as e:
        events = cp.kubectl("get", "events", "-n", namespace, check=False).stdout
        pytest.fail(f"{e}; events:\n{events}")


def test_install_upgrade_uninstall(control_plane: ControlPlane, namespace: str) -> None:
    cp = control_plane
    # the operator pod must pass the "restricted" Pod Security Standard, enforced at admission
    cp.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    helm_install(cp, namespace, "rbac.secretNames={redis-url}")
    cp.wait_established(CRD)
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"
    wait_for_pods(cp, namespace, selector, 1)
    deploy = get_json(cp, "deployment", SA, "-n", namespace)
    assert deploy["spec"]["replicas"] == 1  # type: ignore[index]
    for kind in ("serviceaccount", "service", "role", "rolebinding"):
        cp.kubectl("get", kind, "-n", namespace, "-l", f"app.kubernetes.io/instance={RELEASE}")
    # the CRD the chart installed serves TaskQueues, and the API server checks them
    cp.kubectl("apply", "-n", namespace, "-f", str(REPO / "examples" / "vip-normal.yaml"))
    bad = cp.kubectl(
        "apply", "-n", namespace, "-f", "-", check=False,
        input="apiVersion: taskqueue.dev/v1alpha1\nkind: TaskQueue\nmetadata: {name: bad}\n"
        "spec: {redis: {url: 'redis://r'}, queues: []}\n",
    )
    assert bad.returncode != 0 and "queues" in bad.stderr

    helm_install(cp, namespace, "replicaCount=2", "rbac.secretNames={redis-url,redis-tls}",
                 verb="upgrade")
    deploy = get_json(cp, "deployment", SA, "-n", namespace)
    assert deploy["spec"]["replicas"] == 2  # type: ignore[index]
    wait_for_pods(cp, namespace, selector, 2)
    role = get_json(cp, "role", SA, "-n", namespace)
    secret_rules = [r for r in role["rules"] if "secrets" in r["resources"]]  # type: ignore[attr-defined]
    assert secret_rules[0]["resourceNames"] == ["redis-url", "redis-tls"]

    cp.helm("uninstall", RELEASE, "-n", namespace, "--wait", "--timeout", "120s")
    left = cp.kubectl("get", "deployment,role,rolebinding,serviceaccount,service", "-n", namespace,
                      "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "name").stdout
    assert left.strip() == "" or left.strip() == "serviceaccount/default"
    # helm.sh/resource-policy: keep: the CRD, and so every TaskQueue, survive the uninstall
    cp.kubectl("get", CRD)
    cp.kubectl("get", "taskqueue", "emails", "-n", namespace)


@pytest.mark.parametrize("cluster_wide", [False, True], ids=["namespaced", "cluster-wide"])
def test_service_account_can_do_what_the_operator_needs_and_no_more(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, cluster_wide: bool
) -> None:
    cp = control_plane
    helm_install(cp, namespace, "replicaCount=0", "rbac.secretNames={redis-url}",
                 f"clusterWide={str(cluster_wide).lower()}")
    for name in ("redis-url", "other-secret"):
        cp.kubectl("create", "secret", "generic", name, "-n", namespace,
                   "--from-literal=url=redis://:pw@redis:6379/0")
    kubeconfig = cp.token_kubeconfig(namespace, SA, tmp_path / "operator.kubeconfig")

    denied = [n for n in NAMESPACED_NEEDS + LEASE_NEEDS + CLUSTER_NEEDS
              if not can_i(cp, kubeconfig, namespace, *n)]
    assert denied == [], f"the operator's ServiceAccount lacks {denied}"
    allowed = [n for n in FORBIDDEN if can_i(cp, kubeconfig, namespace, *n)]
    assert allowed == [], f"the operator's ServiceAccount may {allowed}"
    # outside the watched namespace: only cluster mode reaches TaskQueues; never the Lease
    assert can_i(cp, kubeconfig, "default", "list", "taskqueues.taskqueue.dev") is cluster_wide
    assert not can_i(cp, kubeconfig, "default", "create", "leases.coordination.k8s.io")

    # real requests, as the operator makes them
    ok = kubectl_as(cp, kubeconfig, "get", "secret", "redis-url", "-n", namespace, "-o", "name")
    assert ok.returncode == 0, ok.stderr
    forbidden = kubectl_as(cp, kubeconfig, "get", "--raw",
                           f"/api/v1/namespaces/{namespace}/secrets/other-secret")
    assert forbidden.returncode != 0
    assert "Forbidden" in forbidden.stderr or "403" in forbidden.stderr, forbidden.stderr
    for args in (
        ["get", "taskqueues", "-n", namespace],
        ["get", "customresourcedefinitions", "-o", "name"],
        ["create", "deployment", "w", "--image=example.com/w:1", "-n", namespace],
        ["scale", "deployment", "w", "--replicas=3", "-n", namespace],
        ["delete", "deployment", "w", "-n", namespace],
    ):
        proc = kubectl_as(cp, kubeconfig, *args)
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"


def test_operator_runs_with_the_chart_service_account(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, redis_url: str
) -> None:
    """The real operator, as the chart's ServiceAccount: leads, reads its Secret, reconciles, with
    no 403 in its log; its metrics endpoint serves what the `helm test` pod checks."""
    cp = control_plane
    helm_install(cp, namespace, "replicaCount=0", "rbac.secretNames={redis-url}")
    cp.kubectl("create", "secret", "generic", "redis-url", "-n", namespace,
               f"--from-literal=url={redis_url}")
    kubeconfig = cp.token_kubeconfig(namespace, SA, tmp_path / "operator.kubeconfig")
    metrics_port, health_port = free_port(), free_port()
    log_path = tmp_path / "operator.log"
    with log_path.open("w") as log:
        operator = subprocess.Popen(
            [sys.executable, "-m", "taskqueue.controller.main", "--kubeconfig", str(kubeconfig),
             f"--namespace={namespace}", f"--leader-election-namespace={namespace}",
             f"--metrics-port={metrics_port}", f"--health-port={health_port}",
             "--log-format=text"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "POD_NAME": "op-0"},
        )
    try:
        cp.kubectl("apply", "-n", namespace, "-f", "-", input=TASKQUEUE_WITH_SECRET)
        def reconciled() -> bool:
            assert operator.poll() is None, log_path.read_text()[-3000:]
            status = cp.kubectl("get", "taskqueue", "emails", "-n", namespace, "-o",
                                "jsonpath={.status.desiredReplicas}", check=False).stdout
            made = cp.kubectl("get", "deployment", "emails-worker", "-n", namespace,
                              check=False).returncode == 0
            return bool(status and made)

        try:
            wait_for("a reconcile", reconciled, timeout=90, every=1)
        except AssertionError as e:
            pytest.fail(f"{e}; operator log:\n{log_path.read_text()[-3000:]}")
        holder = cp.kubectl("get", "lease", "taskqueue-operator", "-n", namespace, "-o",
                            "jsonpath={.spec.holderIdentity}").stdout
        assert holder.startswith("op-0")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
            assert "# TYPE taskqueue_" in r.read().decode()
    finally:
        operator.send_signal(signal.SIGTERM)
        try:
            operator.wait(timeout=30)
        except subprocess.TimeoutExpired:
            operator.kill()
            operator.wait()
    text = log_path.read_text()
    # an HTTP 403 as a token, not digits inside a timestamp (",403") or a random id ("_40380127")
    messages = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", text, flags=re.M)
    assert not re.search(r"\b403\b", messages) and "Forbidden" not in messages, text[-3000:]


TASKQUEUE_WITH_SECRET = """
apiVersion: taskqueue.dev/v1alpha1
kind: TaskQueue
metadata:
  name: emails
spec:
  redis:
    urlSecretRef: {name: redis-url, key: url}
  queues:
    - key: emails:vip
      starvationLimit: 3
    - key: emails:normal
  worker:
    image: registry.example.com/myapp-worker:1.0.0
    handler: myapp.tasks:send_email
  scaling:
    minReplicas: 1
    maxReplicas: 3
    pollIntervalSeconds: 1
"""
