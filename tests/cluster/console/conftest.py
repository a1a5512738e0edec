"""The console's cluster tests' fixtures: two namespaces each with a TaskQueue on the test's
Redis, one dead letter in each, and the tokens of a reader and an actor of the first."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from taskqueue_devcluster import ControlPlane
from tests.helpers.kube import apply, viewer_token

CRD = Path(__file__).resolve().parents[3] / "crds" / "taskqueue.dev_taskqueues.yaml"


@pytest.fixture
def two_namespaces(control_plane: ControlPlane, redis_url: str) -> Iterator[tuple[str, str]]:
    """Namespaces `console-a-<id>` and `console-b-<id>`, each with a TaskQueue `thumbs` on the
    test's Redis (a: queue a-q, b: queue b-q)."""
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    control_plane.wait_established("crd/taskqueues.taskqueue.dev")
    suffix = str(int(time.time() * 1000))[-8:]
    names = (f"console-a-{suffix}", f"console-b-{suffix}")
    for ns, prefix in zip(names, ("a", "b"), strict=True):
        control_plane.kubectl("create", "namespace", ns)
        apply(control_plane, ns, {
            "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
            "metadata": {"name": "thumbs", "namespace": ns},
            "spec": {"redis": {"url": redis_url}, "queues": [{"key": f"{prefix}-q"}],
                     "scaleTargetRef": {"name": "none"}}})
    yield names
    for ns in names:
        control_plane.kubectl("delete", "namespace", ns, "--wait=false")


@dataclass(frozen=True)
class Viewers:
    """The two namespaces and the tokens of the first's reader and actor."""

    ns_a: str
    ns_b: str
    reader: str
    """get, list taskqueues in ns_a (nothing in ns_b)."""
    actor: str
    """get, list, update taskqueues in ns_a (nothing in ns_b)."""


@pytest.fixture
def viewers(control_plane: ControlPlane, two_namespaces: tuple[str, str],
            redis_sync: redis.Redis) -> Viewers:
    """`two_namespaces` with one dead letter in each TaskQueue (id = its queue), and the tokens
    of a reader and an actor of the first namespace."""
    ns_a, ns_b = two_namespaces
    for q in ("a-q", "b-q"):
        redis_sync.lpush(f"{q}:dead", json.dumps({"queue": q, "payload": "p", "attempts": 3,
                                                  "error": "e", "failed_at": 1.0, "id": q}))
    return Viewers(
        ns_a, ns_b,
        reader=viewer_token(control_plane, ns_a, "reader", ["get", "list"], [ns_a]),
        actor=viewer_token(control_plane, ns_a, "actor", ["get", "list", "update"], [ns_a]))
