"""Sharding (`taskqueue-operator --sharding`): every replica runs the handlers, each acts on its
share of the TaskQueues.

Each replica holds a `coordination.k8s.io/v1` Lease of its own, `<group>-<pod name>` labelled
`taskqueue.dev/operator-shard=<group>`, renewed every `renew_seconds`; after each renewal it lists
the group's Leases and hands them to its `ring.Membership`, which says which TaskQueues (by uid)
it may act on (`owns`). The Lease calls go through `kube.LeaseApi`. On a clean stop the replica
deletes its Lease, so the others take its share after one listing and the handover margin
instead of a Lease duration. A dead replica's Lease, unchanged for `ring.STALE_LEASES`
durations, is deleted by the replica that notices (only at the resourceVersion it read).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from taskqueue.controller import ring
from taskqueue.controller.kube import ApiError, LeaseApi, in_lease_thread, micro_time
from taskqueue.controller.record import Records
from taskqueue.telemetry import metrics

log = logging.getLogger("taskqueue.shards")


@dataclass
class Shards:
    """This replica's shard Lease and what it may act on."""

    api_client: Any
    namespace: str
    group: str
    pod: str
    identity: str
    records: Records
    lease_seconds: float = 15.0
    renew_seconds: float = 3.0
    clock: Callable[[], float] = time.monotonic
    membership: ring.Membership = field(init=False)

    def __post_init__(self) -> None:
        if not self.renew_seconds * 2 < self.lease_seconds:
            raise ValueError(f"shard renew period {self.renew_seconds}s: must be under half "
                             f"the lease duration {self.lease_seconds}s")
        self.api = LeaseApi(self.api_client)
        self.name = f"{self.group}-{self.pod}"[:253]
        self.labels = {ring.SHARD_LABEL: self.group}
        self.membership = ring.Membership(self.identity, lease_seconds=self.lease_seconds,
                                          settle=2 * self.renew_seconds)
        self._changed = asyncio.Event()

    def changed(self) -> asyncio.Event:
        """Set when what this replica owns may have changed: the live replicas changed, or the
        handover margin after such a change has passed (a daemon of a TaskQueue it does not own
        waits on it instead of checking every second)."""
        return self._changed

    def _announce(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def owns(self, uid: str) -> bool:
        """Whether this replica acts on the TaskQueue of `uid` now."""
        return self.membership.owns(uid, self.clock())

    # -- one round (blocking; run in a thread) ------------------------------------------------
    def renew(self) -> bool:
        """Create or renew this replica's Lease; True when it went through."""
        now = micro_time(datetime.datetime.now(datetime.UTC))
        spec = {"holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_seconds), "renewTime": now}
        try:
            lease = self.api.read(self.namespace, self.name)
        except ApiError as e:
            if e.status != 404:
                raise
            self.api.create(self.namespace, {
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": self.labels},
                "spec": {**spec, "acquireTime": now}})
            return True
        body = {"metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": self.labels,
                             "resourceVersion": lease.metadata.resource_version},
                "spec": {**spec, "acquireTime": now if lease.spec.holder_identity != self.identity
                         else micro_time(lease.spec.acquire_time)}}
        try:
            self.api.replace(self.namespace, self.name, body)
        except ApiError as e:
            if e.status == 409:  # written since it was read: renewed at the next round
                return False
            raise
        return True

    def round(self) -> None:
        """Renew, list the group's Leases, update the membership, delete dead replicas'."""
        try:
            renewed = self.renew()
        except ApiError as e:
            log.warning("renewing shard lease %s/%s: %s", self.namespace, self.name, e.reason)
            renewed = False
        listed = self.api.list(self.namespace, self.labels)
        before = self.membership
        self.membership = before.observe([_seen(item) for item in listed], now=self.clock(),
                                         renewed=renewed)
        now = self.clock()
        if before.live(now) != self.membership.live(now):
            log.info("shard replicas: %s", ", ".join(sorted(self.membership.live(now))))
        by_name = {item.metadata.name: item for item in listed}
        for name in self.membership.stale(now):
            self._delete(name, by_name[name].metadata.resource_version)
        self._export(now)

    def _delete(self, name: str, resource_version: str | None) -> None:
        try:
            self.api.delete(self.namespace, name, resource_version=resource_version)
            log.info("deleted the shard lease %s/%s of a replica gone for %d lease durations",
                     self.namespace, name, ring.STALE_LEASES)
        except ApiError as e:
            if e.status not in (404, 409):
                log.warning("deleting stale shard lease %s/%s: %s", self.namespace, name,
                            e.reason)

    def _export(self, now: float) -> None:
        owned = sum(1 for r in self.records.all() if r.uid and self.membership.owns(r.uid, now))
        metrics.OWNED_TASKQUEUES.labels(self.pod).set(owned)
        metrics.SHARD_REPLICAS.labels(self.pod).set(len(self.membership.live(now)))

    def leave(self) -> None:
        """Delete this replica's Lease (a clean stop): the others take its share at once."""
        try:
            self.api.delete(self.namespace, self.name)
        except ApiError as e:
            if e.status != 404:
                log.warning("could not delete shard lease %s/%s: %s", self.namespace,
                            self.name, e.reason)

    # -- the loop ------------------------------------------------------------------------------
    async def _round(self) -> None:
        """One round in a thread; announced now and after the margin when the view changed."""
        last = self.membership.views[-1] if self.membership.views else None
        await in_lease_thread(self.round)
        if self.membership.views and self.membership.views[-1] is not last:
            self._announce()
            asyncio.get_running_loop().call_later(self.membership.settle + 0.05, self._announce)

    async def join(self) -> None:
        """The first round (raises when the API server refuses the Lease calls)."""
        await self._round()
        log.info("joined shard group %s as %s (lease %s/%s)", self.group, self.identity,
                 self.namespace, self.name)

    async def hold(self) -> None:
        """Renew and list every `renew_seconds`, for ever (failures leave this replica fenced
        once its last renewal is a lease duration old; it keeps trying)."""
        while True:
            await asyncio.sleep(self.renew_seconds)
            try:
                await self._round()
            except Exception as e:  # API or network: this replica fences itself, and retries
                log.warning("listing shard leases in %s: %s: %s", self.namespace,
                            type(e).__name__, e)


def _seen(item: Any) -> ring.LeaseSeen:
    spec = item.spec
    renew = spec.renew_time
    return ring.LeaseSeen(item.metadata.name, spec.holder_identity,
                          renew.isoformat() if renew is not None else None,
                          float(spec.lease_duration_seconds or 15))
