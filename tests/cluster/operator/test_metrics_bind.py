"""The operator's metrics endpoint listens where `--metrics-address` says (a real process; the
worker's: tests/redis/worker/test_metrics_bind.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from taskqueue_devcluster import ControlPlane
from tests.fixtures.processes import Spawn
from tests.fixtures.redis_server import free_port
from tests.helpers.metrics import answers, wait_listening


@pytest.mark.parametrize(
    ("extra", "on_127_0_0_1"),
    [
        pytest.param([], True, id="default-all-interfaces"),
        pytest.param(["--metrics-address", "127.0.0.2"], False, id="flag"),
    ],
)
def test_operator_metrics_bind(spawn_process: Spawn, control_plane: ControlPlane,
                               namespace: str, tmp_path: Path, extra: list[str],
                               on_127_0_0_1: bool) -> None:
    exe = shutil.which("taskqueue-operator")
    assert exe is not None
    port = free_port()
    proc = spawn_process([exe, "--namespace", namespace, "--no-leader-election",
                          "--health-port", "0", "--kubeconfig", str(control_plane.kubeconfig),
                          "--metrics-port", str(port), *extra])
    wait_listening("127.0.0.2", port, proc)
    assert answers("127.0.0.1", port) is on_127_0_0_1
