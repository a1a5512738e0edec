"""Observe: read one TaskQueue's queues from Redis in one round trip, with the history appends of
the previous poll and the read of the flow hashes in the same round trip
(`queueops.observe_polling`): a poll whose flow control is unchanged makes no other call.

A Redis that cannot be read is not an exception here: the result says so, with a password-free
error, and the poll goes on (the policy holds, the status says RedisReachable=False). An append
Redis refuses does not fail the read either: the result names it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from taskqueue.api import models, redact
from taskqueue.api.models import ScalingSpec
from taskqueue.redisio import flowops, queueops
from taskqueue.scaling import policy
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import history, keys

OBSERVE_TIMEOUT_FLOOR_SECONDS = 5.0
"""The shortest time a Redis read may take before it counts as failed. The timeout is the poll
interval, but not below this: with many TaskQueues polled every 2 s, a busy event loop can
take longer than one interval to run a read that Redis answered in microseconds, and calling
that "unreachable" writes a condition, an Event and a status each time (measured: 500
TaskQueues at 2 s on a loaded 2-vCPU machine)."""


@dataclass(frozen=True)
class Observed:
    """What one read of a TaskQueue's Redis gave."""

    observation: QueueObservation | None
    """None when Redis could not be read."""
    error: str | None = None
    """Why not (password-free)."""
    sent: bool = False
    """The appends reached Redis (the round trip succeeded; each is written or in `refused`)."""
    refused: tuple[str, ...] = ()
    """The refusals of appends Redis did not write (password-free), one per distinct error."""
    flow: tuple[dict[str, str], dict[str, str]] | None = None
    """The flow hashes (control, state) as read (None: not read, see `flow_error`)."""
    flow_error: str | None = None
    """Why the flow hashes could not be read although the rest was (a key of another type, an
    ACL refusal; password-free)."""


def timeout(scaling: ScalingSpec) -> float:
    """Seconds one observation may take: the poll interval, at least the floor."""
    return max(scaling.pollIntervalSeconds, OBSERVE_TIMEOUT_FLOOR_SECONDS)


async def observe(client: aioredis.Redis, url: str, tq: models.TaskQueue, schema: keys.KeySchema,
                  *, appends: Sequence[history.Append] = ()) -> Observed:
    """The observation of `tq` (keys `schema`) at `url`, `appends` written on the way."""
    try:
        observation, refused, flow_replies = await asyncio.wait_for(
            queueops.observe_polling(client, schema,
                                     due_within=policy.due_horizon(tq.spec.scaling),
                                     appends=appends),
            timeout=timeout(tq.spec.scaling),
        )
    except (aioredis.RedisError, OSError, TimeoutError) as e:
        return Observed(None, f"{redact.url(url)}: {type(e).__name__}: {redact.scrub(str(e))}")
    errors = dict.fromkeys(f"{type(e).__name__}: {redact.scrub(str(e))}"
                           for e in refused if e is not None)
    flow, flow_error = None, None
    try:
        flow = flowops.hashes(flow_replies or [], schema)
    except (aioredis.RedisError, ValueError) as e:
        flow_error = f"{type(e).__name__}: {redact.scrub(str(e))}"
    return Observed(observation, sent=True, refused=tuple(errors), flow=flow,
                    flow_error=flow_error)
