"""Helpers of the worker tests: a TaskQueue spec and worker config on the test's Redis, and the
tasks the test handlers recorded as done."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import redis

from taskqueue.api import manifest, models
from taskqueue.controller import workload
from taskqueue.worker import config as cfg
from taskqueue.worker import handlers
from taskqueue.worker.dispatch import Dispatcher
from taskqueue.worker.runner import Worker
from taskqueue.worker.state import WorkerState
from taskqueue.worker.wakeup import Wakeup
from tests.helpers import handlers as test_handlers
from tests.helpers.wait import wait_for

MakeWorker = Callable[..., Worker]


def spec_dict(redis_url: str, **spec: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"redis": {"url": redis_url}, "queues": [{"key": "q"}]}
    data.update(spec)
    return {"kind": "TaskQueue", "spec": data}


def make_config(redis_url: str, *, worker_id: str = "w1", sweep: float = 1.0,
                **spec: Any) -> cfg.WorkerConfig:
    tq = manifest.parse(spec_dict(redis_url, **spec))
    config = cfg.from_spec(tq.spec, worker_id=worker_id)
    return dataclasses.replace(config, sweep_seconds=sweep)


def unstarted_dispatcher(redis_url: str, *, slots: int) -> Dispatcher:
    """A real `Dispatcher` for queue "q" of worker "w1" with `slots` slots, its thread not
    started: only the slots' own posts (`finished`) fetch. `close()` it at the end."""
    config = make_config(redis_url, worker={"concurrency": slots})
    wakeup = Wakeup(url=config.redis_url, queue_keys=config.schema.wakeup_keys)
    return Dispatcher(config=config, state=WorkerState(), wakeup=wakeup, held=True)


def in_process(config: cfg.WorkerConfig) -> Worker:
    """An in-process worker for `config`, its handler loaded as the worker process loads it."""
    return Worker(config, handler=handlers.load(
        handler=config.handler, command=config.command, timeout=config.task_timeout))


def stop_all(workers: list[Worker], *, grace: float = 5) -> None:
    """Stop every worker at once, then drain each one not yet stopped."""
    for worker in workers:
        worker.stop()
    for worker in workers:
        if not worker.stopped.is_set():
            worker.join(grace=grace)


def done(r: redis.Redis) -> list[str]:
    return list(r.lrange(test_handlers.DONE, 0, -1))


def wait_done(r: redis.Redis, n: int, *, timeout: float = 30.0) -> list[str]:
    wait_for(f"{n} tasks done", lambda: r.llen(test_handlers.DONE) >= n, timeout=timeout)
    return done(r)


def pod_env(tq: models.TaskQueue) -> dict[str, str]:
    """The literal env values (not the Secret and field references) the operator gives a worker
    pod of `tq`: TASKQUEUE_MANIFEST, TASKQUEUE_WORKER_SETTINGS, ..."""
    container = workload.build_deployment(tq, uid="u", replicas=1)[
        "spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}
