"""Each process serves only its own metrics: the worker's /metrics has no operator metric and
the operator's has no `taskqueue_worker_*` (two registries, `taskqueue.telemetry.metrics`)."""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from taskqueue.telemetry import metrics
from taskqueue_devcluster import ControlPlane
from tests.fixtures.redis_server import free_port
from tests.helpers.wait import wait_for
from tests.worker.procs import spawn

WORKER_NAME = re.compile(r"^# TYPE (taskqueue_worker_\w+)", re.MULTILINE)
ANY_NAME = re.compile(r"^# TYPE (taskqueue_\w+)", re.MULTILINE)


def scrape(port: int, proc: subprocess.Popen[bytes]) -> str:
    """The /metrics text once the process serves it; fails if the process exits first."""
    def text() -> str | None:
        assert proc.poll() is None, f"exited {proc.returncode} before serving /metrics"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                body: str = r.read().decode()
                return body
        except (urllib.error.URLError, ConnectionError):
            return None

    return wait_for(f"/metrics on port {port}", text, timeout=30, every=0.1)


def names(text: str) -> set[str]:
    return set(ANY_NAME.findall(text))


def test_the_two_registries_share_no_metric() -> None:
    worker = names(generate_latest(metrics.WORKER).decode())
    operator = names(generate_latest(metrics.OPERATOR).decode())
    assert worker and operator
    assert worker.isdisjoint(operator)
    assert all(n.startswith("taskqueue_worker_") for n in worker)
    assert not any(n.startswith("taskqueue_worker_") for n in operator)


def test_the_worker_process_serves_worker_metrics_only(redis_url: str) -> None:
    port = free_port()
    proc = spawn(redis_url, "--queue", "q", "--handler", "taskqueue.worker.builtin:noop",
                 "--metrics-port", str(port))
    try:
        text = scrape(port, proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "taskqueue_worker_in_flight" in names(text)
    assert names(text) == set(WORKER_NAME.findall(text))
    assert "process_cpu_seconds_total" in text


@pytest.mark.cluster
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
