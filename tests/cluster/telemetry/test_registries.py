"""The operator process serves only its own metrics: its /metrics has no `taskqueue_worker_*`
(two registries, `taskqueue.telemetry.metrics`); its poll-lag histogram counts its polls."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from taskqueue_devcluster import ControlPlane
from tests.fixtures.redis_server import free_port
from tests.helpers.kube import apply, taskqueue
from tests.helpers.wait import wait_for
from tests.redis.telemetry.test_registries import WORKER_NAME, scrape
from tests.unit.telemetry.test_registries import names


@dataclass(frozen=True)
class Served:
    """A `taskqueue-operator` process and the port of its /metrics."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def scrape(self) -> str:
        return scrape(self.port, self.proc)


@pytest.fixture
def operator_metrics(control_plane: ControlPlane, namespace: str,
                     tmp_path: Path) -> Iterator[Served]:
    """`taskqueue-operator` on the test's namespace (no leader election) serving /metrics on a
    free port, its output in operator.log; stopped after the test."""
    port, log = free_port(), tmp_path / "operator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["taskqueue-operator", "--kubeconfig", str(control_plane.kubeconfig),
             "--namespace", namespace, "--no-leader-election", "--metrics-port", str(port),
             "--health-port", "0"],
            stdout=out, stderr=subprocess.STDOUT)
        try:
            yield Served(proc=proc, port=port, log=log)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_the_operator_process_serves_operator_metrics_only(operator_metrics: Served) -> None:
    text = operator_metrics.scrape()
    assert {"taskqueue_backlog", "taskqueue_poll_duration_seconds",
            "taskqueue_poll_lag_seconds"} <= names(text)
    assert not WORKER_NAME.findall(text), operator_metrics.log.read_text()[-2000:]


def test_the_operator_reports_how_late_its_polls_start(
        control_plane: ControlPlane, crd: None, namespace: str, redis_url: str,
        operator_metrics: Served) -> None:
    """`taskqueue_poll_lag_seconds` counts the polls after the first (each has a due time) and
    sums how late each started: an idle operator with one TaskQueue polled every second starts
    them on time (a lag near 0, not the interval: the due time is the previous start plus it)."""
    apply(control_plane, namespace, taskqueue("lag", redis_url))
    counted = wait_for("five polls counted in taskqueue_poll_lag_seconds",
                       lambda: (n := lag(operator_metrics.scrape())[1]) >= 5 and n, timeout=60,
                       every=0.5)
    total, _ = lag(operator_metrics.scrape())
    assert counted >= 5
    assert total / counted < 0.5, (total, counted)


def lag(text: str) -> tuple[float, float]:
    """(sum, count) of the poll-lag histogram in a /metrics text."""
    values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
              if line.startswith("taskqueue_poll_lag_seconds_")}
    return values.get("taskqueue_poll_lag_seconds_sum", 0.0), \
        values.get("taskqueue_poll_lag_seconds_count", 0.0)
