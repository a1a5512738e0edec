"""Which operator replica acts on which TaskQueue when TaskQueues are sharded (pure: no I/O).

Each replica holds a `coordination.k8s.io` Lease of its own (`taskqueue.controller.shards`
renews it and lists the others'). The live replicas are the holders of the Leases whose
`renewTime` this replica has seen change within their `leaseDurationSeconds` — measured on this
replica's own clock, as client-go's leader election does, so clock skew between nodes does not
matter. A TaskQueue belongs to the live replica that rendezvous hashing (highest random weight)
gives its uid: adding or removing one replica of N moves about 1/N of the TaskQueues, and only
to or from that replica.

The handover margin (`settle`): a replica acts on a TaskQueue only once the TaskQueue has mapped
to it in every view of the membership it held during the last `settle` seconds. A replica that
joins is seen by the others at their next listing (within one renew period) and they stop acting
on what it takes; it starts acting `settle` (two renew periods) after joining, so the two overlap
only if a poll that started before the old owner saw the newcomer lasts longer than a renew
period. A replica that cannot renew its own Lease stops acting when its last renewal is
`lease_seconds` old (fenced), which is before any other replica can have seen the Lease expire
and waited `settle`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

SHARD_LABEL = "taskqueue.dev/operator-shard"
"""The label of the replicas' Leases; its value names the group (`--leader-election-id`)."""

STALE_LEASES = 4
"""A peer's Lease unchanged for this many lease durations is a dead replica's: deleted."""


@dataclass(frozen=True)
class LeaseSeen:
    """One shard Lease as listed: its name, holder, renewTime (as written) and duration."""

    name: str
    holder: str | None
    renew_time: str | None
    duration: float


@dataclass(frozen=True)
class Peer:
    """A Lease as this replica tracks it: when (local clock) its renewTime last changed."""

    holder: str
    renew_time: str | None
    observed: float
    duration: float

    def live(self, now: float) -> bool:
        return now - self.observed < self.duration


@dataclass(frozen=True)
class View:
    """The live replicas from `since` (local clock) until the next view."""

    since: float
    members: frozenset[str]


def weight(key: str, member: str) -> int:
    """The rendezvous weight of `member` for `key` (stable across processes and versions)."""
    digest = hashlib.blake2b(f"{member}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(key: str, members: Iterable[str]) -> str | None:
    """The member `key` belongs to (highest weight; ties by name); None without members."""
    best: tuple[int, str] | None = None
    for m in members:
        w = (weight(key, m), m)
        if best is None or w > best:
            best = w
    return None if best is None else best[1]


@dataclass(frozen=True)
class Membership:
    """What one replica (`me`) knows of the shard Leases, and what it may act on."""

    me: str
    lease_seconds: float
    settle: float
    peers: Mapping[str, Peer] = field(default_factory=dict)
    """By Lease name (this replica's own included)."""
    views: tuple[View, ...] = ()
    """Oldest first; the ones that cover the last `settle` seconds (at the last `observe`)."""
    renewed: float | None = None
    """When this replica last renewed its own Lease (local clock)."""

    def fenced(self, now: float) -> bool:
        """True when this replica's own Lease may have expired: it must not act."""
        return self.renewed is None or now - self.renewed >= self.lease_seconds

    def observe(self, leases: Sequence[LeaseSeen], *, now: float,
                renewed: bool) -> Membership:
        """The membership after a listing of the Leases at `now` (`renewed`: this replica's own
        renewal succeeded just before)."""
        peers: dict[str, Peer] = {}
        for lease in leases:
            if not lease.holder:  # released
                continue
            prior = self.peers.get(lease.name)
            same = (prior is not None and prior.holder == lease.holder
                    and prior.renew_time == lease.renew_time)
            peers[lease.name] = Peer(lease.holder, lease.renew_time,
                                     prior.observed if same and prior else now, lease.duration)
        new = replace(self, peers=peers, renewed=now if renewed else self.renewed)
        members = new.live(now)
        views = self.views
        if not views or views[-1].members != members:
            views = (*views, View(now, members))
        return replace(new, views=_recent(views, now - self.settle))

    def live(self, now: float) -> frozenset[str]:
        """The live replicas: peers whose renewals this replica saw recently; itself unless
        fenced."""
        others = {p.holder for p in self.peers.values() if p.holder != self.me and p.live(now)}
        return frozenset(others if self.fenced(now) else others | {self.me})

    def owns(self, key: str, now: float) -> bool:
        """Whether this replica may act on `key` at `now`: not fenced, and `key` mapped to it in
        every view of the last `settle` seconds (the handover margin)."""
        if self.fenced(now) or not self.views or self.views[0].since > now - self.settle:
            return False
        return all(owner(key, v.members) == self.me for v in _recent(self.views, now - self.settle))

    def stale(self, now: float) -> list[str]:
        """Other replicas' Leases unchanged for STALE_LEASES durations (dead replicas')."""
        return sorted(name for name, p in self.peers.items()
                      if p.holder != self.me and now - p.observed > STALE_LEASES * p.duration)


def _recent(views: tuple[View, ...], start: float) -> tuple[View, ...]:
    """The views in effect at some time from `start` on (the one in effect at `start`
    included)."""
    first = 0
    for i, v in enumerate(views):
        if v.since <= start:
            first = i
    return views[first:]
