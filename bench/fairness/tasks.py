"""Handlers of the fairness and scheduling benchmarks (imported by the worker processes)."""

from __future__ import annotations

import os
import time

import redis

from taskqueue.worker.handlers import TaskContext

LOG = "bench:fair:log"
_client: list[redis.Redis] = []


def _r() -> redis.Redis:
    if not _client:
        _client.append(redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]))
    return _client[0]


def work(payload: str) -> None:
    """Record "<pid> <pickup time>", then hold the slot for float(payload) seconds."""
    _r().rpush(LOG, f"{os.getpid()} {time.time():.6f}")
    time.sleep(float(payload))


def due(payload: str, ctx: TaskContext) -> None:
    """A scheduled task: payload is its due time (unix seconds); record the lateness."""
    _r().rpush(LOG, f"{time.time() - float(payload):.6f}")
