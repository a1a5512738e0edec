"""The worker Deployment of a TaskQueue, built from its spec: pure, no I/O.

The pod contract (command, env, labels) is the one in docs/contracts.md. The Deployment carries a
hash of what was built (`SPEC_HASH_ANNOTATION`) so the operator rewrites it only when the TaskQueue
changed what it renders; replicas are never part of that: the poller owns them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from taskqueue import __version__

# What scripts/images builds (the worker base image); a TaskQueue normally names its own image.
from taskqueue.api import models, workersettings

DEFAULT_IMAGE = f"taskqueue-worker:{__version__}"
SPEC_HASH_ANNOTATION = "taskqueue.dev/spec-hash"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
TASKQUEUE_LABEL = "taskqueue.dev/taskqueue"
COMPONENT = "taskqueue-worker"
CONTAINER = "worker"
TLS_VOLUME = "redis-tls"
TMP_VOLUME = "tmp"

CONTAINER_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
    "readOnlyRootFilesystem": True,
}
"""The container securityContext by default: what the `restricted` Pod Security Standard asks,
plus a read-only root filesystem (an emptyDir is mounted at /tmp). The worker image runs as
uid 10001; spec.worker.securityContext keys replace these one by one."""
POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The pod securityContext by default; spec.worker.podSecurityContext keys replace these."""


def deployment_name(tq: models.TaskQueue) -> str:
    """The Deployment the TaskQueue scales: its scaleTargetRef, or `<name>-worker` it owns."""
    if tq.spec.scaleTargetRef is not None:
        return tq.spec.scaleTargetRef.name
    return f"{tq.metadata.name}-worker"


def selector_labels(name: str) -> dict[str, str]:
    """The Deployment's selector: stable for the TaskQueue's lifetime."""
    return {"app.kubernetes.io/component": COMPONENT, TASKQUEUE_LABEL: name}


def pod_labels(name: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": COMPONENT,
        "app.kubernetes.io/component": COMPONENT,
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "taskqueue-operator",
        TASKQUEUE_LABEL: name,
    }


def manifest_json(tq: models.TaskQueue) -> str:
    """TASKQUEUE_MANIFEST: what the worker reads. `scaling`, `scaleTargetRef` and `history` are
    left out (the worker does not read them), so changing them does not roll the worker pods."""
    spec = tq.spec.model_dump(mode="json", exclude_none=True,
                              exclude={"scaling", "scaleTargetRef", "history"})
    return json.dumps(
        {
            "apiVersion": models.API_VERSION,
            "kind": models.KIND,
            "metadata": {"name": tq.metadata.name, "namespace": tq.metadata.namespace},
            "spec": spec,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def _env(tq: models.TaskQueue) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "TASKQUEUE_MANIFEST", "value": manifest_json(tq)},
        # the same settings compiled for a fast start (read without pydantic); a worker of another
        # version ignores them and validates TASKQUEUE_MANIFEST
        {"name": workersettings.ENV,
         "value": workersettings.dumps(tq.spec, tls_dir=models.REDIS_TLS_DIR)},
        {"name": "TASKQUEUE_WORKER_ID",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    if tq.spec.worker.metricsAddress is not None:
        env.append({"name": "TASKQUEUE_METRICS_ADDRESS", "value": tq.spec.worker.metricsAddress})
    ref = tq.spec.redis.urlSecretRef
    if ref is not None:
        env.append({"name": "TASKQUEUE_REDIS_URL",
                    "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    sentinel = tq.spec.redis.sentinel
    if sentinel is not None and sentinel.passwordSecretRef is not None:
        sref = sentinel.passwordSecretRef
        env.append({"name": "TASKQUEUE_REDIS_SENTINEL_PASSWORD",
                    "valueFrom": {"secretKeyRef": {"name": sref.name, "key": sref.key}}})
    return env + [dict(e) for e in tq.spec.worker.env]


def _container(tq: models.TaskQueue) -> dict[str, Any]:
    worker = tq.spec.worker
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": worker.image or DEFAULT_IMAGE,
        "command": ["taskqueue-worker"],
        "env": _env(tq),
    }
    if worker.envFrom:
        container["envFrom"] = [dict(e) for e in worker.envFrom]
    if worker.resources is not None:
        container["resources"] = dict(worker.resources)
    if worker.metricsPort is not None:
        container["ports"] = [{"name": "metrics", "containerPort": worker.metricsPort}]
    container["securityContext"] = {**CONTAINER_SECURITY, **dict(worker.securityContext or {})}
    container["volumeMounts"] = [{"name": TMP_VOLUME, "mountPath": "/tmp"}]
    return container


def _pod_spec(tq: models.TaskQueue) -> dict[str, Any]:
    worker = tq.spec.worker
    pod: dict[str, Any] = {
        "containers": [_container(tq)],
        "terminationGracePeriodSeconds": worker.terminationGracePeriodSeconds,
        "securityContext": {**POD_SECURITY, **dict(worker.podSecurityContext or {})},
        "volumes": [{"name": TMP_VOLUME, "emptyDir": {}}],
    }
    if worker.nodeSelector:
        pod["nodeSelector"] = dict(worker.nodeSelector)
    if worker.tolerations:
        pod["tolerations"] = [dict(t) for t in worker.tolerations]
    if worker.serviceAccountName:
        pod["serviceAccountName"] = worker.serviceAccountName
    tls = tq.spec.redis.tls
    if tls is not None:  # the Secret as read-only files, never as environment variables
        # 0444: the worker runs as a non-root uid (POD_SECURITY) and must read the root-owned
        # files; the container has no other user
        pod["volumes"].append({"name": TLS_VOLUME, "secret": {
            "secretName": tls.secretName, "defaultMode": 0o444}})
        pod["containers"][0]["volumeMounts"].append(
            {"name": TLS_VOLUME, "mountPath": models.REDIS_TLS_DIR, "readOnly": True})
    return pod


def build_deployment(tq: models.TaskQueue, *, uid: str, replicas: int) -> dict[str, Any]:
    """The worker Deployment of `tq` (owned by it through `uid`) with `replicas` replicas."""
    name = tq.metadata.name
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": deployment_name(tq),
            "namespace": tq.metadata.namespace,
            "labels": pod_labels(name),
            "ownerReferences": [{
                "apiVersion": models.API_VERSION,
                "kind": models.KIND,
                "name": name,
                "uid": uid,
                "controller": True,
            }],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector_labels(name)},
            "template": {
                "metadata": {"labels": pod_labels(name)},
                "spec": _pod_spec(tq),
            },
        },
    }
    body["metadata"]["annotations"] = {SPEC_HASH_ANNOTATION: spec_hash(body)}
    return body


def spec_hash(body: dict[str, Any]) -> str:
    """A hash of everything the operator renders except replicas and the hash itself."""
    rendered = {
        "labels": body["metadata"].get("labels"),
        "owners": body["metadata"].get("ownerReferences"),
        "selector": body["spec"]["selector"],
        "template": body["spec"]["template"],
    }
    text = json.dumps(rendered, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
