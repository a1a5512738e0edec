"""The worker Deployment built from a TaskQueue follows the pod contract in docs/contracts.md."""

from __future__ import annotations

import json
from typing import Any

import pytest

from taskqueue.api import manifest, models
from taskqueue.controller import workload


def taskqueue(**spec: Any) -> models.TaskQueue:
    base: dict[str, Any] = {"redis": {"url": "redis://redis:6379/0"}, "queues": [{"key": "jobs"}]}
    return manifest.parse({"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
                           "metadata": {"name": "emails", "namespace": "prod"},
                           "spec": {**base, **spec}})


def container(body: dict[str, Any]) -> dict[str, Any]:
    containers = body["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def env(body: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in container(body)["env"]}


def test_contract_command_labels_owner() -> None:
    body = workload.build_deployment(taskqueue(), uid="u-1", replicas=0)
    assert body["metadata"]["name"] == "emails-worker"
    assert body["metadata"]["namespace"] == "prod"
    assert body["spec"]["replicas"] == 0
    assert container(body)["command"] == ["taskqueue-worker"]
    assert "args" not in container(body)
    labels = body["spec"]["template"]["metadata"]["labels"]
    assert labels == {
        "app.kubernetes.io/name": "taskqueue-worker",
        "app.kubernetes.io/component": "taskqueue-worker",
        "app.kubernetes.io/instance": "emails",
        "app.kubernetes.io/managed-by": "taskqueue-operator",
        "taskqueue.dev/taskqueue": "emails",
    }
    selector = body["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    (owner,) = body["metadata"]["ownerReferences"]
    assert owner == {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
                     "name": "emails", "uid": "u-1", "controller": True}


def test_manifest_env_round_trips_and_leaves_scaling_out() -> None:
    tq = taskqueue(scaling={"maxReplicas": 3}, worker={"handler": "pkg.mod:fn"})
    variables = env(workload.build_deployment(tq, uid="u", replicas=1))
    parsed = manifest.loads_json(variables["TASKQUEUE_MANIFEST"]["value"])
    assert parsed.metadata.name == "emails" and parsed.metadata.namespace == "prod"
    assert parsed.spec.model_dump(exclude={"scaling"}) == tq.spec.model_dump(exclude={"scaling"})
    assert "scaling" not in json.loads(variables["TASKQUEUE_MANIFEST"]["value"])["spec"]
    rescaled = env(workload.build_deployment(
        taskqueue(scaling={"maxReplicas": 9}, worker={"handler": "pkg.mod:fn"}), uid="u",
        replicas=1))
    assert rescaled["TASKQUEUE_WORKER_SETTINGS"] == variables["TASKQUEUE_WORKER_SETTINGS"]
    assert variables["TASKQUEUE_WORKER_ID"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.name"}
    }
    assert "TASKQUEUE_REDIS_URL" not in variables


def test_secret_url_comes_from_a_secret_key_ref_never_the_value() -> None:
    tq = taskqueue(redis={"urlSecretRef": {"name": "redis-auth", "key": "url"}})
    body = workload.build_deployment(tq, uid="u", replicas=1)
    assert env(body)["TASKQUEUE_REDIS_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": "redis-auth", "key": "url"}
    }
    assert "redis://" not in json.dumps(body)


def test_pod_options_pass_through() -> None:
    tq = taskqueue(worker={
        "image": "registry/app:1", "env": [{"name": "A", "value": "1"}],
        "envFrom": [{"configMapRef": {"name": "cfg"}}],
        "resources": {"limits": {"memory": "256Mi"}}, "nodeSelector": {"pool": "batch"},
        "tolerations": [{"key": "batch", "operator": "Exists"}], "serviceAccountName": "sa",
        "terminationGracePeriodSeconds": 120, "metricsPort": 9100,
    })
    body = workload.build_deployment(tq, uid="u", replicas=1)
    pod, c = body["spec"]["template"]["spec"], container(body)
    assert c["image"] == "registry/app:1"
    assert env(body)["A"] == {"name": "A", "value": "1"}
    assert c["envFrom"] == [{"configMapRef": {"name": "cfg"}}]
    assert c["resources"] == {"limits": {"memory": "256Mi"}}
    assert c["ports"] == [{"name": "metrics", "containerPort": 9100}]
    assert pod["nodeSelector"] == {"pool": "batch"}
    assert pod["tolerations"] == [{"key": "batch", "operator": "Exists"}]
    assert pod["serviceAccountName"] == "sa"
    assert pod["terminationGracePeriodSeconds"] == 120


def test_default_image() -> None:
    assert container(workload.build_deployment(taskqueue(), uid="u", replicas=1))["image"] == (
        workload.DEFAULT_IMAGE
    )


@pytest.mark.parametrize("change, rolls", [
    pytest.param({"scaling": {"maxReplicas": 50}}, False, id="scaling-does-not-roll"),
    pytest.param({"history": {"retentionSeconds": 3600}}, False, id="history-does-not-roll"),
    pytest.param({"worker": {"concurrency": 4}}, True, id="worker-change-rolls"),
    pytest.param({"queues": [{"key": "jobs"}, {"key": "more"}]}, True, id="queues-roll"),
])
def test_spec_hash_changes_only_with_the_rendered_pods(
    change: dict[str, Any], rolls: bool
) -> None:
    before = workload.build_deployment(taskqueue(), uid="u", replicas=1)
    after = workload.build_deployment(taskqueue(**change), uid="u", replicas=7)
    key = workload.SPEC_HASH_ANNOTATION
    assert (before["metadata"]["annotations"][key] != after["metadata"]["annotations"][key]) is (
        rolls
    )


def test_scale_target_ref_names_the_users_deployment() -> None:
    assert workload.deployment_name(taskqueue(scaleTargetRef={"name": "mine"})) == "mine"


def test_deployment_is_a_valid_kubernetes_object() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    tq = taskqueue(redis={"urlSecretRef": {"name": "s", "key": "k"}},
                   worker={"resources": {"limits": {"cpu": "1"}}})
    body = workload.build_deployment(tq, uid="u", replicas=2)
    kubernetes_validate.validate(body, kubernetes_validate.latest_version(), strict=True)


RESTRICTED = {
    "runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"}, "readOnlyRootFilesystem": True,
}


@pytest.mark.parametrize(
    ("worker", "container_ctx", "pod_ctx"),
    [
        pytest.param({}, RESTRICTED,
                     {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                     id="default-restricted"),
        pytest.param({"securityContext": {"readOnlyRootFilesystem": False, "runAsUser": 1000}},
                     {**RESTRICTED, "readOnlyRootFilesystem": False, "runAsUser": 1000},
                     {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                     id="container-override"),
        pytest.param({"podSecurityContext": {"fsGroup": 2000, "runAsNonRoot": False}},
                     RESTRICTED,
                     {"runAsNonRoot": False, "seccompProfile": {"type": "RuntimeDefault"},
                      "fsGroup": 2000},
                     id="pod-override"),
    ],
)
def test_security_context(worker: dict[str, Any], container_ctx: dict[str, Any],
                          pod_ctx: dict[str, Any]) -> None:
    body = workload.build_deployment(taskqueue(worker=worker), uid="u", replicas=1)
    pod = body["spec"]["template"]["spec"]
    assert container(body)["securityContext"] == container_ctx
    assert pod["securityContext"] == pod_ctx
    # a read-only root filesystem still has a writable /tmp
    assert container(body)["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}]


def test_a_security_override_rolls_the_pods() -> None:
    plain = workload.build_deployment(taskqueue(), uid="u", replicas=1)
    changed = workload.build_deployment(
        taskqueue(worker={"securityContext": {"runAsUser": 1}}), uid="u", replicas=1)
    assert workload.spec_hash(plain) != workload.spec_hash(changed)


@pytest.mark.parametrize(
    ("worker", "address"),
    [
        pytest.param({}, None, id="default"),
        pytest.param({"metricsPort": 9100, "metricsAddress": "127.0.0.1"}, "127.0.0.1",
                     id="loopback"),
    ],
)
def test_metrics_address_reaches_the_worker_env(worker: dict[str, Any],
                                                address: str | None) -> None:
    body = workload.build_deployment(taskqueue(worker=worker), uid="u", replicas=1)
    found = env(body).get("TASKQUEUE_METRICS_ADDRESS")
    assert (found or {}).get("value") == address
