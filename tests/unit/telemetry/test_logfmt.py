"""One log schema for both processes (`taskqueue.telemetry.logfmt`)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from taskqueue.controller import main as operator_main
from taskqueue.telemetry import logfmt
from taskqueue.worker import logs

T0 = 1_767_225_600.25  # 2026-01-01T00:00:00.250Z


def record(msg: str = "hello %s", args: tuple[Any, ...] = ("world",), exc: bool = False,
           **extra: Any) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            info = sys.exc_info()
    r = logging.LogRecord("taskqueue.x", logging.WARNING, __file__, 1, msg, args, info)
    r.created = T0
    r.__dict__.update(extra)
    return r


@pytest.mark.parametrize(
    ("made", "expected"),
    [
        pytest.param(record(), {}, id="plain"),
        pytest.param(record(task_id="t1", queue="q", attempt=2, worker_id="w", error="E: x"),
                     {"task_id": "t1", "queue": "q", "attempt": 2, "worker_id": "w",
                      "error": "E: x"}, id="task-fields"),
        pytest.param(record(k8s_ref={"name": "tq", "namespace": "ns"}),
                     {"object": {"name": "tq", "namespace": "ns"}}, id="kopf-object"),
        pytest.param(record(unrelated="x"), {}, id="other-extra-left-out"),
    ],
)
def test_json_line(made: logging.LogRecord, expected: dict[str, Any]) -> None:
    line = json.loads(logfmt.JsonFormatter().format(made))
    assert line == {"time": "2026-01-01T00:00:00.250Z", "level": "WARNING",
                    "logger": "taskqueue.x", "message": "hello world", **expected}


def test_an_exception_goes_in_exc() -> None:
    line = json.loads(logfmt.JsonFormatter().format(record(exc=True)))
    assert "ValueError: boom" in line["exc"] and line["message"] == "hello world"


@pytest.fixture
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("_restore_logging")
@pytest.mark.parametrize(
    "setup",
    [
        pytest.param(lambda: logs.setup(json_lines=True), id="worker"),
        pytest.param(lambda: operator_main.setup_logging("json", "INFO"), id="operator"),
    ],
)
def test_both_processes_use_the_one_formatter(setup: Callable[[], None]) -> None:
    setup()
    (handler,) = logging.getLogger().handlers
    assert type(handler.formatter) is logfmt.JsonFormatter
