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

A poll's scale-in is decided here before any I/O (`plan_scale_in`: which pods to quiesce and to
release, or the outcome when it needs no reply); the controller's actor performs it and hands the
reply back (`Plan.costs`, `Plan.settle`): the count that is safe to set now, the rule that holds
it above the policy's and what was done, as `Settled`. Quiescing needs worker id = pod name (the
operator's own Deployment sets TASKQUEUE_WORKER_ID from metadata.name); when busy workers are not
pods by name, the count stays at or above them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from taskqueue.scaling.observation import QueueObservation

VICTIM_DELETION_COST = -1000
"""pod-deletion-cost of a drained victim (others carry their in-flight count, >= 0)."""

DRAINING = "draining"
"""The rule (`policy.Rule`) when quiesced victims still finish their tasks: the count drops as
they drain."""
WORKERS_NOT_PODS = "workers-not-pods"
"""Busy workers are not pods by name: no quiesce, not below the busy workers."""
REPLICASET_ORDER = "replicaset-order"
"""A drained victim is kept while the ReplicaSet would delete a busy pod before it."""
SCALE_IN_DEFERRED = "scale-in-deferred"
"""Nothing is removed this poll: Redis could not be written or read, or a pod-deletion-cost
could not be set."""

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
    deletion_cost: str | None = None
    """Its pod-deletion-cost annotation now (None: none)."""


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


@dataclass(frozen=True)
class Settled:
    """What a poll's scale-in allows."""

    replicas: int | None = None
    """The replica count safe to set now (None: the policy's stands)."""
    rule: str | None = None
    """Why the count stays above the policy's (one of the rules above), when it does."""
    note: str = ""
    """What the scale-in did, for the reason ("" when nothing)."""
    quiesced: frozenset[str] | None = None
    """The pods quiesced after this poll (None: unknown, Redis was not read)."""


UNCHANGED = Settled()
"""No scale-in: the policy's count stands."""


@dataclass(frozen=True)
class Plan:
    """A poll's scale-in, decided before any I/O: the quiesced-set writes and, when the outcome
    needs no reply from Redis, the outcome (`settled`); else `settle` gives it from the reply."""

    current: int
    target: int
    """The replica count now, and the policy's."""
    quiesced: frozenset[str] = frozenset()
    """The pods quiesced before this poll."""
    pods: tuple[PodView, ...] = ()
    """The active worker pods (on a scale-in)."""
    quiesce: tuple[str, ...] = ()
    """Victims to add to the quiesced set; their processing lists are read after (the reply)."""
    release: tuple[str, ...] = ()
    """Pods to take out of the quiesced set."""
    settled: Settled | None = None
    """The outcome when it does not depend on the reply."""

    @property
    def writes(self) -> bool:
        """Whether Redis is written (one MULTI/EXEC)."""
        return bool(self.quiesce or self.release)

    def costs(self, after: Mapping[str, int]) -> dict[str, str]:
        """pod-deletion-cost per pod, `after` being the victims' processing-list lengths read
        after quiescing them."""
        held = {**{p.name: p.in_flight for p in self.pods}, **after}
        return deletion_costs([p.name for p in self.pods], held, drained(self.quiesce, after))

    def settle(self, after: Mapping[str, int], *, annotated: bool) -> Settled:
        """The outcome once the victims are quiesced (`after`: their processing-list lengths
        read after) and the costs written (`annotated`: all of them; a pod whose cost could
        not be written may rank below a victim, so nothing is removed then)."""
        if self.settled is not None:
            return self.settled
        empty = drained(self.quiesce, after)
        ready = removable(self.pods, empty) if annotated else 0
        replicas = replicas_after(current=self.current, target=self.target,
                                  pods=len(self.pods), removable=ready)
        busy = len(self.quiesce) - len(empty)
        note = f"quiesced {len(self.quiesce)} pod(s), {len(empty)} drained"
        if busy:
            note += f", {busy} still finishing their tasks"
        if not annotated:
            note += ", a pod-deletion-cost could not be written: nothing removed this poll"
        elif ready < len(empty):
            note += (f", {len(empty) - ready} kept while the ReplicaSet would delete a busy pod "
                     "first (not yet Ready, Pending or unscheduled)")
        rule = None
        if replicas > self.target:
            rule = (DRAINING if busy else SCALE_IN_DEFERRED if not annotated
                    else REPLICASET_ORDER)
        return Settled(replicas, rule, note, frozenset(self.quiesce))

    def failed(self, error: str) -> Settled:
        """The outcome when the quiesced-set write failed (`error`, password-free): nothing is
        removed this poll, and the set is as it was (the writes are one transaction)."""
        return Settled(max(self.target, self.current), SCALE_IN_DEFERRED,
                       f"scale-in deferred: {error}", self.quiesced)


def needs_pods(*, target: int, current: int, observation: QueueObservation | None) -> bool:
    """Whether `plan_scale_in` needs the worker pods: on a scale-in with Redis read."""
    return observation is not None and target < current


def plan_scale_in(*, target: int, current: int, observation: QueueObservation | None,
                  pods: Sequence[PodView] = ()) -> Plan:
    """The scale-in of a poll whose policy wants `target` replicas of `current`, `pods` being
    the active worker pods (listed when `needs_pods`)."""
    if observation is None:  # Redis unreadable: nothing can be quiesced, hold what we have
        if target >= current:
            return Plan(current, target, settled=UNCHANGED)
        return Plan(current, target, settled=Settled(
            current, SCALE_IN_DEFERRED, "scale-in deferred: Redis cannot be read"))
    quiesced = observation.quiesced
    if target >= current:
        if quiesced:
            return Plan(current, target, quiesced, release=tuple(sorted(quiesced)),
                        settled=Settled(target, None, f"released {len(quiesced)} quiesced pod(s)",
                                        frozenset()))
        return Plan(current, target, quiesced, settled=Settled(quiesced=quiesced))
    names = {p.name for p in pods}
    strangers = [w for w in observation.workers
                 if w.in_flight and w.alive(now=observation.at) and w.worker_id not in names]
    if strangers:  # worker ids are not pod names (a scaleTargetRef without TASKQUEUE_WORKER_ID)
        floor = min(current, max(target, observation.busy_workers))
        return Plan(current, target, quiesced, settled=Settled(
            floor, WORKERS_NOT_PODS,
            f"{len(strangers)} busy worker(s) are not pod names: no quiesce, not below "
            f"{observation.busy_workers} busy workers", quiesced))
    chosen = plan(pods, target=target, quiesced=quiesced)
    release = sorted(set(chosen.release) | (quiesced - set(chosen.victims)))
    return Plan(current, target, quiesced, tuple(pods), chosen.victims, tuple(release))
