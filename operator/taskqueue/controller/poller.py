"""One poll of one TaskQueue: observe (Redis) -> decide (`policy`) -> scale-in plan (`quiesce`) ->
act (quiesce, scale, status) -> journal (history and decision log).

The parts, each in its own module: `observe` (one round trip to Redis, which also carries the
previous poll's history appends), `policy` and `quiesce` (pure decisions), `act` (the writes:
quiesce, pod-deletion-costs, scale, Events, status, metrics), `status` and `journal` (pure: the
status, what goes to the history), and the state they share: `deployments` (the Deployment cache
and the one `ensure` of the workload), `redisurls` (Redis pools, Secret cache), `record` (what is
kept per TaskQueue: the poller is its one writer), `reaper`. No kopf here: the handlers call
these, and so do the benchmarks and tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import redis
import redis.asyncio as aioredis

from taskqueue.api import redact
from taskqueue.api.models import TaskQueue
from taskqueue.controller import admission, journal, schedules, workload
from taskqueue.controller import status as statuses
from taskqueue.controller.act import Actor, record_metrics
from taskqueue.controller.deployments import Deployments
from taskqueue.controller.kube import DeploymentState, Kube, ObjectRef
from taskqueue.controller.observe import Observed, observe
from taskqueue.controller.reaper import Reaper
from taskqueue.controller.record import Record, Records, key_of, parse
from taskqueue.controller.redisurls import RedisPools, RedisUrls
from taskqueue.redisio import flowops
from taskqueue.scaling import policy, quiesce
from taskqueue.scaling.observation import QueueObservation
from taskqueue.telemetry import metrics
from taskqueue.wire import flow, keys
from taskqueue.wire.flow import QueueFlow

log = logging.getLogger(__name__)

FLOW_WRITTEN = "FlowControlWritten"
SCHEDULES_FIRED = "SchedulesFired"
"""The conditions of the poll's own writes to Redis (`status.WRITES`)."""
KEPT_PER_OWNERSHIP = tuple(f.name for f in fields(Record)
                           if f.name not in ("namespace", "name", "uid", "wake"))
"""The `Record` fields polls build up, reset when a replica (re)takes the TaskQueue."""


@dataclass
class Poller:
    """Reads, decides and acts for TaskQueues; shared by all of them (one per operator)."""

    kube: Kube
    pools: RedisPools = field(default_factory=RedisPools)
    clock: Callable[[], float] = time.time
    records: Records = field(default_factory=Records)
    rules: admission.WorkerRules = field(default_factory=admission.WorkerRules)
    """What TaskQueue authors may run and scale (the operator's flags)."""
    shard: str | None = None
    """This replica's identity when the operator is sharded (status.shard of what it polls)."""

    def __post_init__(self) -> None:
        self.urls = RedisUrls(self.kube, clock=self.clock)
        self.deployments = Deployments(self.kube, rules=self.rules)
        """`deployments.watched` is set when the Deployment watch (a kopf handler) feeds it."""
        self.actor = Actor(self.kube, self.deployments, self.clock)
        self.reaper = Reaper(self.kube, self.pools, self.urls, self.records)

    def record(self, namespace: str, name: str) -> Record:
        """A new record for TaskQueue `namespace/name`, known to the reaper while it lives."""
        return self.records.add(Record(namespace, name))

    def take_over(self, record: Record, status: dict[str, Any] | None) -> None:
        """Start acting on a TaskQueue (first poll, or taken over from another replica of a
        sharded operator): forget what an earlier ownership kept, start from `status`."""
        fresh = Record(record.namespace, record.name, uid=record.uid)
        for name in KEPT_PER_OWNERSHIP:
            setattr(record, name, getattr(fresh, name))
        self.resume(record, status)

    def resume(self, record: Record, status: dict[str, Any] | None) -> None:
        """Start from the status the TaskQueue has (a restart), unless polls already ran."""
        if record.status is None and status:
            record.status = dict(status)
            record.last_scale = statuses.last_scale(record.status)

    def parse(self, record: Record, body: Mapping[str, Any]) -> TaskQueue:
        """The TaskQueue in `body` (SpecError when it does not validate), validated once per
        metadata.generation: the API server raises it on every change of the spec, not on a
        status write or a label, so a poll of the same generation reuses the last poll's."""
        generation = body["metadata"].get("generation")
        if record.tq is not None and generation is not None and record.generation == generation:
            return record.tq
        return parse(dict(body))

    async def poll(self, tq: TaskQueue, *, record: Record,
                   uid: str, generation: int | None = None) -> policy.Outcome:
        """Observe, decide, scale, write status. Raises SpecError for a spec it cannot use."""
        started = time.perf_counter()
        ns, name = key_of(tq)
        ref = ObjectRef(ns, name, uid)
        url = await self.urls.url(tq)
        if record.tq is not tq or record.schema is None:
            record.schema = keys.KeySchema.from_spec(tq.spec)
        record.tq, record.generation, record.uid, record.url = tq, generation, uid, url
        client, schema = self.pools.get(url), record.schema
        refusals = await self.fire(ref, record, client, schema, tq)
        observed = await observe(client, url, tq, schema, appends=record.journal.pending)
        observation = observed.observation
        flow, flow_refusal = await self.sync_flow(client, schema, tq, observed)
        refusals.update(flow_refusal)
        await self._appended(ref, record, observed)
        await self._refusals(ref, record, refusals)
        deployment = await self.deployments.ensure(tq, uid=uid)
        state = record.state or statuses.initial_state(
            record.status, slack=statuses.status_slack(tq.spec.scaling, record.status))
        now = self.clock()
        decision = policy.decide(spec=tq.spec.scaling, observation=observation,
                                 state=replace(state, replicas=deployment.replicas), now=now,
                                 concurrency=tq.spec.worker.concurrency,
                                 queue_order=schema.queue_keys, flow=flow)
        outcome = policy.Outcome(decision, await self._scale_in(
            ns, client, schema, deployment, decision, observation))
        if outcome.changed:
            await self.actor.scale(ref, deployment, outcome)
            record.last_scale = now
        record.state = decision.state
        await self.actor.redis_read(ref, last=record.last_error, error=observed.error)
        record.last_error = observed.error
        record.journal = journal.after_poll(
            record.journal, spec=tq.spec.history, schema=schema, outcome=outcome,
            observation=observation, now=now,
            fleet=journal.Fleet(outcome.replicas, deployment.pods, deployment.ready_replicas))
        written = self.clock()
        built = statuses.build_status(
            record.status, observation, outcome, deployment=deployment.name,
            ready_replicas=deployment.ready_replicas, error=observed.error,
            generation=generation, last_scale=record.last_scale, now=written, flow=flow,
            shard=self.shard)
        built = statuses.with_writes(statuses.with_schedules(
            built, schedules.status(tq.spec, record.fired, now=written)), refusals, now=written)
        await self._write_status(ref, record, built, now=written)
        record_metrics(ref, observation, outcome, deployment, time.perf_counter() - started,
                       flow)
        return outcome

    async def sync_flow(self, client: aioredis.Redis, schema: keys.KeySchema, tq: TaskQueue,
                        observed: Observed,
                        ) -> tuple[tuple[QueueFlow, ...], dict[str, str | None]]:
        """Write the spec's flow limits and pauses into Redis where they differ from what the
        observe round trip read (no call while they are the same); every queue's flow control
        as it then stands (`taskqueue pause` included), and the write's refusal for condition
        FlowControlWritten (none when Redis was not reached). Redis unusable: the spec's, as
        declared."""
        declared = flow.declared(tq.spec.queues)
        if observed.flow is None:
            if observed.flow_error is None:  # Redis not read: RedisReachable says so
                return declared, {}
            return declared, {FLOW_WRITTEN: observed.flow_error}
        try:
            flows = await flowops.write_changes(client, schema, declared, *observed.flow)
        except redis.ResponseError as exc:
            return declared, {FLOW_WRITTEN: f"{type(exc).__name__}: {redact.scrub(str(exc))}"}
        except (redis.RedisError, OSError) as exc:
            log.warning("flow control of %s not written to Redis: %s", schema.flow, exc)
            return declared, {}
        return flows, {FLOW_WRITTEN: None}

    async def fire(self, ref: ObjectRef, record: Record, client: aioredis.Redis,
                   schema: keys.KeySchema, tq: TaskQueue) -> dict[str, str | None]:
        """Fire the schedules' slots up to the horizon (one round trip, none without schedules);
        the call's refusal for condition SchedulesFired (none when Redis was not reached)."""
        names = {s.name for s in tq.spec.schedules}
        record.fired = {k: v for k, v in record.fired.items() if k in names}
        if not names:
            return {}
        plans = schedules.plan(tq.spec, schema, seen=record.schedules_seen, now=self.clock(),
                               horizon=schedules.fire_horizon(
                                   policy.due_horizon(tq.spec.scaling)))
        fired, refused = await self.actor.fire(ref, client, schema, plans)
        if fired is None:
            return {} if refused is None else {SCHEDULES_FIRED: refused}
        record.schedules_seen = schedules.seen_after(fired)
        record.fired.update({f.name: f for f in fired})
        await self.actor.schedule_notices(ref, schedules.notices(tq.spec, fired))
        return {SCHEDULES_FIRED: None}

    async def _refusals(self, ref: ObjectRef, record: Record,
                        refusals: dict[str, str | None]) -> None:
        """An Event per write Redis refused with a new error, or took again (once each)."""
        for kind, refused in refusals.items():
            await self.actor.write_refused(ref, kind, last=record.refused.get(kind),
                                           refused=refused)
            record.refused[kind] = refused

    async def _scale_in(self, namespace: str, client: aioredis.Redis, schema: keys.KeySchema,
                        deployment: DeploymentState, decision: policy.Decision,
                        observation: QueueObservation | None) -> quiesce.Settled:
        """The scale-in of `decision` planned (`quiesce`, pure) and carried out (`act`)."""
        pods: tuple[quiesce.PodView, ...] = ()
        if observation is not None and quiesce.needs_pods(
                target=decision.replicas, current=deployment.replicas, observation=observation):
            pods = await self.actor.worker_pods(namespace, deployment, observation)
        plan = quiesce.plan_scale_in(target=decision.replicas, current=deployment.replicas,
                                     observation=observation, pods=pods)
        return await self.actor.scale_in(namespace, client, schema, plan)

    async def _appended(self, ref: ObjectRef, record: Record, observed: Observed) -> None:
        """The pending history appends reached Redis: drop them, and report a refusal (once)."""
        if not (observed.sent and record.journal.pending):
            return
        record.journal = replace(record.journal, pending=())
        await self.actor.history_refused(ref, last=record.history_error, refused=observed.refused)
        record.history_error = observed.refused[-1] if observed.refused else None

    async def report_problem(self, ref: ObjectRef, record: Record, problem: str, *,
                             reason: str) -> None:
        """A spec the operator cannot act on: condition Ready=False and a Warning Event (once)."""
        if problem != record.last_error:
            await self.actor.problem(ref, problem, reason=reason)
        record.last_error = problem
        now = self.clock()
        new = statuses.problem_status(record.status, problem, reason=reason, now=now,
                                      shard=self.shard)
        await self._write_status(ref, record, new, now=now, throttle=False)

    async def _write_status(self, ref: ObjectRef, record: Record, new: statuses.Status, *,
                            now: float, throttle: bool = True) -> None:
        """Patch the status when it changed (drift alone once `statuses.drift_interval` passed)."""
        if new == record.status:
            return
        if throttle and not statuses.due(record.status, new, written=record.status_written,
                                         now=now):
            return
        await self.actor.write_status(ref, new)
        record.status, record.status_written = new, now

    def release(self, record: Record) -> None:
        """Another replica of a sharded operator acts on the TaskQueue now: stop reporting its
        gauges (what the record holds is reset when it is taken over again)."""
        metrics.forget_taskqueue(record.namespace, record.name)

    def forget(self, record: Record) -> None:
        """The TaskQueue is deleted: drop what is kept about it."""
        metrics.forget_taskqueue(record.namespace, record.name)
        self.records.discard(record)
        if record.tq is not None:
            self.deployments.forget(record.namespace, workload.deployment_name(record.tq))
