"""targetWaitSeconds: the wait model's inputs from the spec, the measured rates and one
observation (`taskqueue.waitmodel` does the queueing maths, `taskqueue.rates` the measuring).
Pure; called by `taskqueue.policy`."""

from __future__ import annotations

from taskqueue import waitmodel
from taskqueue.models import ScalingSpec
from taskqueue.observation import QueueObservation
from taskqueue.rates import Rates


def sizing(spec: ScalingSpec, rates: Rates, obs: QueueObservation,
           queue_order: tuple[str, ...]) -> waitmodel.WaitSizing | None:
    """Slots for the wait targets; None without targets or until the service time is known."""
    targets = spec.targetWaitSeconds
    service = rates.service_seconds
    if not targets or service is None:
        return None
    services = rates.service_by_queue(list(queue_order)) or {}
    loads = [
        waitmodel.QueueLoad(key=q, arrival_rate=rates.arrival_rate(q),
                            queued=obs.backlog.get(q, 0), target_wait=targets.get(q),
                            service=services.get(q), oldest_age=obs.oldest_age(q) or 0.0,
                            cv2=rates.service_cv2(q))
        for q in queue_order
    ]
    return waitmodel.size_for_wait(loads, service=service, horizon=burst_horizon(spec),
                                   startup=spec.podStartupSeconds)


def burst_horizon(spec: ScalingSpec) -> float:
    """The least work each pod added for a burst gets: podStartupSeconds (a pod with less work
    than its start-up costs more than it runs), at least a poll (no decision comes sooner)."""
    return max(spec.pollIntervalSeconds, spec.podStartupSeconds)
