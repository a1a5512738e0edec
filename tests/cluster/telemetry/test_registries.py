"""The operator process serves only its own metrics: its /metrics has no `taskqueue_worker_*`
(two registries, `taskqueue.telemetry.metrics`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from taskqueue_devcluster import ControlPlane
from tests.fixtures.redis_server import free_port
from tests.redis.telemetry.test_registries import WORKER_NAME, scrape
from tests.unit.telemetry.test_registries import names


def test_the_operator_process_serves_operator_metrics_only(
        control_plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "operator.log").open("wb")
    proc = subprocess.Popen(
        ["taskqueue-operator", "--kubeconfig", str(control_plane.kubeconfig),
         "--namespace", namespace, "--no-leader-election", "--metrics-port", str(port),
         "--health-port", "0"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        text = scrape(port, proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert {"taskqueue_backlog", "taskqueue_poll_duration_seconds"} <= names(text)
    assert not WORKER_NAME.findall(text), (tmp_path / "operator.log").read_text()[-2000:]
