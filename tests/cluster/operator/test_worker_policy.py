"""The operator's bounds on TaskQueue authors (--allowed-image-prefix, --scale-target-label) on
the real API server: a TaskQueue outside them is refused with the field and the fix, and
nothing is created or scaled for it."""

from __future__ import annotations

from typing import Any

import redis

from taskqueue_devcluster import ControlPlane
from tests.cluster.operator.test_operator import Start, condition, events
from tests.helpers.kube import apply, get, replicas, taskqueue
from tests.helpers.wait import wait_for

LABEL = "taskqueue.dev/scalable"


def _deployment(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }


def test_an_image_outside_the_allowed_prefixes_is_refused(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    run_operator(namespace, "--allowed-image-prefix", "registry.example/team/")
    apply(control_plane, namespace, taskqueue("evil", redis_url,
                                              worker={"image": "evil.example/miner:1"}))
    apply(control_plane, namespace, taskqueue("good", redis_url,
                                              worker={"image": "registry.example/team/w:1"}))
    ready = wait_for("Ready=False", lambda: condition(control_plane, namespace, "evil", "Ready"))
    assert ready["message"].startswith("spec.worker.image 'evil.example/miner:1' is not allowed")
    assert "registry.example/team/" in ready["message"]
    assert any("spec.worker.image" in m for m in events(control_plane, namespace, "InvalidSpec"))
    wait_for("the allowed one's Deployment", lambda: get(
        control_plane, "deployment", "good-worker", "-n", namespace))
    assert get(control_plane, "deployment", "evil-worker", "-n", namespace) is None


def test_a_scale_target_without_the_label_is_not_scaled(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str
) -> None:
    apply(control_plane, namespace, _deployment("api", {}))
    apply(control_plane, namespace, _deployment("batch", {LABEL: "true"}))
    run_operator(namespace, "--scale-target-label", f"{LABEL}=true")
    apply(control_plane, namespace, taskqueue("steal", redis_url, scaleTargetRef={"name": "api"}))
    apply(control_plane, namespace, taskqueue("ok", redis_url, scaleTargetRef={"name": "batch"},
                                              scaling={"minReplicas": 0}))
    r = redis.Redis.from_url(redis_url)
    r.lpush("steal:jobs", *["x"] * 50)
    ready = wait_for("Ready=False", lambda: condition(control_plane, namespace, "steal", "Ready"))
    assert ready["message"].startswith(
        f"spec.scaleTargetRef.name: Deployment 'api' lacks the label {LABEL}=true")
    assert f"kubectl label deployment api {LABEL}=true" in ready["message"]
    assert any("lacks the label" in m for m in events(control_plane, namespace, "InvalidSpec"))
    # the labelled one is scaled (to 0: its queue is empty); the other keeps its 2 replicas
    wait_for("batch scaled to 0", lambda: replicas(control_plane, namespace, "batch") == 0)
    assert replicas(control_plane, namespace, "api") == 2
    control_plane.kubectl("label", "deployment", "api", "-n", namespace, f"{LABEL}=true")
    wait_for("api scaled once labelled",
             lambda: replicas(control_plane, namespace, "api") == 4, timeout=30)
