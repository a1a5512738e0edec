"""The metrics endpoints listen where they are told (real processes): the worker by
`--metrics-address`/$TASKQUEUE_METRICS_ADDRESS, the operator by `--metrics-address`.

127.0.0.2 is a loopback address distinct from 127.0.0.1 on Linux: an endpoint bound to it
refuses connections on 127.0.0.1, one bound to 0.0.0.0 accepts both.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from taskqueue_devcluster import ControlPlane
from tests.fixtures.redis_server import free_port


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as conn:
            conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            return conn.recv(12).startswith(b"HTTP/1.")
    except OSError:
        return False


def wait_listening(host: str, port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not answers(host, port):
        assert proc.poll() is None, f"exited {proc.returncode}"
        assert time.monotonic() < deadline, f"nothing on {host}:{port}"
        time.sleep(0.1)


Spawn = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, env={**os.environ, **(env or {})},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _worker(redis_url: str, port: int, *extra: str) -> list[str]:
    exe = shutil.which("taskqueue-worker")
    assert exe is not None
    return [exe, "--redis-url", redis_url, "--queue", "jobs", "--handler",
            "taskqueue.worker.builtin:noop", "--metrics-port", str(port), *extra]


@pytest.mark.parametrize(
    ("extra", "env", "on_127_0_0_1"),
    [
        pytest.param([], {}, True, id="default-all-interfaces"),
        pytest.param(["--metrics-address", "127.0.0.2"], {}, False, id="flag"),
        pytest.param([], {"TASKQUEUE_METRICS_ADDRESS": "127.0.0.2"}, False, id="env"),
    ],
)
def test_worker_metrics_bind(spawn: Spawn, redis_url: str, extra: list[str],
                             env: dict[str, str], on_127_0_0_1: bool) -> None:
    port = free_port()
    proc = spawn(_worker(redis_url, port, *extra), env)
    wait_listening("127.0.0.2", port, proc)
    assert answers("127.0.0.1", port) is on_127_0_0_1


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("extra", "on_127_0_0_1"),
    [
        pytest.param([], True, id="default-all-interfaces"),
        pytest.param(["--metrics-address", "127.0.0.2"], False, id="flag"),
    ],
)
def test_operator_metrics_bind(spawn: Spawn, control_plane: ControlPlane,
                               namespace: str, tmp_path: Path, extra: list[str],
                               on_127_0_0_1: bool) -> None:
    exe = shutil.which("taskqueue-operator")
    assert exe is not None
    port = free_port()
    proc = spawn([exe, "--namespace", namespace, "--no-leader-election", "--health-port", "0",
                  "--kubeconfig", str(control_plane.kubeconfig), "--metrics-port", str(port),
                  *extra])
    wait_listening("127.0.0.2", port, proc)
    assert answers("127.0.0.1", port) is on_127_0_0_1
