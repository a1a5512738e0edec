"""The benchmark's task handler: records when each task started (unix seconds) in Redis."""

from __future__ import annotations

import os
import time

import redis

STARTS = "bench:starts"
_client: list[redis.Redis] = []


def start(payload: str) -> None:
    if not _client:
        _client.append(redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]))
    _client[0].rpush(STARTS, f"{time.time():.6f}")
