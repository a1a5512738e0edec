"""One poll of one TaskQueue: observe (Redis) -> decide (`policy`) -> act (scale, status).

The parts, each in its own module: `observe` (one round trip to Redis), `policy` (the pure
decision), `scalein` (quiesce before removal: the count that is safe to set now), `act` (scale,
Events, status writes, metrics), `status` (the pure status), and the
state they share: `deployments` (the Deployment cache and the one `ensure` of the workload),
`redisurls` (Redis pools, Secret cache), `record` (what is kept per TaskQueue), `reaper`.
No kopf here: the handlers call these, and so do the benchmarks and tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from taskqueue.api.models import TaskQueue
from taskqueue.controller import admission, scalein, workload
from taskqueue.controller import status as statuses
from taskqueue.controller.act import Actor, record_metrics
from taskqueue.controller.deployments import Deployments
from taskqueue.controller.kube import Kube, ObjectRef
from taskqueue.controller.observe import observe
from taskqueue.controller.reaper import Reaper
from taskqueue.controller.record import Record, Records, key_of
from taskqueue.controller.redisurls import RedisPools, RedisUrls
from taskqueue.scaling import policy


@dataclass
class Poller:
    """Reads, decides and acts for TaskQueues; shared by all of them (one per operator)."""

    kube: Kube
    pools: RedisPools = field(default_factory=RedisPools)
    clock: Callable[[], float] = time.time
    records: Records = field(default_factory=Records)
    rules: admission.WorkerRules = field(default_factory=admission.WorkerRules)
    """What TaskQueue authors may run and scale (the operator's flags)."""

    def __post_init__(self) -> None:
        self.urls = RedisUrls(self.kube, clock=self.clock)
        self.deployments = Deployments(self.kube, rules=self.rules)
        """`deployments.watched` is set when the Deployment watch (a kopf handler) feeds it."""
        self.actor = Actor(self.kube, self.deployments, self.clock)
        self.reaper = Reaper(self.kube, self.pools, self.urls, self.records)

    def record(self, namespace: str, name: str) -> Record:
        """A new record for TaskQueue `namespace/name`, known to the reaper while it lives."""
        return self.records.add(Record(namespace, name))

    async def poll(self, tq: TaskQueue, *, record: Record,
                   uid: str, generation: int | None = None) -> policy.Decision:
        """Observe, decide, scale, write status. Raises SpecError for a spec it cannot use."""
        started = time.perf_counter()
        ns, name = key_of(tq)
        ref = ObjectRef(ns, name, uid)
        record.tq, record.uid = tq, uid
        record.url = await self.urls.url(tq)
        observation, error = await observe(self.pools.get(record.url), record.url, tq)
        deployment = await self.deployments.ensure(tq, uid=uid)
        state = record.state or statuses.initial_state(
            record.status, slack=statuses.status_slack(tq.spec.scaling))
        state = replace(state, replicas=deployment.replicas)
        decision = policy.decide(spec=tq.spec.scaling, observation=observation, state=state,
                                 now=self.clock(), concurrency=tq.spec.worker.concurrency,
                                 queue_order=tuple(q.key for q in tq.spec.queues))
        decision = await scalein.settle_decision(
            self.kube, self.pools.get(record.url), tq, namespace=ns, deployment=deployment,
            decision=decision, observation=observation, last_scale=state.last_scale)
        if decision.changed:
            await self.actor.scale(ref, deployment, decision, observation)
        record.state = decision.state
        await self.actor.redis_read(ref, record, error)
        now = self.clock()
        new = statuses.build_status(
            record.status, observation, decision, deployment=deployment.name,
            ready_replicas=deployment.ready_replicas, error=error, generation=generation,
            now=now)
        await self.actor.write_status(ref, record, new, now=now)
        record_metrics(ref, observation, decision, deployment, time.perf_counter() - started)
        return decision

    async def report_problem(self, ref: ObjectRef, record: Record, problem: str, *,
                             reason: str) -> None:
        """A spec the operator cannot act on: condition Ready=False and a Warning Event (once)."""
        await self.actor.problem(ref, record, problem, reason=reason)

    def forget(self, record: Record) -> None:
        """The TaskQueue is deleted: drop what is kept about it."""
        self.records.discard(record)
        if record.tq is not None:
            self.deployments.forget(record.namespace, workload.deployment_name(record.tq))
