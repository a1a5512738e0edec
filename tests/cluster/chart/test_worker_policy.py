"""`workerPolicy.allowedImagePrefixes` on the real API server: the chart's
ValidatingAdmissionPolicy rejects a TaskQueue whose worker image is outside the prefixes, in the
namespaces the release watches, and only there."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import yaml

from taskqueue_devcluster import ControlPlane
from tests.cluster.chart.test_cluster import RELEASE, helm_install

PREFIX = "registry.example/team/"


def _taskqueue(name: str, image: str | None) -> str:
    worker = {"image": image} if image else {}
    return yaml.safe_dump({
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue", "metadata": {"name": name},
        "spec": {"redis": {"url": "redis://redis:6379/0"}, "queues": [{"key": name}],
                 "worker": worker},
    })


@pytest.fixture
def other_namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    control_plane.kubectl("create", "namespace", name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_worker_images_outside_the_prefixes_are_rejected(
    control_plane: ControlPlane, namespace: str, other_namespace: str
) -> None:
    cp = control_plane
    helm_install(cp, namespace, "replicaCount=0",
                 f"workerPolicy.allowedImagePrefixes={{{PREFIX},ghcr.io/ok/}}")
    cp.wait_established("crd/taskqueues.taskqueue.dev")
    try:
        # the API server loads a new policy asynchronously: retry until it is in force
        deadline = time.monotonic() + 60
        while True:
            bad = cp.kubectl("apply", "-n", namespace, "-f", "-", check=False,
                             input=_taskqueue("evil", "evil.example/miner:1"))
            if bad.returncode != 0 or time.monotonic() > deadline:
                break
            cp.kubectl("delete", "taskqueue", "evil", "-n", namespace, check=False)
            time.sleep(0.5)
        assert bad.returncode != 0, "the policy never rejected evil.example/miner:1"
        assert "spec.worker.image is not allowed here" in bad.stderr, bad.stderr
        assert PREFIX in bad.stderr and "ValidatingAdmissionPolicy" in bad.stderr
        for name, image in (("good", f"{PREFIX}worker:1"), ("second", "ghcr.io/ok/w:2"),
                            ("default", None)):
            cp.kubectl("apply", "-n", namespace, "-f", "-", input=_taskqueue(name, image))
        # an update to a forbidden image is rejected too
        up = cp.kubectl("apply", "-n", namespace, "-f", "-", check=False,
                        input=_taskqueue("good", "evil.example/miner:1"))
        assert up.returncode != 0 and "spec.worker.image is not allowed" in up.stderr
        # a namespace this release does not watch is not its business
        cp.kubectl("apply", "-n", other_namespace, "-f", "-",
                   input=_taskqueue("elsewhere", "evil.example/miner:1"))
    finally:
        cp.helm("uninstall", RELEASE, "-n", namespace, "--wait", "--timeout", "120s")
    left = cp.kubectl("get", "validatingadmissionpolicies,validatingadmissionpolicybindings",
                      "-o", "name").stdout
    assert namespace not in left  # the policy and binding went with the release

