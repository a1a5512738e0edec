"""Log settings of `taskqueue-worker` from the environment (how worker pods set them)."""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Iterator

import pytest
import redis

from taskqueue.worker import command, logs
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import spawn


@pytest.fixture
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("_restore_logging")
@pytest.mark.parametrize(
    ("env", "argv", "json_lines", "level"),
    [
        pytest.param({}, [], False, logging.INFO, id="defaults"),
        pytest.param({"TASKQUEUE_LOG_JSON": "1", "TASKQUEUE_LOG_LEVEL": "debug"}, [], True,
                     logging.DEBUG, id="env"),
        pytest.param({"TASKQUEUE_LOG_JSON": "true"}, [], True, logging.INFO, id="env-true"),
        pytest.param({"TASKQUEUE_LOG_JSON": "0"}, [], False, logging.INFO, id="env-off"),
        pytest.param({"TASKQUEUE_LOG_JSON": "1", "TASKQUEUE_LOG_LEVEL": "debug"},
                     ["--no-log-json", "--log-level", "WARNING"], False, logging.WARNING,
                     id="flags-override-env"),
    ],
)
def test_log_format_and_level_from_env_or_flags(
        monkeypatch: pytest.MonkeyPatch, redis_url: str, env: dict[str, str], argv: list[str],
        json_lines: bool, level: int) -> None:
    for name in ("TASKQUEUE_LOG_JSON", "TASKQUEUE_LOG_LEVEL", "TASKQUEUE_MANIFEST",
                 "TASKQUEUE_WORKER_SETTINGS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    _, _, got_json = command.build(["--queue", "q", "--redis-url", redis_url,
                                 "--handler", "taskqueue.worker.builtin:noop", *argv])

    root = logging.getLogger()
    assert got_json is json_lines
    assert isinstance(root.handlers[0].formatter, logs.JsonFormatter) is json_lines
    assert root.level == level


def test_worker_process_logs_json_with_the_env_alone(
        monkeypatch: pytest.MonkeyPatch, redis_url: str, redis_sync: redis.Redis) -> None:
    monkeypatch.setenv("TASKQUEUE_LOG_JSON", "1")
    proc = spawn(redis_url, "--queue", "q", "--handler", "taskqueue.worker.builtin:noop",
                 "--worker-id", "j1")
    try:
        wait_for("worker j1 registered",
                 lambda: redis_sync.zscore("q:workers", "j1") is not None, timeout=15)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0
    lines = [json.loads(line) for line in err.decode().splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(x) for x in lines)
    assert any("j1" in x["message"] for x in lines)
