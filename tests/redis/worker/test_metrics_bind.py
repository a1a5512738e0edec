"""The worker's metrics endpoint listens where it is told (a real process): `--metrics-address`
or $TASKQUEUE_METRICS_ADDRESS.

127.0.0.2 is a loopback address distinct from 127.0.0.1 on Linux: an endpoint bound to it
refuses connections on 127.0.0.1, one bound to 0.0.0.0 accepts both."""

from __future__ import annotations

import shutil

import pytest

from tests.fixtures.processes import Spawn
from tests.fixtures.redis_server import free_port
from tests.helpers.metrics import answers, wait_listening


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
def test_worker_metrics_bind(spawn_process: Spawn, redis_url: str, extra: list[str],
                             env: dict[str, str], on_127_0_0_1: bool) -> None:
    port = free_port()
    proc = spawn_process(_worker(redis_url, port, *extra), env)
    wait_listening("127.0.0.2", port, proc)
    assert answers("127.0.0.1", port) is on_127_0_0_1
