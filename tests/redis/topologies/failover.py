"""Producing through a failover: what a well-behaved producer does while Sentinel or the
cluster replaces a master (retry until the new master takes the push)."""

from __future__ import annotations

import time

import redis

from taskqueue import client
from taskqueue.redisio import clients


def push_while_failing_over(r: clients.SyncClient, prefix: str, n: int, *,
                            timeout: float = 30) -> None:
    """Enqueue `prefix0..prefix{n-1}` to `{emails}:vip`, retrying while the master is being
    replaced (the client asks Sentinel again on each try)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.enqueue_many_sync(r, "{emails}:vip", [f"{prefix}{i}" for i in range(n)])
            return
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
