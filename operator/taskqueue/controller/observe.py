"""Observe: read one TaskQueue's queues from Redis in one round trip (`queueops.observe`).

A Redis that cannot be read is not an exception here: the result says so, with a password-free
error, and the poll goes on (the policy holds, the status says RedisReachable=False).
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from taskqueue.api import models, redact
from taskqueue.api.models import ScalingSpec
from taskqueue.redisio import queueops
from taskqueue.scaling import policy
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import keys

OBSERVE_TIMEOUT_FLOOR_SECONDS = 5.0
"""The shortest time a Redis read may take before it counts as failed. The timeout is the poll
interval, but not below this: with many TaskQueues polled every 2 s, a busy event loop can
take longer than one interval to run a read that Redis answered in microseconds, and calling
that "unreachable" writes a condition, an Event and a status each time (measured: 500
TaskQueues at 2 s on a loaded 2-vCPU machine)."""


def timeout(scaling: ScalingSpec) -> float:
    """Seconds one observation may take: the poll interval, at least the floor."""
    return max(scaling.pollIntervalSeconds, OBSERVE_TIMEOUT_FLOOR_SECONDS)


async def observe(client: aioredis.Redis, url: str,
                  tq: models.TaskQueue) -> tuple[QueueObservation | None, str | None]:
    """The observation, or None and the error (password-free) when Redis cannot be read."""
    try:
        observation = await asyncio.wait_for(
            queueops.observe(client, keys.KeySchema.from_spec(tq.spec),
                             due_within=policy.due_horizon(tq.spec.scaling)),
            timeout=timeout(tq.spec.scaling),
        )
    except (aioredis.RedisError, OSError, TimeoutError) as e:
        return None, f"{redact.url(url)}: {type(e).__name__}: {redact.scrub(str(e))}"
    return observation, None
