"""Dramatiq actor of the benchmark (redis broker from $BENCH_REDIS_URL)."""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

dramatiq.set_broker(RedisBroker(url=os.environ["BENCH_REDIS_URL"]))


@dramatiq.actor(queue_name="bq_dramatiq", max_retries=0)
def noop() -> None:
    """Nothing."""
