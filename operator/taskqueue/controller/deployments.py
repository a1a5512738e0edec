"""The worker Deployments: a cache fed by the watch of the Deployments the operator owns, and
`Deployments.ensure` (the one place a TaskQueue's Deployment is created or updated).

With the watch on, the watch is the source of a Deployment's state between our writes: a poll
uses the last state seen (a watch event, or the reply of our own create, PUT or scale) and does
not GET it. It GETs only where the watch cannot be trusted:

- it has no state yet (the first poll before the watch listed the Deployment; after the watch
  said it was deleted; a scaleTargetRef Deployment, not watched);
- after a write that failed or conflicted (the Deployment changed since it was read);
- after the watch listed again (kopf lists when it starts and after a 410 Gone, and a Deployment
  deleted while it was not watching sends no event): a state the new listing has not confirmed
  within LISTING_SECONDS is re-read once.

Watch events older than what is known (resourceVersion of the last state, or of the deletion)
are ignored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from taskqueue.api import models
from taskqueue.controller import admission, workload
from taskqueue.controller.kube import ConflictError, DeploymentState, Kube, newer_or_same
from taskqueue.controller.record import SpecError

log = logging.getLogger("taskqueue.operator")

LISTING_GAP_SECONDS = 30.0
"""A listed Deployment (a watch event of type None, which only a listing sends) this long after
the previous one means the watch is listing again."""
LISTING_SECONDS = 60.0
"""How long a listing has to show every Deployment that exists: a cached state older than the
listing and not confirmed by it within this is re-read (it may be gone)."""

Key = tuple[str, str]


@dataclass
class _Seen:
    state: DeploymentState
    since: float
    """When the watch event, GET or write reply that brought this state came (the cache's
    clock)."""


class Deployments:
    """The Deployments the polls scale: read (cached when watched), created, updated."""

    def __init__(self, kube: Kube, *, watched: bool = False,
                 rules: admission.WorkerRules | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.clock = clock
        self.rules = rules or admission.WorkerRules()
        """What a TaskQueue may run and scale (checked before any read or write)."""
        self.watched = watched
        """True when `saw` is fed by a watch of the Deployments the operator owns."""
        self._seen: dict[Key, _Seen] = {}
        self._floors: dict[Key, str] = {}
        """resourceVersion of the deletion of a Deployment not seen since: older watch events
        still on their way are ignored."""
        self._listings: dict[str, tuple[float, float]] = {}
        """Per namespace, when the watch's latest listing of it began and when its latest listed
        Deployment came (the cache's clock): kopf lists each namespace it watches on its own, or
        all at once when it watches the cluster."""
        self._rendered: dict[Key, tuple[models.TaskQueue, str, str]] = {}
        """Per Deployment, the spec hash last rendered and of what (TaskQueue object, uid): a
        poll of the same parsed TaskQueue compares hashes without rendering it again."""

    def saw(self, namespace: str, name: str, state: DeploymentState, *,
            deleted: bool = False, listed: bool = False) -> None:
        """A watch event of an owned Deployment (kept unless older than what we know);
        `listed`: an event of a listing (type None)."""
        key = (namespace, name)
        if listed:
            now = self.clock()
            began, last = self._listings.get(namespace, (now, float("-inf")))
            self._listings[namespace] = (now if now - last > LISTING_GAP_SECONDS else began, now)
        if deleted:  # a floor only for one we track (not one of a forgotten TaskQueue)
            tracked = self._seen.pop(key, None) is not None or key in self._floors
            if tracked and state.resource_version:
                self._floors[key] = state.resource_version
            return
        self._keep(key, state)

    def _keep(self, key: Key, state: DeploymentState) -> None:
        rv = state.resource_version
        floor, seen = self._floors.get(key), self._seen.get(key)
        if floor is not None and not newer_or_same(rv, floor):
            return
        if seen is not None and not newer_or_same(rv, seen.state.resource_version):
            return
        self._seen[key] = _Seen(state, self.clock())
        self._floors.pop(key, None)

    def _trusted(self, namespace: str, seen: _Seen) -> bool:
        """Whether a cached state is used as it is: confirmed since the latest listing of its
        namespace began, or that listing may still be showing it."""
        began = self._listings.get(namespace, (float("-inf"), 0.0))[0]
        return seen.since >= began or self.clock() - began < LISTING_SECONDS

    def wrote(self, namespace: str, name: str, state: DeploymentState | None) -> None:
        """After our own create or PUT: `state` is the Deployment the reply returned (None: the
        write failed or its reply is unknown, and the next read is a GET)."""
        key = (namespace, name)
        if state is None or not state.resource_version:
            self._seen.pop(key, None)
            return
        self._keep(key, state)

    def scaled(self, namespace: str, name: str, replicas: int,
               resource_version: str | None) -> None:
        """After our own scale to `replicas`, which made the Deployment `resource_version`
        (None: the write failed, and the next read is a GET)."""
        key = (namespace, name)
        seen = self._seen.get(key)
        if seen is None or not resource_version:
            self._seen.pop(key, None)
            return
        self._keep(key, replace(seen.state, replicas=replicas,
                                resource_version=resource_version))

    def forget(self, namespace: str, name: str) -> None:
        self._seen.pop((namespace, name), None)
        self._floors.pop((namespace, name), None)
        self._rendered.pop((namespace, name), None)

    def _spec_hash(self, key: Key, tq: models.TaskQueue, uid: str) -> str:
        """The spec hash of `tq`'s Deployment, rendered once per parsed TaskQueue and uid."""
        found = self._rendered.get(key)
        if found is not None and found[0] is tq and found[1] == uid:
            return found[2]
        body = workload.build_deployment(tq, uid=uid, replicas=0)
        rendered = str(body["metadata"]["annotations"][workload.SPEC_HASH_ANNOTATION])
        self._rendered[key] = (tq, uid, rendered)
        return rendered

    async def read(self, namespace: str, name: str, *,
                   owned: bool = True) -> DeploymentState | None:
        """The Deployment: the last one seen by the watch when `owned` (and watched), else GET."""
        key = (namespace, name)
        cache = owned and self.watched
        if cache:
            seen = self._seen.get(key)
            if seen is not None and self._trusted(namespace, seen):
                return seen.state
        state = await self.kube.get_deployment(namespace, name)
        if cache:
            if state is None:
                self._seen.pop(key, None)
            else:
                self._keep(key, state)
        return state

    async def ensure(self, tq: models.TaskQueue, *, uid: str) -> DeploymentState:
        """The Deployment to scale: created or updated when the TaskQueue owns it."""
        ns, name = tq.metadata.namespace or "default", workload.deployment_name(tq)
        problem = self.rules.image_problem(tq)
        if problem is not None:
            raise SpecError(problem)
        existing = await self.read(ns, name, owned=tq.spec.scaleTargetRef is None)
        if tq.spec.scaleTargetRef is not None:
            if existing is None:
                raise SpecError(
                    f"spec.scaleTargetRef.name: Deployment {name!r} not found in namespace {ns}; "
                    "create it or fix the name"
                )
            problem = self.rules.scale_target_problem(tq, dict(existing.labels))
            if problem is not None:
                raise SpecError(problem)
            return existing
        if existing is None:
            return await self._create(tq, uid=uid)
        if uid not in existing.owner_uids:
            raise SpecError(
                f"Deployment {name!r} exists and is not owned by this TaskQueue; delete it, or "
                f"set spec.scaleTargetRef.name: {name} to scale it without owning it"
            )
        if existing.spec_hash != self._spec_hash((ns, name), tq, uid):
            replaced = None
            try:
                replaced = await self.kube.replace_deployment(
                    workload.build_deployment(tq, uid=uid, replicas=existing.replicas),
                    replicas=existing.replicas, resource_version=existing.resource_version)
                log.info("updated Deployment %s/%s", ns, name)
            except ConflictError:  # changed since read (e.g. scaled): the next poll retries
                pass
            finally:
                self.wrote(ns, name, replaced)
        return existing

    async def _create(self, tq: models.TaskQueue, *, uid: str) -> DeploymentState:
        ns, name = tq.metadata.namespace or "default", workload.deployment_name(tq)
        replicas = tq.spec.scaling.minReplicas
        created = None
        try:
            created = await self.kube.create_deployment(
                workload.build_deployment(tq, uid=uid, replicas=replicas))
            log.info("created Deployment %s/%s", ns, name)
        except ConflictError:  # created meanwhile (e.g. by the previous operator leader)
            pass
        finally:
            self.wrote(ns, name, created)
        return created or DeploymentState(
            name=name, replicas=replicas, ready_replicas=0,
            selector=workload.selector_labels(tq.metadata.name), owner_uids=(uid,))
