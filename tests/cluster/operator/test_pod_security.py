"""Worker pods pass the `restricted` Pod Security Standard (real kube-apiserver with its
PodSecurity admission, and the ReplicaSet controller of kube-controller-manager)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from taskqueue.api import manifest
from taskqueue.controller import workload
from taskqueue_devcluster import ControlPlane
from tests.cluster.operator.test_operator import Start
from tests.helpers.kube import get, taskqueue
from tests.helpers.wait import wait_for

RESTRICTED = "pod-security.kubernetes.io/enforce=restricted"


def _pod(namespace: str, template: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace, **template["metadata"]},
            "spec": template["spec"]}


def _dry_run(cp: ControlPlane, pod: dict[str, Any]) -> tuple[int, str]:
    proc = cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod),
                      check=False)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize(
    ("worker", "admitted"),
    [
        pytest.param({}, True, id="default"),
        pytest.param({"securityContext": {"runAsUser": 20000}}, True, id="override-kept-safe"),
        pytest.param({"securityContext": {"allowPrivilegeEscalation": True}}, False,
                     id="override-breaks-it"),
    ],
)
def test_the_worker_template_is_admitted_under_restricted(
    control_plane: ControlPlane, namespace: str, worker: dict[str, Any], admitted: bool
) -> None:
    control_plane.kubectl("label", "namespace", namespace, RESTRICTED)
    tq = manifest.parse({**taskqueue("psa", "redis://redis:6379/0", worker=worker),
                         "metadata": {"name": "psa", "namespace": namespace}})
    template = workload.build_deployment(tq, uid="u", replicas=1)["spec"]["template"]
    code, err = _dry_run(control_plane, _pod(namespace, template))
    assert (code == 0) is admitted, err
    if not admitted:
        assert "violates PodSecurity" in err


def test_a_template_without_security_context_is_refused(
    control_plane: ControlPlane, namespace: str
) -> None:
    """The check above can fail: the template as it was before (no securityContext) is not
    admitted under `restricted`."""
    control_plane.kubectl("label", "namespace", namespace, RESTRICTED)
    tq = manifest.parse({**taskqueue("old", "redis://redis:6379/0"),
                         "metadata": {"name": "old", "namespace": namespace}})
    template = workload.build_deployment(tq, uid="u", replicas=1)["spec"]["template"]
    template["spec"].pop("securityContext")
    template["spec"]["containers"][0].pop("securityContext")
    code, err = _dry_run(control_plane, _pod(namespace, template))
    assert code != 0 and "violates PodSecurity" in err


def test_the_replicaset_controller_creates_worker_pods_under_restricted(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    control_plane.kubectl("label", "namespace", namespace, RESTRICTED)
    run_operator(namespace)
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(
        taskqueue("rs", redis_url, scaling={"minReplicas": 1})))
    pods = wait_for("a worker pod created", lambda: [
        p for p in (get(control_plane, "pods", "-n", namespace) or {"items": []})["items"]
        if p["metadata"].get("labels", {}).get(workload.TASKQUEUE_LABEL) == "rs"], timeout=60)
    assert pods
    events = (get(control_plane, "events", "-n", namespace) or {"items": []})["items"]
    assert [e["message"] for e in events if e["reason"] == "FailedCreate"] == []
