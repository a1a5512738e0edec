"""Quiesce, then remove: which pods leave on a scale-in, and when it is safe. Pure.

When the policy wants fewer replicas than there are pods, the operator chooses victims (fewest
tasks in flight, then the newest; pods already quiesced win ties so a victim is not swapped for an
equal one), adds them to the TaskQueue's quiesced set in Redis (fetch.lua gives a quiesced worker
nothing, atomically), then reads their processing lists. A victim whose list is empty *after* it
was quiesced can never hold a task again: it gets the lowest pod-deletion-cost and the replica
count drops by the number of such pods, so the ReplicaSet deletes exactly those. Victims still
busy stay quiesced and leave on a later poll; a victim no longer needed (the policy wants more
again) is released. `taskqueue.simulate` drives the same functions.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

VICTIM_DELETION_COST = -1000
"""pod-deletion-cost of a drained victim (others carry their in-flight count, >= 0)."""


@dataclass(frozen=True)
class PodView:
    """A worker pod as the scale-in sees it (pod name = worker id)."""

    name: str
    in_flight: int
    created: float
    """Creation time (unix seconds); newer pods leave first among equals."""


@dataclass(frozen=True)
class ScaleIn:
    """What to do on one poll: quiesce `victims`, release `release`."""

    victims: tuple[str, ...]
    release: tuple[str, ...]


def choose_victims(pods: Sequence[PodView], *, remove: int,
                   quiesced: Collection[str] = ()) -> tuple[str, ...]:
    """The `remove` pods to take out: fewest in flight, then already quiesced, then newest."""
    if remove <= 0:
        return ()
    ranked = sorted(pods, key=lambda p: (p.in_flight, p.name not in quiesced, -p.created, p.name))
    return tuple(p.name for p in ranked[:remove])


def plan(pods: Sequence[PodView], *, target: int, quiesced: Collection[str]) -> ScaleIn:
    """Victims for `target` replicas out of `pods`, and the quiesced names to release."""
    victims = choose_victims(pods, remove=len(pods) - target, quiesced=quiesced)
    release = tuple(sorted(set(quiesced) - set(victims)))
    return ScaleIn(victims=victims, release=release)


def drained(victims: Sequence[str], held: Mapping[str, int]) -> tuple[str, ...]:
    """The victims holding nothing (`held`: processing-list length read after quiescing)."""
    return tuple(v for v in victims if held.get(v, 0) == 0)


def replicas_after(*, current: int, target: int, pods: int, removable: int) -> int:
    """The replica count that deletes at most the `removable` drained victims of `pods`."""
    return min(current, max(target, pods - removable))


def deletion_costs(pods: Sequence[str], held: Mapping[str, int],
                   victims: Collection[str]) -> dict[str, str]:
    """pod-deletion-cost per pod: victims lowest, the rest their in-flight count."""
    return {p: str(VICTIM_DELETION_COST if p in victims else held.get(p, 0)) for p in pods}
