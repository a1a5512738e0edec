"""Fixtures of the topology tests: in-process workers on any DSN (standalone, cluster,
sentinel), recording what they ran through `tests.redis.topologies.handlers`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from taskqueue.api import manifest
from taskqueue.worker import config as cfg
from taskqueue.worker.runner import Worker
from tests.helpers.worker import in_process, stop_all
from tests.redis.topologies import handlers as topo_handlers
from tests.redis.topologies.manifests import StartWorker, taskqueue


@pytest.fixture
def start_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[StartWorker]:
    """start_worker(url, worker_id='w1', record_url=None, **spec): an in-process worker,
    stopped after; its handler records to `record_url` (default: `url`)."""
    started: list[Worker] = []

    def start(url: str, *, worker_id: str = "w1", record_url: str | None = None,
              **spec: Any) -> Worker:
        monkeypatch.setenv(topo_handlers.URL_ENV, record_url or url)
        worker_spec = {"handler": "tests.redis.topologies.handlers:record",
                       "heartbeatSeconds": 0.5, **spec.pop("worker", {})}
        tq = manifest.parse(taskqueue(url, worker=worker_spec, **spec))
        config = dataclasses.replace(cfg.from_spec(tq.spec, redis_url=url, worker_id=worker_id),
                                     sweep_seconds=0.2)
        worker = in_process(config)
        worker.start()
        started.append(worker)
        return worker

    yield start
    stop_all(started)
