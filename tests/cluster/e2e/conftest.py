"""e2e fixtures: the chart installed with helm, and the operator run with its ServiceAccount token.

`chart_operator(namespace)` does what a user does (`helm install` into a fresh namespace, watching
it), then runs `taskqueue-operator` as a local process-in-a-thread authenticated with a token of
the chart's ServiceAccount (`kubectl create token`), so the chart's RBAC is exactly what the e2e
scenarios exercise. The operator pod itself is not run (replicaCount=0): the process kubelet only
stands in for the worker pods' container runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from taskqueue_devcluster import ControlPlane
from tests.helpers.kube import OperatorThread

CHART = Path(__file__).resolve().parents[3] / "charts" / "taskqueue-operator"
RELEASE = "e2e"
SERVICE_ACCOUNT = f"{RELEASE}-taskqueue-operator"


@pytest.fixture
def chart_operator(
    control_plane: ControlPlane, run_operator: Callable[..., OperatorThread], tmp_path: Path
) -> Callable[[str], OperatorThread]:
    def start(namespace: str) -> OperatorThread:
        # --take-ownership: the CRD is cluster-wide and kept across releases (resource-policy keep)
        control_plane.helm(
            "install", RELEASE, str(CHART), "-n", namespace, "--take-ownership",
            "--set", "replicaCount=0", "--set", f"watchNamespaces={{{namespace}}}",
            "--wait", "--timeout", "120s",
        )
        control_plane.wait_established("crd/taskqueues.taskqueue.dev")
        token = control_plane.token_kubeconfig(
            namespace, SERVICE_ACCOUNT, tmp_path / f"{namespace}-operator.kubeconfig"
        )
        return run_operator(namespace, kubeconfig=token)

    return start
