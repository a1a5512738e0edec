"""The worker process serves only its own metrics: its /metrics has no operator metric (two
registries, `taskqueue.telemetry.metrics`)."""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.request

from tests.fixtures.redis_server import free_port
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import spawn
from tests.unit.telemetry.test_registries import names

WORKER_NAME = re.compile(r"^# TYPE (taskqueue_worker_\w+)", re.MULTILINE)


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
