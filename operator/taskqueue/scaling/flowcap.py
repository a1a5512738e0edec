"""The most replicas the queues' flow limits can use: the policy's cap. Pure.

A queue that is paused can use no slot; one with `maxInFlight` at most that many; one with a
rate limit about rate x service time slots (plus HEADROOM: a slot that waits for the limit's
next start, or a task that runs long, must not make the fleet fall behind the limit). A queue
without a limit can use any number of slots while it has work (queued, or arrivals measured),
so then there is no cap; without work it needs none. The fleet's cap is the slots of all its
queues over the worker concurrency, rounded up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from taskqueue.wire.flow import QueueFlow

HEADROOM = 0.1
"""Slots a rate-limited queue gets beyond rate x service time, as a share of it."""

RATE_LIMIT_CAP = "rate-limit-cap"
IN_FLIGHT_CAP = "in-flight-cap"
PAUSED_QUEUE = "paused-queue"


@dataclass(frozen=True)
class Cap:
    replicas: int
    rule: str
    """RATE_LIMIT_CAP, IN_FLIGHT_CAP or PAUSED_QUEUE: the limit of the first queue that
    bounds the fleet."""
    why: str


def queue_slots(q: QueueFlow, service: float | None) -> tuple[float, str, str] | None:
    """The slots queue `q` can use, the rule and the words; None when its limits do not bound
    it (no limit, or a rate limit whose service time is not known yet)."""
    if q.is_paused:
        return 0.0, PAUSED_QUEUE, f"{q.key} is paused"
    options: list[tuple[float, str, str]] = []
    if q.max_in_flight is not None:
        options.append((float(q.max_in_flight), IN_FLIGHT_CAP,
                        f"maxInFlight of {q.key}: {q.max_in_flight} slots"))
    rate = q.per_second
    if rate is not None and service is not None and service > 0:
        slots = rate * service
        options.append((slots * (1 + HEADROOM), RATE_LIMIT_CAP,
                        f"rateLimit of {q.key}: {rate:.3g}/s x {service:.3g} s = {slots:.3g} "
                        f"slots (+{HEADROOM:.0%})"))
    return min(options, key=lambda o: o[0]) if options else None


def cap(flows: Sequence[QueueFlow], *, busy: Mapping[str, bool],
        service: Mapping[str, float], concurrency: int) -> Cap | None:
    """The fleet's cap, or None when a queue with work has no bound. `busy`: whether each
    queue has work (queued or arriving); `service`: the service time of each queue known."""
    total, first, words = 0.0, None, []
    for q in flows:
        bound = queue_slots(q, service.get(q.key))
        if bound is None:
            if busy.get(q.key, False):
                return None
            continue
        slots, rule, why = bound
        total += slots
        if busy.get(q.key, False) or q.is_paused:
            first = first or rule
            words.append(why)
    if first is None:
        return None
    replicas = math.ceil(total / max(concurrency, 1) - 1e-9)
    return Cap(replicas, first,
               f"capped by {'; '.join(words)} / concurrency {concurrency} = {replicas}")
