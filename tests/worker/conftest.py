"""Fixtures of the worker tests: in-process workers with test handlers, and their config."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from taskqueue import manifest
from taskqueue.worker import config as cfg
from taskqueue.worker import handlers
from taskqueue.worker.runner import Worker
from tests.worker import handlers as test_handlers

MakeWorker = Callable[..., Worker]


def spec_dict(redis_url: str, **spec: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"redis": {"url": redis_url}, "queues": [{"key": "q"}]}
    data.update(spec)
    return {"kind": "TaskQueue", "spec": data}


def make_config(redis_url: str, *, worker_id: str = "w1", sweep: float = 1.0,
                **spec: Any) -> cfg.WorkerConfig:
    tq = manifest.parse(spec_dict(redis_url, **spec))
    config = cfg.from_spec(tq.spec, worker_id=worker_id)
    import dataclasses
    return dataclasses.replace(config, sweep_seconds=sweep)


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


def wait_for(predicate: Callable[[], Any], *, timeout: float = 10.0,
             interval: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def done(r: redis.Redis) -> list[str]:
    return list(r.lrange(test_handlers.DONE, 0, -1))


def wait_done(r: redis.Redis, n: int, *, timeout: float = 10.0) -> list[str]:
    wait_for(lambda: r.llen(test_handlers.DONE) >= n, timeout=timeout)
    return done(r)
