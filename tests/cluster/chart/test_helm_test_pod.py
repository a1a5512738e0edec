"""The `helm test` pod: rendered with the operator's image, and its check run for real.

The check itself (the container's `python3 -c` program) is run here as the kubelet would run it:
with the Service variables the kubelet injects, against a real HTTP server on loopback standing
for the Service. tests/node/e2e runs `helm test` on a real node (kube-proxy routing the ClusterIP).
"""

from __future__ import annotations

import contextlib
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.chart import Render, one

METRICS = b"# HELP taskqueue_up x\n# TYPE taskqueue_up gauge\ntaskqueue_up 1\n"
OTHER = b"# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 3\n"


@pytest.fixture
def test_pod(render: Render) -> dict[str, Any]:
    return one(render(tests=True), "Pod")


@contextlib.contextmanager
def serve(body: bytes, status: int = 200) -> Iterator[int]:
    """A real HTTP server on loopback standing for the Service; yields its port."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def run_check(pod: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The container's program with its own prefix argument, 2 quick attempts instead of 6."""
    [container] = pod["spec"]["containers"]
    assert container["command"] == ["python3", "-c"]
    program, prefix, _attempts, _pause = container["args"]
    return subprocess.run([sys.executable, "-c", program, prefix, "2", "0.1"], env=env,
                          capture_output=True, text=True, timeout=60)


def test_pod_runs_the_operator_image_and_reads_the_service_variables(
        render: Render, test_pod: dict[str, Any]) -> None:
    objs = render(tests=True)
    operator = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    [container] = test_pod["spec"]["containers"]
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert container["image"] == operator["image"], "no other image to pull or mirror"
    assert test_pod["spec"]["enableServiceLinks"] is True
    service = one(objs, "Service")["metadata"]["name"]
    assert container["args"][1] == service.upper().replace("-", "_")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert test_pod["spec"]["securityContext"]["runAsNonRoot"] is True
    # The test pod must not become an endpoint of the Service it checks.
    selector = one(objs, "Service")["spec"]["selector"]
    labels = test_pod["metadata"]["labels"]
    assert any(labels.get(k) != v for k, v in selector.items())


def test_image_digest_and_pull_secrets_apply_to_the_test_pod(render: Render) -> None:
    digest = "sha256:" + "a" * 64
    pod = one(render(sets=[f"image.digest={digest}", "imagePullSecrets[0].name=regcred"],
                     tests=True), "Pod")
    assert pod["spec"]["containers"][0]["image"].endswith(f"@{digest}")
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]


@pytest.mark.parametrize("body, status, ok, message", [
    pytest.param(METRICS, 200, True, "serves taskqueue_ metrics", id="operator-metrics"),
    pytest.param(OTHER, 200, False, "without taskqueue_ metrics", id="other-metrics"),
    pytest.param(b"boom", 500, False, "HTTP Error 500", id="server-error"),
])
def test_check_through_the_service_address(test_pod: dict[str, Any], body: bytes, status: int,
                                           ok: bool, message: str) -> None:
    prefix = test_pod["spec"]["containers"][0]["args"][1]
    with serve(body, status) as port:
        proc = run_check(test_pod, {f"{prefix}_SERVICE_HOST": "127.0.0.1",
                                    f"{prefix}_SERVICE_PORT_METRICS": str(port)})
        assert (proc.returncode == 0) is ok, proc.stderr
        assert message in proc.stdout + proc.stderr


def test_check_fails_when_nothing_answers(test_pod: dict[str, Any]) -> None:
    prefix = test_pod["spec"]["containers"][0]["args"][1]
    with serve(METRICS) as port:
        pass
    # the server is gone: its port refuses connections
    proc = run_check(test_pod, {f"{prefix}_SERVICE_HOST": "127.0.0.1",
                                f"{prefix}_SERVICE_PORT_METRICS": str(port)})
    assert proc.returncode == 1
    assert "after 2 attempts" in proc.stderr and "refused" in proc.stderr


def test_check_fails_without_the_service_variables(test_pod: dict[str, Any]) -> None:
    prefix = test_pod["spec"]["containers"][0]["args"][1]
    proc = run_check(test_pod, {})
    assert proc.returncode == 1
    assert f"no {prefix}_SERVICE_HOST" in proc.stderr
