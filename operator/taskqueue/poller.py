"""One poll of one TaskQueue: read (Redis, Deployment) -> decide (`policy`) -> act (scale, status).

Also the two other things the operator does to a TaskQueue's workload: `ensure_workload` (create
or update the worker Deployment) and `reap` (requeue a departed pod's in-flight tasks at once).
No kopf here: the handlers call these, and so do the benchmarks and tests. Kubernetes I/O goes
through `taskqueue.kube.Kube`, Redis through `taskqueue.queueops`.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import redis.asyncio as aioredis
from pydantic import ValidationError

from taskqueue import (
    connection,
    keys,
    manifest,
    metrics,
    models,
    policy,
    queueops,
    tlsfiles,
    workload,
)
from taskqueue.kube import (
    ConflictError,
    DeploymentState,
    Kube,
    NotFoundError,
    ObjectRef,
    newer_or_same,
)
from taskqueue.observation import QueueObservation

log = logging.getLogger("taskqueue.operator")

SECRET_TTL_SECONDS = 30.0
DEPLOYMENT_REFRESH_POLLS = 12
"""With the Deployment watch on, a cached Deployment no watch event has refreshed is re-read
(GET) after this many polls anyway: a safety net for a missed event."""
STATUS_DRIFT_SECONDS = 15.0
"""A status change that is only `oldestTaskAgeSeconds`/`lastActiveTime` moving on is written at
most this often; any other change is written at once."""
_DRIFT_FIELDS = ("oldestTaskAgeSeconds", "lastActiveTime")


def redact(url: str) -> str:
    """`url` without its password (for logs, events and status); see connection.redact."""
    return connection.redact(url)


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_iso(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class SpecError(Exception):
    """A TaskQueue the schema accepted but the operator cannot act on; names field and fix."""


class RedisPools:
    """One client (one connection pool) per Redis URL, shared by every TaskQueue using it."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._clients: dict[str, aioredis.Redis] = {}

    def get(self, url: str) -> aioredis.Redis:
        found = self._clients.get(url)
        if found is None:
            found = connection.async_client(
                connection.RedisSettings.from_dsn(url), decode_responses=True,
                socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
                health_check_interval=30)
            self._clients[url] = found
        return found

    def __len__(self) -> int:
        return len(self._clients)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.aclose()


@dataclass
class Memory:
    """What the operator keeps in memory per TaskQueue between polls (kopf's memo)."""

    state: policy.PolicyState | None = None
    status: dict[str, Any] | None = None
    """The status last written (or read from the object)."""
    status_written: float | None = None
    last_error: str | None = None


@dataclass
class Target:
    """The last known spec and Redis URL of a TaskQueue (for the reaper)."""

    tq: models.TaskQueue
    uid: str
    url: str


@dataclass
class Poller:
    """Reads, decides and acts for TaskQueues; shared by all of them (one per operator)."""

    kube: Kube
    pools: RedisPools = field(default_factory=RedisPools)
    clock: Callable[[], float] = time.time
    targets: dict[tuple[str, str], Target] = field(default_factory=dict)
    watch_deployments: bool = False
    """True when `saw_deployment` is fed by a watch of the Deployments the operator owns (the
    kopf handler): then a poll uses the last seen Deployment instead of a GET."""
    _secrets: dict[tuple[str, str, str], tuple[float, str]] = field(default_factory=dict)
    _sentinel_passwords: dict[tuple[str, str, str], tuple[float, str]] = field(
        default_factory=dict)
    _deployments: dict[tuple[str, str], _SeenDeployment] = field(default_factory=dict)
    _floors: dict[tuple[str, str], str] = field(default_factory=dict)
    """resourceVersion of our last write (or of the deletion) of a Deployment not seen since:
    older watch events still on their way are ignored."""

    # -- the Deployment cache ----------------------------------------------------------------
    def saw_deployment(self, namespace: str, name: str, state: DeploymentState, *,
                       deleted: bool = False) -> None:
        """A watch event of an owned Deployment (kept unless older than what we know)."""
        key = (namespace, name)
        if deleted:
            self._deployments.pop(key, None)
            owner = state.selector.get(workload.TASKQUEUE_LABEL)
            if (namespace, owner) in self.targets and state.resource_version:
                self._floors[key] = state.resource_version
            return
        self._keep(key, state, uses=0)

    def _keep(self, key: tuple[str, str], state: DeploymentState, *, uses: int) -> None:
        rv = state.resource_version
        floor, seen = self._floors.get(key), self._deployments.get(key)
        if floor is not None and not newer_or_same(rv, floor):
            return
        if seen is not None and not newer_or_same(rv, seen.state.resource_version):
            return
        self._deployments[key] = _SeenDeployment(state, uses)
        self._floors.pop(key, None)

    def _wrote_deployment(self, namespace: str, name: str, resource_version: str | None) -> None:
        """After our own write: the next read is a GET, or the watch event of this write."""
        key = (namespace, name)
        self._deployments.pop(key, None)
        if resource_version:
            self._floors[key] = resource_version

    async def read_deployment(self, namespace: str, name: str, *,
                              owned: bool = True) -> DeploymentState | None:
        """The Deployment: the last one seen by the watch when `owned` (and watched), else GET."""
        key = (namespace, name)
        cache = owned and self.watch_deployments
        if cache:
            seen = self._deployments.get(key)
            if seen is not None and seen.uses < DEPLOYMENT_REFRESH_POLLS:
                seen.uses += 1
                return seen.state
        state = await self.kube.get_deployment(namespace, name)
        if cache:
            if state is None:
                self._deployments.pop(key, None)
            else:
                self._keep(key, state, uses=1)
        return state

    # -- reading -----------------------------------------------------------------------------
    async def redis_url(self, tq: models.TaskQueue) -> str:
        url = await self._redis_url(tq)
        ns = tq.metadata.namespace or "default"
        sentinel = tq.spec.redis.sentinel
        if sentinel is not None and sentinel.passwordSecretRef is not None:
            url = connection.with_sentinel_password(url, await self._sentinel_password(
                ns, sentinel.passwordSecretRef))
        tls = tq.spec.redis.tls
        if tls is None:
            return url
        try:
            folder = await tlsfiles.materialize(self.kube, ns, tls)
        except NotFoundError as e:
            raise SpecError(str(e)) from None
        return connection.with_tls_dir(url, tls, str(folder))

    async def _sentinel_password(self, ns: str, ref: models.SecretKeyRef) -> str:
        key = (ns, ref.name, ref.key)
        cached = self._sentinel_passwords.get(key)
        if cached is not None and self.clock() - cached[0] < SECRET_TTL_SECONDS:
            return cached[1]
        try:
            value = (await self.kube.secret_value(ns, ref.name, ref.key)).strip()
        except NotFoundError:
            raise SpecError(
                f"spec.redis.sentinel.passwordSecretRef: Secret {ref.name!r} with key "
                f"{ref.key!r} not found in namespace {ns}; create it with the sentinels' "
                "password as the value") from None
        self._sentinel_passwords[key] = (self.clock(), value)
        return value

    async def _redis_url(self, tq: models.TaskQueue) -> str:
        ref = tq.spec.redis.urlSecretRef
        if ref is None:
            assert tq.spec.redis.url is not None
            return connection.dsn_for(tq.spec.redis.url, tq.spec.redis.mode,
                                     sentinel=tq.spec.redis.sentinel)
        ns = tq.metadata.namespace or "default"
        key = (ns, ref.name, ref.key)
        cached = self._secrets.get(key)
        if cached is not None and self.clock() - cached[0] < SECRET_TTL_SECONDS:
            return cached[1]
        try:
            url = (await self.kube.secret_value(ns, ref.name, ref.key)).strip()
        except NotFoundError:
            raise SpecError(
                f"spec.redis.urlSecretRef: Secret {ref.name!r} with key {ref.key!r} not found in "
                f"namespace {ns}; create it with the Redis URL as the value"
            ) from None
        url = connection.dsn_for(url, tq.spec.redis.mode, sentinel=tq.spec.redis.sentinel)
        self._secrets[key] = (self.clock(), url)
        return url

    async def observe(self, tq: models.TaskQueue) -> tuple[QueueObservation | None, str | None]:
        """The observation, or None and the error (password-free) when Redis cannot be read."""
        url = await self.redis_url(tq)
        target = self.targets.get(_key(tq))
        if target is not None:
            target.url = url
        try:
            observation = await asyncio.wait_for(
                queueops.observe(self.pools.get(url), keys.KeySchema.from_spec(tq.spec)),
                timeout=tq.spec.scaling.pollIntervalSeconds,
            )
        except (aioredis.RedisError, OSError, TimeoutError) as e:
            return None, f"{redact(url)}: {type(e).__name__}: {redact(str(e))}"
        return observation, None

    # -- the workload ------------------------------------------------------------------------
    async def ensure_workload(self, tq: models.TaskQueue, *, uid: str) -> DeploymentState:
        """The Deployment to scale: created or updated when the TaskQueue owns it."""
        ns, name = tq.metadata.namespace or "default", workload.deployment_name(tq)
        existing = await self.read_deployment(ns, name, owned=tq.spec.scaleTargetRef is None)
        if tq.spec.scaleTargetRef is not None:
            if existing is None:
                raise SpecError(
                    f"spec.scaleTargetRef.name: Deployment {name!r} not found in namespace {ns}; "
                    "create it or fix the name"
                )
            return existing
        replicas = tq.spec.scaling.minReplicas
        body = workload.build_deployment(tq, uid=uid, replicas=replicas)
        if existing is None:
            rv = None
            try:
                rv = await self.kube.create_deployment(body)
                log.info("created Deployment %s/%s", ns, name)
            except ConflictError:  # created meanwhile (the create handler and a poll race)
                pass
            finally:
                self._wrote_deployment(ns, name, rv)
            return DeploymentState(name=name, replicas=replicas, ready_replicas=0,
                                   selector=workload.selector_labels(tq.metadata.name),
                                   owner_uids=(uid,))
        if uid not in existing.owner_uids:
            raise SpecError(
                f"Deployment {name!r} exists and is not owned by this TaskQueue; delete it, or "
                f"set spec.scaleTargetRef.name: {name} to scale it without owning it"
            )
        wanted = body["metadata"]["annotations"][workload.SPEC_HASH_ANNOTATION]
        if existing.spec_hash != wanted:
            rv = None
            try:
                rv = await self.kube.replace_deployment(
                    body, replicas=existing.replicas, resource_version=existing.resource_version)
                log.info("updated Deployment %s/%s", ns, name)
            except ConflictError:  # changed since read (e.g. scaled): the next poll retries
                pass
            finally:
                self._wrote_deployment(ns, name, rv)
        return existing

    # -- one poll ----------------------------------------------------------------------------
    async def poll(self, tq: models.TaskQueue, *, uid: str, memory: Memory,
                   generation: int | None = None) -> policy.Decision:
        """Observe, decide, scale, write status. Raises SpecError for a spec it cannot use."""
        started = time.perf_counter()
        ref = ObjectRef(tq.metadata.namespace or "default", tq.metadata.name, uid)
        target = self.targets.setdefault(_key(tq), Target(tq, uid, ""))
        target.tq, target.uid = tq, uid
        observation, error = await self.observe(tq)
        deployment = await self.ensure_workload(tq, uid=uid)
        state = memory.state or initial_state(memory.status,
                                              slack=status_slack(tq.spec.scaling))
        state = replace(state, replicas=deployment.replicas)
        decision = policy.decide(spec=tq.spec.scaling, observation=observation, state=state,
                                 now=self.clock())
        if decision.changed:
            await self._scale(ref, deployment, decision, observation)
        memory.state = decision.state
        await self._report_error(ref, memory, error)
        status = build_status(memory.status, observation, decision, deployment, error,
                              generation=generation)
        now = self.clock()
        if status != memory.status and not (
                drift_only(memory.status, status) and memory.status_written is not None
                and now - memory.status_written < STATUS_DRIFT_SECONDS):
            await self.kube.patch_status(ref.namespace, ref.name, status)
            memory.status, memory.status_written = status, now
        record_metrics(ref, observation, decision, deployment, error is not None,
                       time.perf_counter() - started)
        return decision

    async def _scale(self, ref: ObjectRef, deployment: DeploymentState,
                     decision: policy.Decision, observation: QueueObservation | None) -> None:
        down = decision.replicas < decision.previous
        if down and observation is not None:
            await self.mark_deletion_costs(ref.namespace, deployment, observation)
        rv = None
        try:
            rv = await self.kube.scale_deployment(ref.namespace, deployment.name,
                                                  decision.replicas)
        finally:
            self._wrote_deployment(ref.namespace, deployment.name, rv)
        direction = "down" if down else "up"
        metrics.SCALE_EVENTS.labels(ref.namespace, ref.name, direction).inc()
        message = f"{deployment.name} {decision.previous} -> {decision.replicas}: {decision.reason}"
        log.info("scaled %s/%s %s", ref.namespace, ref.name, message)
        await self.kube.event(ref, type="Normal", reason=f"Scaled{direction.capitalize()}",
                              message=message)

    async def mark_deletion_costs(self, namespace: str, deployment: DeploymentState,
                                  observation: QueueObservation) -> int:
        """Annotate each pod with the tasks it holds; returns how many pods were patched."""
        pods = [p for p in await self.kube.list_pods(namespace, deployment.selector)
                if not p.deleting]
        held = {w.worker_id: w.in_flight for w in observation.workers}
        costs = workload.deletion_costs([p.name for p in pods], held)
        stale = [p.name for p in pods if p.deletion_cost != costs[p.name]]
        await asyncio.gather(*(
            self.kube.annotate_pod(namespace, name,
                                   {workload.DELETION_COST_ANNOTATION: costs[name]})
            for name in stale
        ), return_exceptions=True)
        return len(stale)

    async def _report_error(self, ref: ObjectRef, memory: Memory, error: str | None) -> None:
        if error is None:
            metrics_ok = memory.last_error is not None
            memory.last_error = None
            if metrics_ok:
                await self.kube.event(ref, type="Normal", reason="RedisReachable",
                                      message="Redis can be read again")
            return
        metrics.REDIS_ERRORS.labels(ref.namespace, ref.name).inc()
        if error != memory.last_error:
            log.warning("redis unreachable for %s/%s: %s", ref.namespace, ref.name, error)
            await self.kube.event(ref, type="Warning", reason="RedisUnreachable", message=error)
        memory.last_error = error

    async def report_problem(self, ref: ObjectRef, memory: Memory, problem: str, *,
                             reason: str) -> None:
        """A spec the operator cannot act on: condition Ready=False and a Warning Event (once)."""
        if problem != memory.last_error:
            log.warning("%s/%s: %s", ref.namespace, ref.name, problem)
            await self.kube.event(ref, type="Warning", reason=reason, message=problem)
        memory.last_error = problem
        status = {**(memory.status or {})}
        status["conditions"] = merge_conditions(
            status.get("conditions", []), [condition("Ready", False, reason, problem)])
        status["reason"] = problem
        if status != memory.status:
            await self.kube.patch_status(ref.namespace, ref.name, status)
            memory.status = status

    # -- the reaper --------------------------------------------------------------------------
    async def reap(self, namespace: str, pod: str, taskqueue: str) -> tuple[int, int]:
        """Requeue what worker `pod` held, atomically; returns (requeued, dead-lettered)."""
        target = self.targets.get((namespace, taskqueue))
        if target is None or not target.url:
            target = await self._load_target(namespace, taskqueue)
        client = self.pools.get(target.url)
        requeued, dead = await queueops.recover_worker(
            client, keys.KeySchema.from_spec(target.tq.spec), worker_id=pod,
            max_attempts=target.tq.spec.retry.maxAttempts, reason=f"pod {namespace}/{pod} gone")
        if requeued or dead:
            message = f"pod {pod} is gone: requeued {requeued} task(s), dead-lettered {dead}"
            log.info("%s/%s: %s", namespace, taskqueue, message)
            await self.kube.event(ObjectRef(namespace, taskqueue, target.uid), type="Normal",
                                  reason="RecoveredTasks", message=message)
        return requeued, dead

    async def _load_target(self, namespace: str, name: str) -> Target:
        body = await self.kube.get_taskqueue(namespace, name)
        tq = manifest.parse(body)
        target = Target(tq, str(body["metadata"]["uid"]), await self.redis_url(tq))
        self.targets[(namespace, name)] = target
        return target

    def forget(self, namespace: str, name: str) -> None:
        target = self.targets.pop((namespace, name), None)
        if target is not None:
            key = (namespace, workload.deployment_name(target.tq))
            self._deployments.pop(key, None)
            self._floors.pop(key, None)


@dataclass
class _SeenDeployment:
    state: DeploymentState
    uses: int = 0
    """Polls that used this state since the watch event (or GET) that brought it."""


def _key(tq: models.TaskQueue) -> tuple[str, str]:
    return (tq.metadata.namespace or "default", tq.metadata.name)


def parse(body: dict[str, Any]) -> models.TaskQueue:
    """The TaskQueue in `body`; SpecError (naming field and fix) when it does not validate."""
    try:
        return manifest.parse(body)
    except (manifest.ManifestError, ValidationError) as e:
        raise SpecError(f"invalid spec: {e}") from None


def status_slack(scaling: models.ScalingSpec) -> float:
    """How far `status.lastActiveTime` can lag the last poll that saw work (throttled writes)."""
    return STATUS_DRIFT_SECONDS + scaling.pollIntervalSeconds


def initial_state(status: dict[str, Any] | None, *, slack: float = 0.0) -> policy.PolicyState:
    """The policy state after a restart: the durable part comes from the TaskQueue's status.

    While a TaskQueue has work, `lastActiveTime` is written at most every STATUS_DRIFT_SECONDS
    (`drift_only`), so when the last status written shows work, the work may have lasted up to
    `slack` longer: the cooldown resumes from `lastActiveTime + slack` (a restart can delay a
    scale-in, never cause one). The status written when the work ends is never throttled.
    """
    status = status or {}
    last_active = from_iso(status.get("lastActiveTime"))
    busy = (status.get("totalBacklog") or 0) + (status.get("inFlight") or 0) > 0
    if last_active is not None and busy:
        last_active += slack
    return policy.PolicyState(
        replicas=0,
        last_active=last_active,
        last_scale=from_iso(status.get("lastScaleTime")),
    )


def drift_only(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """True when `new` differs from `old` only in `oldestTaskAgeSeconds`/`lastActiveTime`."""
    if old is None:
        return False
    def rest(s: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s.items() if k not in _DRIFT_FIELDS}
    return rest(old) == rest(new) and all((k in old) == (k in new) for k in _DRIFT_FIELDS)


def condition(kind: str, ok: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True" if ok else "False", "reason": reason,
            "message": message}


def merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`new` conditions keeping lastTransitionTime where the status did not change."""
    before = {c["type"]: c for c in old}
    merged = {c["type"]: c for c in old}
    for c in new:
        prev = before.get(c["type"])
        same = prev is not None and prev.get("status") == c["status"]
        stamp = prev.get("lastTransitionTime") if same and prev else iso(time.time())
        merged[c["type"]] = {**c, "lastTransitionTime": stamp}
    return sorted(merged.values(), key=lambda c: str(c["type"]))


def build_status(previous: dict[str, Any] | None, observation: QueueObservation | None,
                 decision: policy.Decision, deployment: DeploymentState, error: str | None,
                 *, generation: int | None) -> dict[str, Any]:
    """The TaskQueue's status after a poll (counts kept from before when Redis was unreadable)."""
    previous = previous or {}
    status = {k: previous[k] for k in _COUNTS if k in previous}
    if observation is not None:
        status.update(counts(observation, decision.state))
    state = decision.state
    status.update({
        "desiredReplicas": decision.replicas,
        "replicas": deployment.ready_replicas,
        "lastScaleTime": iso(state.last_scale),
        "lastActiveTime": iso(state.last_active),
        "reason": decision.reason,
        "observedGeneration": generation,
    })
    status = {k: v for k, v in status.items() if v is not None}
    scaling_ok = error is None and not decision.reason.startswith("paused")
    scaling_reason = "Paused" if decision.reason.startswith("paused") else (
        "RedisUnreachable" if error else ("Scaled" if decision.changed else "Steady"))
    status["conditions"] = merge_conditions(previous.get("conditions", []), [
        condition("Ready", True, "DeploymentReady", f"scaling Deployment {deployment.name}"),
        condition("RedisReachable", error is None, "Error" if error else "Read", error or ""),
        condition("Scaling", scaling_ok, scaling_reason, decision.reason),
    ])
    return status


_COUNTS = ("backlog", "totalBacklog", "inFlight", "delayed", "deadLetter",
           "oldestTaskAgeSeconds", "throughputPerReplica", "workers")


def counts(observation: QueueObservation, state: policy.PolicyState) -> dict[str, Any]:
    age = observation.oldest_task_age
    rate = state.throughput_per_replica
    return {
        "backlog": dict(observation.backlog),
        "totalBacklog": observation.queued,
        "inFlight": observation.in_flight,
        "delayed": observation.delayed,
        "deadLetter": observation.dead_letter,
        "oldestTaskAgeSeconds": None if age is None else round(age),
        "throughputPerReplica": None if rate is None else float(f"{rate:.3g}"),
        "workers": observation.live_workers,
    }


def record_metrics(ref: ObjectRef, observation: QueueObservation | None,
                   decision: policy.Decision, deployment: DeploymentState, redis_error: bool,
                   seconds: float) -> None:
    labels = (ref.namespace, ref.name)
    metrics.POLL_DURATION.labels(*labels).observe(seconds)
    metrics.DESIRED_REPLICAS.labels(*labels).set(decision.replicas)
    metrics.REPLICAS.labels(*labels).set(deployment.ready_replicas)
    if observation is None or redis_error:
        return
    for queue, n in observation.backlog.items():
        metrics.BACKLOG.labels(*labels, queue).set(n)
    metrics.IN_FLIGHT.labels(*labels).set(observation.in_flight)
    metrics.DELAYED.labels(*labels).set(observation.delayed)
    metrics.DEAD_LETTER.labels(*labels).set(observation.dead_letter)
    if decision.state.throughput_per_replica is not None:
        metrics.THROUGHPUT_PER_REPLICA.labels(*labels).set(decision.state.throughput_per_replica)
    age = observation.oldest_task_age
    if age is not None:
        metrics.OLDEST_TASK_AGE.labels(*labels).set(age)
