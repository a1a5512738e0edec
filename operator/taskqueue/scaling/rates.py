"""What the policy measures between polls, by estimator: arrivals per queue (`arrivals`), the
service time per task (`service`) and the waits the workers measured (`waits`). Pure.

`update` carries the counters of the last observation (queue lengths, taken, completed and
failed: the deltas every estimator starts from) and hands each estimator its part of the
next observation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from taskqueue.scaling import arrivals as arrivals_
from taskqueue.scaling import service as service_
from taskqueue.scaling import waits as waits_
from taskqueue.scaling.observation import QueueObservation


@dataclass(frozen=True)
class Rates:
    """The estimators' state, and the counters of the observation at `at`."""

    at: float | None = None
    backlog: tuple[tuple[str, int], ...] = ()
    taken: tuple[tuple[str, int], ...] = ()
    completed: int = 0
    failed: int = 0
    """The `completed` and `failed` counters at the last observation: an attempt ends in one or
    the other (a retried task's next attempt is another arrival and another end)."""
    arrivals: arrivals_.Arrivals = field(default_factory=arrivals_.Arrivals)
    service: service_.ServiceTimes = field(default_factory=service_.ServiceTimes)
    waits: waits_.Waits = field(default_factory=waits_.Waits)


def update(rates: Rates, obs: QueueObservation) -> Rates:
    """`rates` after `obs` (the first observation only records the counters)."""
    counters = replace(
        rates, at=obs.at, backlog=tuple(obs.backlog.items()), taken=tuple(obs.taken.items()),
        completed=obs.completed_total, failed=obs.failed_total,
        service=service_.observed(rates.service, obs),
        waits=waits_.observed(rates.waits, obs),
    )
    if rates.at is None or obs.at <= rates.at:
        return counters
    dt = obs.at - rates.at
    ended = ended_since(obs, completed=rates.completed, failed=rates.failed)
    if obs.completed_total < rates.completed:  # the stats hash was reset: start the sums again
        return replace(counters, arrivals=arrivals_.restarted(rates.arrivals),
                       service=service_.restarted(counters.service))
    raw = arrivals_.entered(obs, backlog=dict(rates.backlog), taken=dict(rates.taken),
                            in_flight=rates.service.in_flight, ended=ended)
    return replace(
        counters,
        arrivals=arrivals_.after(rates.arrivals, raw, dt, at=obs.at),
        service=service_.after(counters.service, rates.service, obs=obs, dt=dt, ended=ended,
                               taken=dict(rates.taken)),
    )


def ended_since(obs: QueueObservation, *, completed: int, failed: int) -> int:
    """Attempts ended (completed or failed) since the observation whose `completed` and
    `failed` counters were these, up to `obs`."""
    return obs.completed_total - completed + max(0, obs.failed_total - failed)
