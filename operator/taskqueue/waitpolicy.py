"""targetWaitSeconds: the wait model's inputs from the spec, the measured rates and one
observation (`taskqueue.waitmodel` does the queueing maths, `taskqueue.rates` the measuring).
Pure; called by `taskqueue.policy`."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from taskqueue import waitmodel
from taskqueue.models import ScalingSpec
from taskqueue.observation import QueueObservation
from taskqueue.rates import Rates

# PROTOTYPE, not landed (docs/benchmarks.md, issue 11, "spending the 5 % over time"): the late
# share of each queue with a wait target is kept over a window (modelled tail at the slots held,
# at least the share the oldest task's age past the target shows); the steady sizing may plan
# for a late share of up to MAX_ALLOWED while the window's share stays under 1 - QUANTILE.
BUDGET_SECONDS = 600.0
BUDGET_HORIZON = 60.0
MAX_ALLOWED = 2 * (1 - waitmodel.QUANTILE)
MIN_ALLOWED = (1 - waitmodel.QUANTILE) / 2


@dataclass(frozen=True)
class Budget:
    at: float | None = None
    sums: tuple[tuple[str, float, float], ...] = ()


def sizing(spec: ScalingSpec, rates: Rates, obs: QueueObservation,
           queue_order: tuple[str, ...], budget: Budget | None = None,
           slots_held: int = 0) -> waitmodel.WaitSizing | None:
    """Slots for the wait targets; None without targets or until a service time is known
    (measured, or expected: `expectedServiceSeconds`)."""
    targets = spec.targetWaitSeconds
    known = service_times(rates, spec.expectedServiceSeconds or {}, queue_order)
    if not targets or known is None:
        return None
    service, services = known
    loads = [
        waitmodel.QueueLoad(key=q, arrival_rate=rates.arrival_rate(q),
                            queued=obs.backlog.get(q, 0), target_wait=targets.get(q),
                            service=services.get(q), oldest_age=obs.oldest_age(q) or 0.0,
                            cv2=rates.service_cv2(q))
        for q in queue_order
    ]
    if budget is not None:
        loads = [replace(q, allowed=_allowed(budget, q)) for q in loads]
    return waitmodel.size_for_wait(loads, service=service, horizon=burst_horizon(spec),
                                   startup=spec.podStartupSeconds)


def service_times(rates: Rates, expected: dict[str, float], queue_order: tuple[str, ...],
                  ) -> tuple[float, dict[str, float]] | None:
    """The fleet-wide mean service time and each queue's, or None while nothing is known.

    A queue's expected time (`expectedServiceSeconds`) stands until the workers have reported
    that queue's own (or, from workers that report none, until MIN_COMPLETIONS tasks have
    completed: the estimate then takes over). Until the fleet's mean is measured, it is the
    higher of the expected times' mean and the lower bound the tasks in hand give, and the
    queues without an expected time have that."""
    measured = rates.service_known
    fleet = rates.service_seconds
    if not measured and expected:
        prior = sum(expected.values()) / len(expected)
        fleet = prior if fleet is None else max(fleet, prior)
    if fleet is None:
        return None
    estimated = (rates.service_by_queue(list(queue_order)) or {}) if measured else {}
    hinted = not (measured and not rates.reports_service)
    own = {q: rates.measured_service(q) for q in queue_order}
    return fleet, {
        q: own[q] or (expected[q] if hinted and q in expected else estimated.get(q, fleet))
        for q in queue_order
    }


def burst_horizon(spec: ScalingSpec) -> float:
    """The least work each pod added for a burst gets: podStartupSeconds (a pod with less work
    than its start-up costs more than it runs), at least a poll (no decision comes sooner)."""
    return max(spec.pollIntervalSeconds, spec.podStartupSeconds)


def _allowed(budget: Budget, q: waitmodel.QueueLoad) -> float:
    sums = {k: (late, n) for k, late, n in budget.sums}
    late, n = sums.get(q.key, (0.0, 0.0))
    ahead = q.arrival_rate * BUDGET_HORIZON
    if ahead <= 0:
        return 1 - waitmodel.QUANTILE
    a = ((1 - waitmodel.QUANTILE) * (n + ahead) - late) / ahead
    return min(MAX_ALLOWED, max(MIN_ALLOWED, a))


def account(spec: ScalingSpec, rates: Rates, obs: QueueObservation, queue_order: tuple[str, ...],
            budget: Budget, slots_held: int) -> Budget:
    """The budget after the interval since `budget.at`, the fleet having held `slots_held`."""
    targets = spec.targetWaitSeconds
    known = service_times(rates, spec.expectedServiceSeconds or {}, queue_order)
    if not targets or known is None or budget.at is None or obs.at <= budget.at:
        return replace(budget, at=obs.at)
    service, services = known
    loads = [waitmodel.QueueLoad(key=q, arrival_rate=rates.arrival_rate(q), queued=0,
                                 target_wait=targets.get(q), service=services.get(q),
                                 cv2=rates.service_cv2(q)) for q in queue_order]
    dt = obs.at - budget.at
    tails = waitmodel.late_shares(loads, service=service, slots=slots_held)
    keep = math.exp(-dt / BUDGET_SECONDS)
    old = {k: (late, n) for k, late, n in budget.sums}
    sums = []
    for q in loads:
        if q.key not in tails:
            continue
        arrived = q.arrival_rate * dt
        late, n = old.get(q.key, (0.0, 0.0))
        tail = tails[q.key]
        age = obs.oldest_age(q.key)
        if age is not None and q.target_wait is not None and REALISED:
            tail = max(tail, min(dt, max(0.0, age - q.target_wait)) / dt)
        sums.append((q.key, late * keep + arrived * tail, n * keep + arrived))
    return Budget(at=obs.at, sums=tuple(sums))


REALISED = True
