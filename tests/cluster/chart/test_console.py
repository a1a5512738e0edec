"""The chart's console (`console.enabled`): rendered objects, least-privilege RBAC, and on the
real API server the console running as the chart's ServiceAccount signs a viewer in and shows
the TaskQueues of the namespace the viewer may see."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from taskqueue.cli.main import parser
from taskqueue_devcluster import ControlPlane
from tests.cluster.chart.test_cluster import can_i, helm_install
from tests.helpers.browser import Browser, console_process
from tests.helpers.chart import NAMESPACE, Render, by_kind, run_helm, template_args
from tests.helpers.kube import viewer_token

CONSOLE = "tq-taskqueue-operator-console"


def console_objects(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["metadata"]["name"].endswith("-console")]


def rules(obj: dict[str, Any]) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(r["apiGroups"][0], r["resources"][0], tuple(r["verbs"])) for r in obj["rules"]}


def test_the_console_is_off_by_default(render: Render) -> None:
    assert console_objects(render()) == []


def test_enabled_it_is_a_locked_down_deployment_and_a_cluster_ip_service(render: Render) -> None:
    objs = console_objects(render(sets=["console.enabled=true"]))
    [deployment] = by_kind(objs, "Deployment")
    [service] = by_kind(objs, "Service")
    assert service["spec"]["type"] == "ClusterIP"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == CONSOLE
    [container] = pod["containers"]
    ctx = container["securityContext"]
    assert (ctx["readOnlyRootFilesystem"], ctx["allowPrivilegeEscalation"],
            ctx["capabilities"]["drop"]) == (True, False, ["ALL"])
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["command"] == ["taskqueue"]
    # the CLI accepts what the chart renders
    args = parser(container["args"]).parse_args(container["args"])
    assert (args.in_cluster, args.allow_actions, args.watch_namespace) == (True, False,
                                                                           [NAMESPACE])
    assert args.secure_cookies is False
    assert deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == \
        "console"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    # sessions are in the one process's memory: one replica, never two during an upgrade
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_secure_cookies_reach_the_console_and_must_be_a_boolean(render: Render,
                                                                 helm: Path) -> None:
    objs = console_objects(render(sets=["console.enabled=true", "console.secureCookies=true"]))
    [container] = by_kind(objs, "Deployment")[0]["spec"]["template"]["spec"]["containers"]
    args = parser(container["args"]).parse_args(container["args"])
    assert args.secure_cookies is True
    proc = run_helm(helm, *template_args((), ["console.enabled=true",
                                              "console.secureCookies=yes"], NAMESPACE),
                    check=False)
    assert proc.returncode != 0 and "secureCookies" in proc.stderr, proc.stderr


def test_a_second_replica_cannot_be_asked_for(helm: Path) -> None:
    """Sessions are in the one process's memory: the schema refuses console.replicas."""
    proc = run_helm(helm, *template_args((), ["console.enabled=true", "console.replicas=2"],
                                         NAMESPACE), check=False)
    assert proc.returncode != 0
    assert "additional properties 'replicas' not allowed" in proc.stderr, proc.stderr


def test_its_rbac_is_reviews_and_listing_taskqueues_and_nothing_else(render: Render) -> None:
    objs = console_objects(render(sets=["console.enabled=true", "watchNamespaces={a,b}"]))
    [cluster_role] = by_kind(objs, "ClusterRole")
    assert rules(cluster_role) == {("authentication.k8s.io", "tokenreviews", ("create",)),
                                   ("authorization.k8s.io", "subjectaccessreviews", ("create",))}
    roles = by_kind(objs, "Role")
    assert {r["metadata"]["namespace"] for r in roles} == {"a", "b"}
    assert all(rules(r) == {("taskqueue.dev", "taskqueues", ("list",))} for r in roles)
    wide = console_objects(render(sets=["console.enabled=true", "clusterWide=true",
                                        "rbac.secretNames={redis-url}"]))
    [cluster_role] = by_kind(wide, "ClusterRole")
    assert ("taskqueue.dev", "taskqueues", ("list",)) in rules(cluster_role)
    [secrets] = [r for r in cluster_role["rules"] if r["resources"] == ["secrets"]]
    assert (secrets["verbs"], secrets["resourceNames"]) == (["get"], ["redis-url"])
    assert by_kind(wide, "Role") == []


def test_installed_it_signs_viewers_in_with_its_own_service_account(
        control_plane: ControlPlane, namespace: str, redis_url: str, tmp_path: Path) -> None:
    helm_install(control_plane, namespace, "console.enabled=true", "replicaCount=0")
    control_plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": "thumbs", "namespace": namespace},
        "spec": {"redis": {"url": redis_url}, "queues": [{"key": "vip"}],
                 "scaleTargetRef": {"name": "none"}}}))
    console_kubeconfig = control_plane.token_kubeconfig(namespace, CONSOLE,
                                                        tmp_path / "console.kubeconfig")
    for allowed in [("create", "tokenreviews.authentication.k8s.io"),
                    ("create", "subjectaccessreviews.authorization.k8s.io"),
                    ("list", "taskqueues.taskqueue.dev")]:
        assert can_i(control_plane, console_kubeconfig, namespace, *allowed), allowed
    for refused in [("get", "secrets"), ("update", "taskqueues.taskqueue.dev"),
                    ("get", "taskqueues.taskqueue.dev"), ("list", "pods")]:
        assert not can_i(control_plane, console_kubeconfig, namespace, *refused), refused
    token = viewer_token(control_plane, namespace, "alice", ["get"], [namespace])
    with console_process("--in-cluster", "--kubeconfig", str(console_kubeconfig),
                         "--watch-namespace", namespace) as base:
        alice = Browser(base)
        assert alice.post("/signin", {"token": token})[0] == 200
        status, page = alice.get("/")
        assert status == 200 and f"{namespace}/thumbs" in page
        assert re.search(r'data-tq="[^"]+/thumbs"', page)
