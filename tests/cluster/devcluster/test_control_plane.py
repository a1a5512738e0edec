"""The local control plane is real: version, RBAC, Deployment/ReplicaSet controllers, GC, kubelet.

No mocks: these run against etcd + kube-apiserver + kube-controller-manager built by
``scripts/control-plane build``, with the process kubelet running pods as local processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

import pytest

from taskqueue_devcluster import DEFAULT_LABEL_SELECTOR, CommandError, ControlPlane
from taskqueue_devcluster.controlplane import _control_plane_script
from tests.fixtures.cluster import ProcessKubeletFactory
from tests.helpers.wait import wait_for

T = TypeVar("T")

# A pod "container": records its start, and on SIGTERM records it and exits 0.
WORKER_SCRIPT = """
import os, signal, sys, time
d, name = os.environ["MARKER_DIR"], os.environ["POD_NAME"]
def term(*_):
    open(os.path.join(d, name + ".term"), "w").write(str(os.getpid()))
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
open(os.path.join(d, name + ".started"), "w").write(str(os.getpid()))
while True:
    time.sleep(0.2)
"""


def get_json(cp: ControlPlane, *args: str) -> Any:
    return json.loads(cp.kubectl("get", *args, "-o", "json").stdout)


def expected_k8s_version() -> str:
    script = _control_plane_script()
    assert script is not None
    out = subprocess.run([str(script), "versions"], capture_output=True, text=True, check=True)
    fields = dict(f.split("=", 1) for f in out.stdout.split())
    return fields["kubernetes"]


def test_version_endpoint_reports_the_real_version(control_plane: ControlPlane) -> None:
    version = control_plane.get_json("/version")
    assert version["gitVersion"] == expected_k8s_version()
    assert version["major"] == "1"
    server = json.loads(control_plane.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert server["gitVersion"] == expected_k8s_version()


def test_kubectl_and_helm_binaries_work(control_plane: ControlPlane) -> None:
    client = json.loads(control_plane.kubectl("version", "--client", "-o", "json").stdout)
    assert client["clientVersion"]["gitVersion"].startswith("v1.")
    helm_version = control_plane.helm("version", "--short").stdout
    assert helm_version.startswith(("v3.", "v4.")), helm_version
    assert "kube-system" in control_plane.kubectl("get", "namespaces").stdout


def test_rbac_is_enforced_for_service_account_tokens(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    control_plane.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    kubeconfig = control_plane.token_kubeconfig(namespace, "nobody", tmp_path / "nobody.kubeconfig")
    kubectl = str(control_plane.bin_dir / "kubectl")
    denied = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "get", "secrets", "-n", namespace],
        capture_output=True,
        text=True,
        check=False,
    )
    assert denied.returncode != 0
    assert "(Forbidden)" in denied.stderr  # HTTP 403 from the RBAC authorizer
    assert f"system:serviceaccount:{namespace}:nobody" in denied.stderr

    # The same token works once RBAC grants it: authentication is real, not just a wall of 403.
    control_plane.kubectl(
        "create", "role", "read-secrets", "--verb=list", "--resource=secrets", "-n", namespace
    )
    control_plane.kubectl(
        "create",
        "rolebinding",
        "read-secrets",
        "--role=read-secrets",
        f"--serviceaccount={namespace}:nobody",
        "-n",
        namespace,
    )
    wait_for(
        "the RoleBinding to take effect",
        lambda: (
            subprocess.run(
                [kubectl, "--kubeconfig", str(kubeconfig), "get", "secrets", "-n", namespace],
                capture_output=True,
                text=True,
                check=False,
            ).returncode
            == 0
        ),
        timeout=20,
    )


def test_admin_commands_raise_with_stderr(control_plane: ControlPlane) -> None:
    with pytest.raises(CommandError, match=r"NotFound|not found"):
        control_plane.kubectl("get", "namespace", "does-not-exist")


def deployment_manifest(name: str, marker_dir: Path, replicas: int) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "taskqueue-worker"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {
                            "name": "worker",
                            "image": "taskqueue-worker:test",
                            "command": [sys.executable, "-c", WORKER_SCRIPT],
                            "env": [
                                {"name": "MARKER_DIR", "value": str(marker_dir)},
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                            ],
                        }
                    ],
                },
            },
        },
    }


def pod_names(cp: ControlPlane, namespace: str, *, running: bool = False) -> list[str]:
    pods = get_json(cp, "pods", "-n", namespace, "-l", DEFAULT_LABEL_SELECTOR)["items"]
    return sorted(
        p["metadata"]["name"]
        for p in pods
        if not running
        or (p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"])
    )


def test_deployment_pods_run_scale_in_by_deletion_cost_and_are_garbage_collected(
    control_plane: ControlPlane,
    namespace: str,
    process_kubelet: ProcessKubeletFactory,
    tmp_path: Path,
) -> None:
    cp = control_plane
    kubelet = process_kubelet(namespace)
    cp.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(deployment_manifest("workers", tmp_path, 2)),
    )

    # The real deployment controller makes a ReplicaSet owned by the Deployment, which makes 2 pods.
    rs = wait_for(
        "a ReplicaSet",
        lambda: get_json(cp, "replicasets", "-n", namespace)["items"], timeout=60)[0]
    owner = rs["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Deployment", "workers", True)

    # The process kubelet binds, runs and readies both pods; the Deployment sees them ready.
    wait_for(
        "2 ready replicas",
        lambda: (
            get_json(cp, "deployment", "workers", "-n", namespace)["status"].get("readyReplicas")
            == 2
        ), timeout=60)
    pods = pod_names(cp, namespace)
    assert len(pods) == 2
    for name in pods:
        pod = get_json(cp, "pod", name, "-n", namespace)
        assert pod["spec"]["nodeName"] == "process-kubelet"
        assert pod["status"]["podIP"] == "127.0.0.1"
        wait_for(f"{name} to start", (tmp_path / f"{name}.started").exists, timeout=60)
        assert kubelet.pid(namespace, name) == int((tmp_path / f"{name}.started").read_text())

    # Scale-in: the ReplicaSet controller deletes the pod with the LOWER pod-deletion-cost.
    keep, drop = pods
    cp.kubectl(
        "annotate", "pod", keep, "-n", namespace, "controller.kubernetes.io/pod-deletion-cost=100"
    )
    cp.kubectl(
        "annotate", "pod", drop, "-n", namespace, "controller.kubernetes.io/pod-deletion-cost=-100"
    )
    cp.kubectl("scale", "deployment", "workers", "-n", namespace, "--replicas=1")
    wait_for(f"{drop} to be deleted", lambda: pod_names(cp, namespace) == [keep], timeout=60)
    assert (tmp_path / f"{drop}.term").exists(), "the deleted pod's process got no SIGTERM"
    assert not (tmp_path / f"{keep}.term").exists()
    assert kubelet.pid(namespace, drop) is None
    assert kubelet.pid(namespace, keep) is not None

    # Deleting the Deployment garbage-collects its ReplicaSet and pods (owner references).
    cp.kubectl("delete", "deployment", "workers", "-n", namespace, "--wait=false")
    wait_for(
        "the ReplicaSet to be garbage-collected",
        lambda: not get_json(cp, "replicasets", "-n", namespace)["items"], timeout=60)
    wait_for("the pods to be garbage-collected", lambda: not pod_names(cp, namespace), timeout=60)
    assert (tmp_path / f"{keep}.term").exists()


def test_process_kubelet_resolves_pod_environment(
    control_plane: ControlPlane,
    namespace: str,
    process_kubelet: ProcessKubeletFactory,
    tmp_path: Path,
) -> None:
    cp = control_plane
    process_kubelet(namespace, label_selector="app=env-check", extra_env={"EXTRA": "extra"})
    cp.kubectl(
        "create", "secret", "generic", "creds", "--from-literal=password=s3cret", "-n", namespace
    )
    cp.kubectl("create", "configmap", "settings", "--from-literal=MODE=fast", "-n", namespace)
    out = tmp_path / "env.json"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "env-check", "labels": {"app": "env-check"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "command": [sys.executable, "-c"],
                    "args": [
                        "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))",
                        str(out),
                    ],
                    "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
                    "env": [
                        {
                            "name": "NS",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                        },
                        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {
                            "name": "PASSWORD",
                            "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}},
                        },
                        {"name": "GREETING", "value": "hello-$(NS)"},
                    ],
                }
            ],
        },
    }
    cp.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))
    wait_for(
        "the pod to succeed",
        lambda: (
            get_json(cp, "pod", "env-check", "-n", namespace)["status"].get("phase") == "Succeeded"
        ), timeout=60)
    env = json.loads(out.read_text())
    assert env["NS"] == namespace
    assert env["IP"] == "127.0.0.1"
    assert env["PASSWORD"] == "s3cret"
    assert env["CFG_MODE"] == "fast"
    assert env["GREETING"] == f"hello-{namespace}"
    assert env["EXTRA"] == "extra"
    assert "PATH" in env


def bare_pod(name: str, command: list[str], restart_policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "exit-check"}},
        "spec": {
            "restartPolicy": restart_policy,
            "containers": [{"name": "main", "image": "x", "command": command}],
        },
    }


def test_process_kubelet_reports_exits_and_restarts(
    control_plane: ControlPlane, namespace: str, process_kubelet: ProcessKubeletFactory
) -> None:
    cp = control_plane
    process_kubelet(namespace, label_selector="app=exit-check")
    crash = [sys.executable, "-c", "import sys; sys.exit(3)"]
    for pod in (bare_pod("once", crash, "Never"), bare_pod("again", crash, "Always")):
        cp.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))

    def status(name: str) -> Any:
        return get_json(cp, "pod", name, "-n", namespace)["status"]

    wait_for("pod `once` to fail", lambda: status("once").get("phase") == "Failed", timeout=60)
    terminated = status("once")["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    wait_for(
        "pod `again` to be restarted twice",
        lambda: status("again").get("containerStatuses", [{}])[0].get("restartCount", 0) >= 2,
        timeout=30,
    )
    assert status("again")["phase"] == "Running"


def test_process_kubelet_kills_after_the_grace_period(
    control_plane: ControlPlane,
    namespace: str,
    process_kubelet: ProcessKubeletFactory,
) -> None:
    cp = control_plane
    kubelet = process_kubelet(namespace, label_selector="app=exit-check")
    stubborn = [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
    ]
    pod = bare_pod("stubborn", stubborn, "Always")
    pod["spec"]["terminationGracePeriodSeconds"] = 2
    cp.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))
    pid = wait_for("the process to run", lambda: kubelet.pid(namespace, "stubborn"), timeout=60)
    started = time.monotonic()
    cp.kubectl("delete", "pod", "stubborn", "-n", namespace, "--wait=false")
    wait_for("the pod to be gone",
             lambda: not get_json(cp, "pods", "-n", namespace)["items"], timeout=60)
    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed < 15, elapsed  # waited the grace period, then SIGKILL
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
