"""The chart's web console as a real pod on a real node, reached as a user reaches it.

`helm install` with console.enabled=true runs the console from the operator's image (read-only
root, its own ServiceAccount) beside the operator; the user runs `kubectl port-forward` to the
console's Service, signs in with a ServiceAccount token from `kubectl create token`, and sees
the TaskQueue of the namespace with the numbers Redis holds and the pause the operator wrote
from the spec. A token that may not `get taskqueues` there sees nothing of it.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.helpers.browser import Browser, free_port
from tests.helpers.kube import viewer_token
from tests.node.e2e.conftest import HANDLER_IMAGE, NodeCluster, uninstall_release
from tests.node.e2e.test_real_pods import wait_for

pytestmark = pytest.mark.timeout(900)

CHART = Path(__file__).resolve().parents[3] / "charts" / "taskqueue-operator"
NS = "e2e-console"
RELEASE = "tqc"
CONSOLE = f"{RELEASE}-taskqueue-operator-console"
TQ = "thumbs"
QUEUE = "thumbs:q"


def kubectl_json(nc: NodeCluster, *args: str) -> Any:
    return json.loads(nc.cp.kubectl("get", "-n", NS, "-o", "json", *args).stdout)


def diagnose(nc: NodeCluster) -> str:
    out = nc.cp.kubectl("get", "pods,deploy,svc,endpoints,tq", "-n", NS, "-o", "wide",
                        check=False)
    logs = nc.cp.kubectl("logs", "-n", NS, f"deploy/{CONSOLE}", "--tail=30", check=False)
    return (out.stdout + out.stderr + "\n--- console:\n" + logs.stdout + logs.stderr
            + "\n--- kubelet:\n" + nc.node.log_tail("kubelet", 15))


@pytest.fixture(scope="module")
def release(node_cluster: NodeCluster) -> Iterator[NodeCluster]:
    """The chart with the console, and a TaskQueue whose one queue spec.queues[].paused holds
    (the operator writes the pause into Redis and keeps the fleet at zero: the backlog stays
    what the test pushed)."""
    nc = node_cluster
    nc.cp.kubectl("create", "namespace", NS)
    try:
        nc.cp.helm("install", RELEASE, str(CHART), "-n", NS, "--set", f"watchNamespaces={{{NS}}}",
                   "--set", "console.enabled=true", "--set", "console.refreshSeconds=1",
                   "--wait", "--timeout", "240s", timeout=300)
    except Exception:
        print(diagnose(nc))
        raise
    nc.cp.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": TQ, "namespace": NS},
        "spec": {"redis": {"url": nc.redis_url_for_pods},
                 "queues": [{"key": QUEUE, "paused": True}],
                 "worker": {"image": HANDLER_IMAGE, "handler": "e2etasks.tasks:work"},
                 "scaling": {"minReplicas": 0, "maxReplicas": 2, "pollIntervalSeconds": 1}}}))
    try:
        yield nc
    finally:
        uninstall_release(nc.cp, release=RELEASE, namespace=NS, taskqueues=[TQ])


@pytest.fixture
def port_forward(release: NodeCluster) -> Iterator[str]:
    """`kubectl port-forward svc/<console> PORT:8470`, as docs/console.md says; its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [str(release.cp.bin_dir / "kubectl"), "port-forward", "-n", NS, f"svc/{CONSOLE}",
         f"{port}:8470"], env=release.cp.env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def serves() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"kubectl port-forward exited {proc.returncode}: "
                            f"{proc.stderr.read() if proc.stderr else ''}\n{diagnose(release)}")
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=5) as reply:
                    return bool(reply.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        wait_for(serves, "the console through kubectl port-forward", timeout=120,
                 diagnose=lambda: diagnose(release))
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_console_pod_runs_locked_down_from_the_operators_image(
        release: NodeCluster) -> None:
    [pod] = kubectl_json(release, "pods", "-l", "app.kubernetes.io/component=console")["items"]
    [operator] = kubectl_json(release, "pods",
                              "-l", "app.kubernetes.io/component=operator")["items"]
    assert pod["spec"]["serviceAccountName"] == CONSOLE
    assert pod["spec"]["containers"][0]["image"] == operator["spec"]["containers"][0]["image"]
    [status] = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0, status
    assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_a_user_signs_in_through_port_forward_and_sees_the_taskqueue(
        release: NodeCluster, port_forward: str) -> None:
    r = redis.Redis(port=release.redis.port, decode_responses=True)
    wait_for(lambda: r.hget(f"{QUEUE}:flow", f"paused:{QUEUE}") == "spec",
             "the operator to write the spec's pause", diagnose=lambda: diagnose(release))
    r.lpush(QUEUE, *[f"task-{i}" for i in range(7)])
    viewer = viewer_token(release.cp, NS, "viewer", ["get", "list"], [NS])
    stranger = viewer_token(release.cp, NS, "stranger", [], [])

    anonymous = Browser(port_forward)
    status, page = anonymous.get("/")
    assert status == 200 and "token" in page.lower() and TQ not in page  # the sign-in form

    outsider = Browser(port_forward)
    assert outsider.post("/signin", {"token": stranger})[0] == 200
    status, page = outsider.get("/")
    assert status == 200 and f"{NS}/{TQ}" not in page
    assert outsider.get(f"/tq/{NS}/{TQ}")[0] == 404

    user = Browser(port_forward)
    assert user.post("/signin", {"token": viewer})[0] == 200

    def listed() -> str | None:
        status, page = user.get("/")
        return page if status == 200 and f'data-tq="{NS}/{TQ}"' in page else None

    wait_for(listed, "the TaskQueue on the list page", timeout=60,
             diagnose=lambda: diagnose(release))

    def shows_the_backlog() -> str | None:
        status, page = user.get(f"/tq/{NS}/{TQ}")
        found = re.search(rf'data-field="backlog:{re.escape(QUEUE)}">(\d+)<', page)
        return page if status == 200 and found and int(found.group(1)) == r.llen(QUEUE) \
            else None

    page = wait_for(shows_the_backlog, "the console pod's page to show Redis's backlog (7)",
                    timeout=60, diagnose=lambda: diagnose(release))
    assert r.llen(QUEUE) == 7
    assert "paused by spec.queues[].paused" in page
    assert release.redis_url_for_pods not in page  # the Redis URL is never shown
