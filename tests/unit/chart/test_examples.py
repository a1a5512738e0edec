"""Every example is a valid TaskQueue (the models), valid Kubernetes (the schemas), and coherent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from taskqueue.api import manifest
from taskqueue.worker import command as worker_command
from tests.helpers.chart import REPO

EXAMPLES = REPO / "examples"
MANIFESTS = sorted(EXAMPLES.glob("*.yaml"))
KUBE_VERSION = "1.29.0"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_the_examples_are_there() -> None:
    assert {p.name for p in MANIFESTS} >= {
        "vip-normal.yaml", "redis-secret.yaml", "scale-target-ref.yaml"
    }


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.name for p in MANIFESTS])
def test_example_is_a_valid_taskqueue_and_valid_kubernetes(path: Path) -> None:
    tq = manifest.load(path)
    (raw,) = [d for d in _docs(path) if d["kind"] == "TaskQueue"]
    assert raw["metadata"]["name"] == tq.metadata.name  # named, not the model's default
    for doc in _docs(path):
        if doc["kind"] != "TaskQueue":
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_vip_normal_matches_the_seed_scenario() -> None:
    spec = manifest.load(EXAMPLES / "vip-normal.yaml").spec
    assert [(q.key, q.starvationLimit) for q in spec.queues] == [
        ("emails:vip", 3), ("emails:normal", None)
    ]


def test_secret_example_references_its_secret() -> None:
    path = EXAMPLES / "redis-secret.yaml"
    ref = manifest.load(path).spec.redis.urlSecretRef
    assert ref is not None
    [secret] = [d for d in _docs(path) if d["kind"] == "Secret"]
    assert (secret["metadata"]["name"], ref.key in secret["stringData"]) == (ref.name, True)


def test_scale_target_workers_consume_the_taskqueue_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user Deployment's worker flags describe the same queues and keys as the TaskQueue."""
    path = EXAMPLES / "scale-target-ref.yaml"
    tq = manifest.load(path)
    [deploy] = [d for d in _docs(path) if d["kind"] == "Deployment"]
    assert tq.spec.scaleTargetRef is not None
    assert deploy["metadata"]["name"] == tq.spec.scaleTargetRef.name
    assert "replicas" not in deploy["spec"], "replicas belongs to the operator"
    [container] = deploy["spec"]["template"]["spec"]["containers"]
    monkeypatch.delenv("TASKQUEUE_MANIFEST", raising=False)
    args = worker_command.parser().parse_args(container["args"])
    worker_spec = worker_command.spec_from(args)
    assert [q.key for q in worker_spec.queues] == [q.key for q in tq.spec.queues]
    assert worker_spec.key_prefix == tq.spec.key_prefix
    env = {e["name"]: e for e in container["env"]}
    assert env["TASKQUEUE_WORKER_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
