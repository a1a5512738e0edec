"""The console in the cluster against the real API server: viewers sign in with a ServiceAccount
token (TokenRequest, as `kubectl create token`), the TokenReview names them, and a
SubjectAccessReview per namespace decides what they see (`get taskqueues`) and whether they may
act (`update taskqueues`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from taskqueue_devcluster import ControlPlane
from tests.helpers.browser import Browser, console_process

CRD_PATH = "crds/taskqueue.dev_taskqueues.yaml"


def apply(cp: ControlPlane, obj: dict[str, Any]) -> None:
    cp.kubectl("apply", "-f", "-", input=json.dumps(obj))


@pytest.fixture
def two_namespaces(control_plane: ControlPlane, redis_url: str) -> Iterator[tuple[str, str]]:
    """Namespaces `<id>-a` and `<id>-b`, each with a TaskQueue `thumbs` on the test's Redis
    (a: queues a-q, b: queues b-q)."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[3]
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f",
                          str(root / CRD_PATH))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                          "crd/taskqueues.taskqueue.dev")
    suffix = str(int(time.time() * 1000))[-8:]
    names = (f"console-a-{suffix}", f"console-b-{suffix}")
    for ns, prefix in zip(names, ("a", "b"), strict=True):
        control_plane.kubectl("create", "namespace", ns)
        apply(control_plane, {
            "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
            "metadata": {"name": "thumbs", "namespace": ns},
            "spec": {"redis": {"url": redis_url}, "queues": [{"key": f"{prefix}-q"}],
                     "scaleTargetRef": {"name": "none"}}})
    yield names
    for ns in names:
        control_plane.kubectl("delete", "namespace", ns, "--wait=false")


def viewer_token(cp: ControlPlane, namespace: str, name: str, verbs: list[str],
                 grant_in: list[str]) -> str:
    """A ServiceAccount `name` in `namespace` with `verbs` on taskqueues in each of `grant_in`,
    and a token of it from the TokenRequest API."""
    cp.kubectl("create", "serviceaccount", name, "-n", namespace)
    for ns in grant_in:
        apply(cp, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": f"{name}-tq", "namespace": ns},
                   "rules": [{"apiGroups": ["taskqueue.dev"], "resources": ["taskqueues"],
                              "verbs": verbs}]})
        apply(cp, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": f"{name}-tq", "namespace": ns},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                               "name": f"{name}-tq"},
                   "subjects": [{"kind": "ServiceAccount", "name": name,
                                 "namespace": namespace}]})
    return str(cp.kubectl("create", "token", name, "-n", namespace).stdout).strip()


def test_tokens_see_only_the_namespaces_they_may_get_and_act_only_where_they_may_update(
        control_plane: ControlPlane, two_namespaces: tuple[str, str],
        redis_sync: redis.Redis) -> None:
    ns_a, ns_b = two_namespaces
    for q in ("a-q", "b-q"):
        redis_sync.lpush(f"{q}:dead", json.dumps({"queue": q, "payload": "p", "attempts": 3,
                                                  "error": "e", "failed_at": 1.0, "id": q}))
    reader = viewer_token(control_plane, ns_a, "reader", ["get", "list"], [ns_a])
    actor = viewer_token(control_plane, ns_a, "actor", ["get", "list", "update"], [ns_a])
    with console_process("--in-cluster", "--kubeconfig", str(control_plane.kubeconfig),
                         "--allow-actions") as base:
        anonymous = Browser(base)
        status, page = anonymous.get("/")
        assert "Sign in with a Kubernetes token" in page  # redirected to the sign-in page
        assert anonymous.post("/signin", {"token": "not-a-token"})[0] == 401

        r = Browser(base)
        assert r.post("/signin", {"token": reader})[0] == 200
        status, page = r.get("/")
        assert f"{ns_a}/thumbs" in page and ns_b not in page
        assert r.get(f"/tq/{ns_b}/thumbs")[0] == 404  # the other namespace: as if absent
        assert r.get(f"/tq/{ns_b}/thumbs/dead")[0] == 404
        status, page = r.get(f"/tq/{ns_a}/thumbs/dead")
        assert status == 200 and "needs `update taskqueues`" in page
        assert 'class="requeue"' not in page
        digest = re.search(r'data-digest="([0-9a-f]{40})"', page)
        assert digest is not None
        status, _ = r.post(f"/tq/{ns_a}/thumbs/dead/act",
                           {"action": "delete", "digests": digest.group(1)})
        assert status == 403
        assert redis_sync.llen("a-q:dead") == 1

        a = Browser(base)
        assert a.post("/signin", {"token": actor})[0] == 200
        status, page = a.get(f"/tq/{ns_a}/thumbs/dead")
        assert 'class="requeue"' in page
        status, page = a.post(f"/tq/{ns_a}/thumbs/dead/act",
                              {"action": "requeue", "digests": digest.group(1)})
        assert status == 200 and "requeued 1 record(s)" in page
        assert redis_sync.llen("a-q:dead") == 0 and redis_sync.llen("a-q") == 1
        assert a.get(f"/tq/{ns_b}/thumbs")[0] == 404
        assert redis_sync.llen("b-q:dead") == 1
