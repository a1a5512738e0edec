"""Quiesce, then remove: which pods leave on a scale-in, and when it is safe. Pure.

When the policy wants fewer replicas than there are pods, the operator chooses victims (the pods
the ReplicaSet deletes before any others, below; then the fewest tasks in flight, then the newest;
pods already quiesced win ties so a victim is not swapped for an equal one), adds them to the
TaskQueue's quiesced set in Redis (fetch.lua gives a quiesced worker nothing, atomically), then
reads their processing lists. A victim whose list is empty *after* it was quiesced can never hold
a task again: it gets the lowest pod-deletion-cost and the replica count drops by the number of
such pods the ReplicaSet deletes first, so it deletes exactly those. Victims still busy stay
quiesced and leave on a later poll; a victim no longer needed (the policy wants more again) is
released. `taskqueue.simulate` drives the same functions.

The ReplicaSet controller looks at pod-deletion-cost only among pods of the same standing: it
deletes unscheduled pods first, then Pending, Unknown and Running ones, and not-Ready before
Ready (kubernetes pkg/controller, `ActivePodsWithRanks`). A pod whose worker holds a task while
the API still shows it starting, or whose readiness probe fails under load, would be deleted
before a drained victim of any cost; so victims are taken in that order first, and only the
drained victims the ReplicaSet ranks before every other pod count as removable.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

VICTIM_DELETION_COST = -1000
"""pod-deletion-cost of a drained victim (others carry their in-flight count, >= 0)."""

_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def replicaset_rank(*, scheduled: bool, phase: str, ready: bool) -> int:
    """Where the ReplicaSet puts a pod before it compares pod-deletion-costs (lower goes first):
    unscheduled < scheduled, then Pending < Unknown < Running, then not Ready < Ready."""
    return (int(scheduled) * len(_PHASE_ORDER) + _PHASE_ORDER.get(phase, 0)) * 2 + int(ready)


RUNNING_READY = replicaset_rank(scheduled=True, phase="Running", ready=True)
"""The rank of a scheduled, Running, Ready pod: the last the ReplicaSet deletes."""


@dataclass(frozen=True)
class PodView:
    """A worker pod as the scale-in sees it (pod name = worker id)."""

    name: str
    in_flight: int
    created: float
    """Creation time (unix seconds); newer pods leave first among equals."""
    rank: int = RUNNING_READY
    """`replicaset_rank`: pods the ReplicaSet deletes before any others are victims first."""


@dataclass(frozen=True)
class ScaleIn:
    """What to do on one poll: quiesce `victims`, release `release`."""

    victims: tuple[str, ...]
    release: tuple[str, ...]


def choose_victims(pods: Sequence[PodView], *, remove: int,
                   quiesced: Collection[str] = ()) -> tuple[str, ...]:
    """The `remove` pods to take out: those the ReplicaSet deletes first whatever their cost (not
    yet Ready, ...), then the fewest in flight, then already quiesced, then the newest."""
    if remove <= 0:
        return ()
    ranked = sorted(pods, key=lambda p: (p.rank, p.in_flight, p.name not in quiesced,
                                         -p.created, p.name))
    return tuple(p.name for p in ranked[:remove])


def plan(pods: Sequence[PodView], *, target: int, quiesced: Collection[str]) -> ScaleIn:
    """Victims for `target` replicas out of `pods`, and the quiesced names to release."""
    victims = choose_victims(pods, remove=len(pods) - target, quiesced=quiesced)
    release = tuple(sorted(set(quiesced) - set(victims)))
    return ScaleIn(victims=victims, release=release)


def drained(victims: Sequence[str], held: Mapping[str, int]) -> tuple[str, ...]:
    """The victims holding nothing (`held`: processing-list length read after quiescing)."""
    return tuple(v for v in victims if held.get(v, 0) == 0)


def removable(pods: Sequence[PodView], drained: Collection[str]) -> int:
    """How many pods the ReplicaSet can delete now touching only `drained` victims: those it
    ranks before every other pod (by `rank`, then their lowest pod-deletion-cost)."""
    order = sorted(pods, key=lambda p: (p.rank, p.name not in drained))
    return next((i for i, p in enumerate(order) if p.name not in drained), len(order))


def replicas_after(*, current: int, target: int, pods: int, removable: int) -> int:
    """The replica count that deletes at most the `removable` drained victims of `pods`."""
    return min(current, max(target, pods - removable))


def deletion_costs(pods: Sequence[str], held: Mapping[str, int],
                   victims: Collection[str]) -> dict[str, str]:
    """pod-deletion-cost per pod: victims lowest, the rest their in-flight count."""
    return {p: str(VICTIM_DELETION_COST if p in victims else held.get(p, 0)) for p in pods}
