"""Observe: read one TaskQueue's queues from Redis in one round trip (`queueops.observe`).

A Redis that cannot be read is not an exception here: the result says so, with a password-free
error, and the poll goes on (the policy holds, the status says RedisReachable=False).
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from taskqueue import keys, models, queueops, redact
from taskqueue.observation import QueueObservation


async def observe(client: aioredis.Redis, url: str,
                  tq: models.TaskQueue) -> tuple[QueueObservation | None, str | None]:
    """The observation, or None and the error (password-free) when Redis cannot be read."""
    try:
        observation = await asyncio.wait_for(
            queueops.observe(client, keys.KeySchema.from_spec(tq.spec)),
            timeout=tq.spec.scaling.pollIntervalSeconds,
        )
    except (aioredis.RedisError, OSError, TimeoutError) as e:
        return None, f"{redact.url(url)}: {type(e).__name__}: {redact.scrub(str(e))}"
    return observation, None
