"""Helpers of the operator, e2e and bench tests: kubectl get/apply, a TaskQueue manifest, the
operator run in a thread (`OperatorThread`, exactly what the console script runs), a viewer's
token with given rights on taskqueues (`viewer_token`, the console's sign-in)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import yaml

from taskqueue.controller import main as operator_main
from taskqueue_devcluster import ControlPlane
from tests.helpers.wait import wait_for


def get(cp: ControlPlane, *args: str) -> Any:
    proc = cp.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def apply(cp: ControlPlane, namespace: str, manifest: dict[str, Any], *,
          check: bool = True) -> Any:
    return cp.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest),
                      check=check)


def viewer_token(cp: ControlPlane, namespace: str, name: str, verbs: list[str],
                 grant_in: list[str]) -> str:
    """A ServiceAccount `name` in `namespace` with `verbs` on taskqueues in each of `grant_in`,
    and a token of it from the TokenRequest API (as `kubectl create token`)."""
    cp.kubectl("create", "serviceaccount", name, "-n", namespace)
    for ns in grant_in:
        apply(cp, ns, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                       "metadata": {"name": f"{name}-tq", "namespace": ns},
                       "rules": [{"apiGroups": ["taskqueue.dev"], "resources": ["taskqueues"],
                                  "verbs": verbs}]})
        apply(cp, ns, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": f"{name}-tq", "namespace": ns},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                   "name": f"{name}-tq"},
                       "subjects": [{"kind": "ServiceAccount", "name": name,
                                     "namespace": namespace}]})
    return str(cp.kubectl("create", "token", name, "-n", namespace).stdout).strip()


def taskqueue(name: str, redis_url: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "redis": {"url": redis_url},
        "queues": [{"key": f"{name}:jobs"}],
        "worker": {"handler": "taskqueue.worker.builtin:sleep", "heartbeatSeconds": 1,
                   "terminationGracePeriodSeconds": 10},
        "scaling": {"pollIntervalSeconds": 1, "idleCooldownSeconds": 2,
                    "scaleDownStabilizationSeconds": 0, "maxReplicas": 4},
    }
    for key, value in spec.items():
        body[key] = {**body[key], **value} if isinstance(body.get(key), dict) else value
    return {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
            "metadata": {"name": name}, "spec": body}


def condition(cp: ControlPlane, ns: str, name: str, kind: str) -> dict[str, Any] | None:
    tq = get(cp, "taskqueue", name, "-n", ns) or {}
    for c in (tq.get("status") or {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return None


def events(cp: ControlPlane, ns: str, reason: str) -> list[str]:
    found = get(cp, "events", "-n", ns) or {"items": []}
    return [e["message"] for e in found["items"] if e["reason"] == reason]


def replicas(cp: ControlPlane, namespace: str, deployment: str) -> int | None:
    found = get(cp, "deployment", deployment, "-n", namespace)
    return None if found is None else int(found["spec"].get("replicas", 1))



class OperatorThread:
    """`taskqueue-operator` running in a thread; `stop()` ends it as SIGTERM would."""

    def __init__(self, argv: list[str]) -> None:
        self.args = operator_main.parse_args(argv)
        self.stop_flag = threading.Event()
        self.ready = threading.Event()
        self.exit_code: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="operator", daemon=True)

    def _main(self) -> None:
        try:
            self.exit_code = asyncio.run(
                operator_main.run(self.args, stop_flag=self.stop_flag, ready_flag=self.ready))
        except BaseException as e:  # surfaced by stop()
            self.error = e

    def start(self, *, wait_ready: bool = True) -> OperatorThread:
        self.thread.start()
        if wait_ready:
            wait_for("the operator to be ready", lambda: self.ready.is_set() or self.error,
                     timeout=30)
            if self.error:
                raise self.error
        return self

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "operator did not stop"
        if self.error:
            raise self.error
