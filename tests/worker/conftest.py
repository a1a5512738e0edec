"""Fixtures of the worker tests: in-process workers with test handlers, and their config."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from taskqueue.worker import handlers
from taskqueue.worker.runner import Worker
from tests.helpers.worker import MakeWorker, make_config
from tests.worker import handlers as test_handlers


@pytest.fixture(autouse=True)
def _test_handler_env(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(test_handlers.URL_ENV, redis_url)


@pytest.fixture
def make_worker(redis_url: str) -> Iterator[MakeWorker]:
    """Start in-process workers: make_worker(handler='mod:fn', worker_id='w1', **spec)."""
    started: list[Worker] = []

    def make(*, handler: str = "tests.worker.handlers:record", worker_id: str = "w1",
             start: bool = True, sweep: float = 1.0, **spec: Any) -> Worker:
        worker_spec = {"handler": handler, **spec.pop("worker", {})}
        config = make_config(redis_url, worker_id=worker_id, sweep=sweep, worker=worker_spec,
                             **spec)
        worker = Worker(config, handler=handlers.load(
            handler=config.handler, command=config.command, timeout=config.task_timeout))
        if start:
            worker.start()
        started.append(worker)
        return worker

    yield make
    for worker in started:
        worker.stop()
    for worker in started:
        if not worker.stopped.is_set():
            worker.join(grace=5)
