"""Task functions of the worker benchmark (imported by every framework's worker process)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import redis

if TYPE_CHECKING:
    from taskqueue.worker.handlers import TaskContext

_r: list[redis.Redis] = []


def noop(*_: Any, **__: Any) -> None:
    """The benchmarked task: nothing."""


async def anoop(*_: Any, **__: Any) -> None:
    """The benchmarked task as a coroutine (run on the worker's event loop): nothing."""


def latency(payload: str, ctx: TaskContext) -> None:
    """Pickup latency sample: now - envelope enqueue time, pushed to lat:<queue>."""
    picked = time.time() - (ctx.enqueued_at or time.time())
    if not _r:
        _r.append(redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]))
    _r[0].rpush(f"lat:{ctx.queue}", f"{picked:.6f}")
