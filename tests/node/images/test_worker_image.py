"""The worker base image, run the way the chart's pods run it: uid 10001, read-only root, no caps.

The container reaches the session's redis-server over the host network; `stop -t` delivers SIGTERM
and the worker must finish the task in hand, exit 0 and leave nothing in its processing list.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from tests.fixtures.images import Engine

WORKER_ID = "image-test-worker"


def manifest(redis_url: str, *, handler: str, queue: str = "img:q", concurrency: int = 1) -> str:
    return json.dumps({
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": "img", "namespace": "default"},
        "spec": {"redis": {"url": redis_url}, "queues": [{"key": queue}],
                 "worker": {"handler": handler, "concurrency": concurrency,
                            "terminationGracePeriodSeconds": 30}},
    })


def worker_env(redis_url: str, handler: str) -> list[str]:
    return ["-e", f"TASKQUEUE_MANIFEST={manifest(redis_url, handler=handler)}",
            "-e", f"TASKQUEUE_WORKER_ID={WORKER_ID}"]


def wait_for(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def test_runs_as_uid_10001_on_a_read_only_root(containers: Engine) -> None:
    image = containers.worker_image
    user = containers.run("image", "inspect", "--format", "{{.Config.User}}", image).stdout
    assert user.strip() == "10001:10001"
    proc = containers.run("run", "--rm", *containers.read_only, "--cap-drop", "ALL",
                          "--network", "none",
                          "--entrypoint", "sh", image, "-c",
                          "id -u; id -g; touch /app/x 2>/dev/null && echo writable || echo ro")
    assert proc.stdout.split() == ["10001", "10001", "ro"]


def test_consumes_from_redis_and_drains_on_stop(containers: Engine, redis_url: str,
                                                redis_sync: redis.Redis) -> None:
    redis_sync.lpush("img:q", "3")
    name = containers.start(containers.worker_image,
                            run_args=worker_env(redis_url, "taskqueue.worker.builtin:sleep"))
    processing = f"img:q:processing:{WORKER_ID}"
    wait_for(lambda: redis_sync.llen(processing) == 1, "the worker to take the 3 s task")
    redis_sync.lpush("img:q", *["9"] * 3)  # must not be started once SIGTERM arrived
    started = time.monotonic()
    containers.run("stop", "-t", "30", name, timeout=60)
    took = time.monotonic() - started
    assert containers.exit_code(name) == 0, containers.logs(name)
    assert 0.5 < took < 9, f"stop took {took:.1f}s: the task in hand was not drained on SIGTERM"
    assert redis_sync.llen(processing) == 0, "the processing list was not emptied"
    assert redis_sync.hget("img:q:stats", "completed") == "1", "the task in hand did not finish"
    assert redis_sync.lrange("img:q", 0, -1) == ["9", "9", "9"], "queued tasks were touched"
    assert redis_sync.zcard("img:q:workers") == 0, "the worker did not deregister"


def test_bad_handler_exits_2_with_a_clear_error(containers: Engine, redis_url: str) -> None:
    name = containers.start(containers.worker_image,
                            run_args=worker_env(redis_url, "nosuchpkg.tasks:handle"))
    assert containers.exit_code(name) == 2
    assert "nosuchpkg" in containers.logs(name)


def test_a_handler_package_layered_from_the_worker_image(containers: Engine, tmp_path: Path,
                                                         redis_url: str,
                                                         redis_sync: redis.Redis) -> None:
    app = tmp_path / "myapp"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "tasks.py").write_text(
        "import os\n\n"
        "def handle(payload: str) -> None:\n"
        "    print(f'handled {payload} as uid {os.getuid()}', flush=True)\n"
    )
    (tmp_path / "Dockerfile").write_text(
        f"FROM {containers.worker_image}\nCOPY myapp/ /app/myapp/\n")
    tag = "localhost/taskqueue-image-test-handler:latest"
    containers.run("build", "-q", "-t", tag, str(tmp_path), timeout=600)
    redis_sync.lpush("img:q", "hello-image")
    name = containers.start(tag, run_args=worker_env(redis_url, "myapp.tasks:handle"))
    wait_for(lambda: "handled hello-image as uid 10001" in containers.logs(name),
             "the layered handler to run")
    containers.run("stop", "-t", "30", name, timeout=60)
    assert containers.exit_code(name) == 0
    containers.run("rmi", "-f", tag, check=False)
