"""Arrival rate per queue and service time per task, measured from successive observations. Pure.

Between two polls, the tasks that entered queue q are the change of its length plus the tasks
workers took from it (`QueueObservation.taken`, the per-queue counters fetch.lua keeps); without
those counters (older workers, AtMostOnce blocking pops) the arrivals of all queues are the change
of queued + in flight plus the completions, counted against the first queue (the conservative
side for the priority model). The service time is Little's law on the slots: in-flight
task-seconds divided by completions. Both are sums that decay with `MEMORY_SECONDS`, so a rate
follows a change in about that time and a quiet period does not divide by zero; the service-time
sums only decay while there is work (an idle spell keeps the last estimate for the next burst).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from taskqueue.observation import QueueObservation

MEMORY_SECONDS = 60.0
"""Time constant of the exponential forgetting of the sums."""
SHORT_MEMORY_SECONDS = 10.0
"""A second arrival sum forgets this fast; the rate used is the lower of the two, so a fleet
shrinks within seconds when arrivals stop, while a rise is met by the backlog (the queueing
model's burst term) and then by the long average."""
MIN_COMPLETIONS = 3.0
"""Completions (decayed) needed before the service time is trusted."""


@dataclass(frozen=True)
class Rates:
    """Decayed sums since the first observation; `at` is the time of the last one."""

    at: float | None = None
    elapsed: float = 0.0
    arrivals: tuple[tuple[str, float], ...] = ()
    elapsed_short: float = 0.0
    arrivals_short: tuple[tuple[str, float], ...] = ()
    busy_seconds: float = 0.0
    """Slot-seconds holding a task (in-flight x time)."""
    completions: float = 0.0
    backlog: tuple[tuple[str, int], ...] = ()
    taken: tuple[tuple[str, int], ...] = ()
    in_flight: int = 0
    completed: int = 0

    def arrival_rate(self, queue: str) -> float:
        """Tasks/s into `queue`: the lower of the long and the short average."""
        if self.elapsed <= 0 or self.elapsed_short <= 0:
            return 0.0
        long = dict(self.arrivals).get(queue, 0.0) / self.elapsed
        return min(long, dict(self.arrivals_short).get(queue, 0.0) / self.elapsed_short)

    @property
    def service_seconds(self) -> float | None:
        if self.completions < MIN_COMPLETIONS or self.busy_seconds <= 0:
            return None
        return self.busy_seconds / self.completions


def update(rates: Rates, obs: QueueObservation) -> Rates:
    """`rates` after `obs` (the first observation only records the counters)."""
    counters = replace(
        rates, at=obs.at, backlog=tuple(obs.backlog.items()), taken=tuple(obs.taken.items()),
        in_flight=obs.in_flight, completed=obs.completed_total,
    )
    if rates.at is None or obs.at <= rates.at:
        return counters
    dt = obs.at - rates.at
    keep = math.exp(-dt / MEMORY_SECONDS)
    done = obs.completed_total - rates.completed
    if done < 0:  # the stats hash was reset: start the sums again
        return replace(counters, elapsed=0.0, arrivals=(), elapsed_short=0.0,
                       arrivals_short=(), busy_seconds=0.0, completions=0.0)
    entered = _arrivals(rates, obs, done)
    # an idle fleet tells nothing about the service time: keep it until work comes back
    held = keep if done or rates.in_flight or obs.in_flight else 1.0
    keep_short = math.exp(-dt / SHORT_MEMORY_SECONDS)
    old, old_short = dict(rates.arrivals), dict(rates.arrivals_short)
    return replace(
        counters,
        elapsed=rates.elapsed * keep + dt,
        arrivals=tuple((q, old.get(q, 0.0) * keep + n) for q, n in entered.items()),
        elapsed_short=rates.elapsed_short * keep_short + dt,
        arrivals_short=tuple((q, old_short.get(q, 0.0) * keep_short + n)
                             for q, n in entered.items()),
        busy_seconds=rates.busy_seconds * held + dt * (rates.in_flight + obs.in_flight) / 2,
        completions=rates.completions * held + done,
    )


def _arrivals(rates: Rates, obs: QueueObservation, done: int) -> dict[str, float]:
    before, taken_before = dict(rates.backlog), dict(rates.taken)
    queues = list(obs.backlog)
    if queues and all(q in obs.taken and q in taken_before for q in queues):
        return {q: max(0.0, float(obs.backlog[q] - before.get(q, 0)
                                  + obs.taken[q] - taken_before[q])) for q in queues}
    total = obs.queued - sum(before.values()) + obs.in_flight - rates.in_flight + done
    entered = dict.fromkeys(queues, 0.0)
    if queues:
        entered[queues[0]] = max(0.0, float(total))
    return entered
