"""The operator process serves only its own metrics: its /metrics has no `taskqueue_worker_*`
(two registries, `taskqueue.telemetry.metrics`); its poll-lag histogram counts its polls."""

from __future__ import annotations

import subprocess
from pathlib import Path

from taskqueue_devcluster import ControlPlane
from tests.fixtures.redis_server import free_port
from tests.helpers.kube import apply, taskqueue
from tests.helpers.wait import wait_for
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
    assert {"taskqueue_backlog", "taskqueue_poll_duration_seconds",
            "taskqueue_poll_lag_seconds"} <= names(text)
    assert not WORKER_NAME.findall(text), (tmp_path / "operator.log").read_text()[-2000:]


def test_the_operator_reports_how_late_its_polls_start(
        control_plane: ControlPlane, crd: None, namespace: str, redis_url: str,
        tmp_path: Path) -> None:
    """`taskqueue_poll_lag_seconds` counts the polls after the first (each has a due time) and
    sums how late each started: an idle operator with one TaskQueue polled every second starts
    them on time (a lag near 0, not the interval: the due time is the previous start plus it)."""
    apply(control_plane, namespace, taskqueue("lag", redis_url))
    port = free_port()
    log = (tmp_path / "operator.log").open("wb")
    proc = subprocess.Popen(
        ["taskqueue-operator", "--kubeconfig", str(control_plane.kubeconfig),
         "--namespace", namespace, "--no-leader-election", "--metrics-port", str(port),
         "--health-port", "0"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        scrape(port, proc)
        counted = wait_for("five polls counted in taskqueue_poll_lag_seconds",
                           lambda: (n := lag(scrape(port, proc))[1]) >= 5 and n, timeout=60,
                           every=0.5)
        total, _ = lag(scrape(port, proc))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert counted >= 5
    assert total / counted < 0.5, (total, counted)


def lag(text: str) -> tuple[float, float]:
    """(sum, count) of the poll-lag histogram in a /metrics text."""
    values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
              if line.startswith("taskqueue_poll_lag_seconds_")}
    return values.get("taskqueue_poll_lag_seconds_sum", 0.0), \
        values.get("taskqueue_poll_lag_seconds_count", 0.0)
