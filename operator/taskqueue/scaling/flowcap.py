"""The most replicas the queues' flow limits can use: the policy's cap. Pure.

A queue that is paused can use no slot; one with `maxInFlight` at most that many; one with a
rate limit about rate x service time slots, plus headroom (a slot that waits for the limit's
next start, or a task that runs long, must not make the fleet fall behind the limit: on
exponential service times a fleet of exactly rate x service time slots starts 2-3.5 % fewer
tasks than the limit allows, one 5-10 % larger all but 0.2-0.7 % of them, in the simulator).
A queue without a limit can use any number of slots while it has work (queued, or arrivals
measured), so then there is no cap; without work it needs none. The fleet's cap is the slots
of all its queues over the worker concurrency, in whole pods.

The headroom is a band, not a point: the fleet asks for HEADROOM (rounded up to whole pods)
when it is outside the band, and a fleet already between MIN_HEADROOM and that stays as it
is. So the rounding to whole pods does not add a pod on top of the headroom each time the
measured service time moves by a few percent (a steady stream of exponential tasks measures
its mean within about +-6 %), which would scale the fleet up and down around a boundary.

The service time a rate-limited queue is sized with (`service_times`) is the workers' reports
of that queue, else its `expectedServiceSeconds`, else the lower bound the slots give (held
task-seconds over the tasks started: the tasks in hand have run at least that), so the cap
grows as they prove long and never past the need. The fleet-wide estimate from the slots
alone (held task-seconds over tasks ended, what the other rules use before the reports) is
not used here: the slots are sampled at the polls, and right after the first pods came up
mid-interval it can be twice the truth, which would scale a capped fleet up for nothing
until the stabilisation window let it down. While no task of a rate-limited queue with work
has run and none is expected, the cap holds the fleet where it is, one pod to start with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from taskqueue.scaling.service import ServiceTimes
from taskqueue.wire.flow import QueueFlow

HEADROOM = 0.1
"""Slots a rate-limited queue is given beyond rate x service time, as a share of it."""
MIN_HEADROOM = 0.05
"""The least headroom a fleet keeps before the cap asks for HEADROOM again."""

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


@dataclass(frozen=True)
class _Slots:
    fixed: float
    """Slots without headroom (maxInFlight, a pause)."""
    rated: float
    """rate x service time slots (given the headroom)."""
    rule: str
    why: str


def _queue_slots(q: QueueFlow, service: float | None) -> _Slots | None:
    if q.is_paused:
        return _Slots(0.0, 0.0, PAUSED_QUEUE, f"{q.key} is paused")
    options: list[_Slots] = []
    if q.max_in_flight is not None:
        options.append(_Slots(float(q.max_in_flight), 0.0, IN_FLIGHT_CAP,
                              f"maxInFlight of {q.key}: {q.max_in_flight} slots"))
    rate = q.per_second
    if rate is not None and service is not None and service > 0:
        slots = rate * service
        options.append(_Slots(0.0, slots, RATE_LIMIT_CAP,
                              f"rateLimit of {q.key}: {rate:.3g}/s x {service:.3g} s = "
                              f"{slots:.3g} slots (+{MIN_HEADROOM:.0%}-{HEADROOM:.0%})"))
    return min(options, key=lambda o: o.fixed + o.rated * (1 + HEADROOM)) if options else None


def service_times(service: ServiceTimes, expected: Mapping[str, float],
                  queues: Sequence[str]) -> dict[str, float]:
    """The service time the cap sizes each of `queues` with (see the module's docstring);
    a queue with none known is left out."""
    bound = service.lower_bound
    known = {q: service.measured(q) or expected.get(q) or bound for q in queues}
    return {q: s for q, s in known.items() if s}


def cap(flows: Sequence[QueueFlow], *, busy: Mapping[str, bool],
        service: Mapping[str, float], concurrency: int, current: int = 0) -> Cap | None:
    """The fleet's cap, or None when a queue with work has no bound. `busy`: whether each
    queue has work (queued or arriving); `service`: the service time of each queue known;
    `current`: the replicas now (kept while their headroom is within the band)."""
    fixed = rated = 0.0
    first, words, waiting = None, [], []
    for q in flows:
        bound = _queue_slots(q, service.get(q.key))
        if bound is None:
            if not busy.get(q.key, False):
                continue
            if q.rate is None:
                return None
            waiting.append(q.key)  # rate-limited, service time not known yet
            continue
        fixed, rated = fixed + bound.fixed, rated + bound.rated
        if busy.get(q.key, False) or q.is_paused:
            first = first or bound.rule
            words.append(bound.why)
    per_pod = max(concurrency, 1)
    if waiting:
        kept = max(current, 1)
        return Cap(kept, RATE_LIMIT_CAP,
                   f"capped by rateLimit of {', '.join(waiting)}: service time not measured "
                   f"yet, holding {kept}")
    if first is None:
        return None
    least = math.ceil((fixed + rated * (1 + MIN_HEADROOM)) / per_pod - 1e-9)
    asked = math.ceil((fixed + rated * (1 + HEADROOM)) / per_pod - 1e-9)
    replicas = current if least <= current <= asked else asked
    note = (f" (held: {current} pods keep {MIN_HEADROOM:.0%}-{HEADROOM:.0%} headroom)"
            if replicas == current != asked else "")
    return Cap(replicas, first,
               f"capped by {'; '.join(words)} / concurrency {concurrency} = {replicas}{note}")
