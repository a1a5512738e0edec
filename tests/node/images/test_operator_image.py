"""The operator image starts against the real control plane and serves /healthz and /metrics.

Run as the chart runs it (uid 10001, read-only root with a small writable /tmp, no capabilities);
the kubeconfig of the test control plane is mounted read-only and the API server is reached over
the host network.
"""

from __future__ import annotations

import shutil
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from taskqueue_devcluster import ControlPlane
from tests.fixtures.images import Engine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), ""


def wait_for_http(url: str, logs: Callable[[], str], *, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            status, body = http_get(url)
        except OSError as e:
            last = e
        else:
            if status == 200:
                return body
            last = status
        time.sleep(0.3)
    pytest.fail(f"{url} did not answer 200 within {timeout}s (last: {last}); "
                f"logs:\n{logs()[-3000:]}")


def test_version_and_user(containers: Engine) -> None:
    image = containers.operator_image
    fmt = '{{.Config.User}} {{index .Config.Labels "org.opencontainers.image.version"}}'
    user, version = containers.run("image", "inspect", "--format", fmt, image).stdout.split()
    assert user == "10001:10001"
    assert image.endswith(f":{version}")
    proc = containers.run("run", "--rm", *containers.read_only, "--cap-drop", "ALL",
                          "--network", "none",
                          image, "--help")
    assert "taskqueue-operator" in proc.stdout


def test_serves_health_and_metrics(containers: Engine, control_plane: ControlPlane,
                                   tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copy(control_plane.kubeconfig, kubeconfig)
    kubeconfig.chmod(0o644)  # readable by uid 10001
    health, metrics = free_port(), free_port()
    name = containers.start(
        containers.operator_image, "--kubeconfig", "/kube/config", "--no-leader-election",
        "--all-namespaces", "--health-port", str(health), "--metrics-port", str(metrics),
        # /tmp: the chart mounts an emptyDir there (the kubeconfig loader writes certs to it)
        run_args=["-v", f"{kubeconfig}:/kube/config:ro", "--tmpfs", "/tmp:size=16m"])
    logs = lambda: containers.logs(name)  # noqa: E731
    assert wait_for_http(f"http://127.0.0.1:{health}/healthz", logs)
    text = wait_for_http(f"http://127.0.0.1:{metrics}/metrics", logs)
    assert "taskqueue_poll_duration_seconds" in text
    containers.run("stop", "-t", "20", name, timeout=60)
    assert containers.exit_code(name) == 0, containers.logs(name)
