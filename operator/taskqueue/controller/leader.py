"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does.

Only the holder runs kopf's handlers (kopf itself runs `--standalone`, without peering). The
holder renews every `renew_seconds`; a candidate takes the Lease when its `renewTime` is older
than `leaseDurationSeconds`. Writes carry the resourceVersion read, so two candidates cannot both
win a race. A holder that cannot renew within the lease duration gives up leadership (the
operator then exits, and its pod is restarted as a candidate). On a clean stop it releases the
Lease so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from dataclasses import dataclass
from typing import Any

from taskqueue.controller.kube import ApiError, LeaseApi, in_lease_thread, micro_time

log = logging.getLogger("taskqueue.leader")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass
class LeaderElector:
    """Acquire, renew and release one Lease."""

    api_client: Any
    namespace: str
    name: str
    identity: str
    lease_seconds: int = 15
    renew_seconds: float = 5.0
    retry_seconds: float = 2.0

    def __post_init__(self) -> None:
        self.api = LeaseApi(self.api_client)

    # -- one attempt (blocking; run in a thread) ----------------------------------------------
    def try_acquire(self) -> bool:
        """Take or renew the Lease; True when this identity holds it afterwards."""
        now = _now()
        try:
            lease = self.api.read(self.namespace, self.name)
        except ApiError as e:
            if e.status != 404:
                raise
            return self._create(now)
        spec = lease.spec
        holder = spec.holder_identity
        if holder and holder != self.identity and not self._expired(spec, now):
            return False
        transitions = int(spec.lease_transitions or 0) + (0 if holder == self.identity else 1)
        body = {
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "resourceVersion": lease.metadata.resource_version},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.lease_seconds,
                "acquireTime": micro_time(spec.acquire_time if holder == self.identity
                                      and spec.acquire_time else now),
                "renewTime": micro_time(now),
                "leaseTransitions": transitions,
            },
        }
        try:
            self.api.replace(self.namespace, self.name, body)
        except ApiError as e:
            if e.status == 409:  # someone else wrote it first
                return False
            raise
        return True

    def _create(self, now: datetime.datetime) -> bool:
        body = {
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                     "acquireTime": micro_time(now), "renewTime": micro_time(now),
                     "leaseTransitions": 0},
        }
        try:
            self.api.create(self.namespace, body)
        except ApiError as e:
            if e.status == 409:
                return False
            raise
        return True

    def _expired(self, spec: Any, now: datetime.datetime) -> bool:
        renewed = spec.renew_time or spec.acquire_time
        if renewed is None:
            return True
        seconds = int(spec.lease_duration_seconds or self.lease_seconds)
        duration = datetime.timedelta(seconds=seconds)
        return bool(renewed + duration < now)

    def release(self) -> None:
        """Give the Lease up (only if held): holder cleared, so a standby takes it at once."""
        try:
            lease = self.api.read(self.namespace, self.name)
            if lease.spec.holder_identity != self.identity:
                return
            body = {"metadata": {"name": self.name, "namespace": self.namespace,
                                 "resourceVersion": lease.metadata.resource_version},
                    "spec": {"holderIdentity": None, "leaseDurationSeconds": 1,
                             "leaseTransitions": lease.spec.lease_transitions}}
            self.api.replace(self.namespace, self.name, body)
        except ApiError as e:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, e.reason)

    # -- loops -------------------------------------------------------------------------------
    async def acquire(self) -> None:
        """Return once this identity holds the Lease."""
        announced = False
        while True:
            try:
                if await in_lease_thread(self.try_acquire):
                    log.info("acquired lease %s/%s as %s", self.namespace, self.name,
                             self.identity)
                    return
            except ApiError as e:
                log.warning("lease %s/%s: %s", self.namespace, self.name, e.reason)
            if not announced:
                log.info("waiting for lease %s/%s (held by another replica)", self.namespace,
                         self.name)
                announced = True
            await asyncio.sleep(self.retry_seconds)

    async def hold(self) -> None:
        """Renew until leadership is lost (then return)."""
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(self.renew_seconds)
            try:
                held = await in_lease_thread(self.try_acquire)
            except ApiError as e:
                log.warning("renewing lease %s/%s: %s", self.namespace, self.name, e.reason)
                held = loop.time() - last < self.lease_seconds
                if held:
                    continue
            if not held:
                log.error("lost lease %s/%s", self.namespace, self.name)
                return
            last = loop.time()
