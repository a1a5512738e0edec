"""Act on a poll's decision: carry out the scale-in plan (`taskqueue.scaling.quiesce`: quiesce in
Redis, pod-deletion-costs), scale the Deployment, post Events, write the status (built by
`taskqueue.controller.status`), export the metrics. The writes of a poll to Redis and Kubernetes;
what they write is decided before, and what they did is returned to the poller, which keeps it
(the `Record`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import redis.asyncio as aioredis

from taskqueue.api import redact
from taskqueue.controller import schedules, workload
from taskqueue.controller import status as statuses
from taskqueue.controller.deployments import Deployments
from taskqueue.controller.kube import DeploymentState, Kube, ObjectRef
from taskqueue.redisio import queueops
from taskqueue.scaling import policy, quiesce
from taskqueue.scaling.observation import QueueObservation
from taskqueue.telemetry import metrics
from taskqueue.wire import keys
from taskqueue.wire.flow import QueueFlow

log = logging.getLogger("taskqueue.operator")


class Actor:
    """Writes to Kubernetes and Redis on behalf of the polls (one per operator)."""

    def __init__(self, kube: Kube, deployments: Deployments, clock: Callable[[], float]) -> None:
        self.kube = kube
        self.deployments = deployments
        self.clock = clock

    async def worker_pods(self, namespace: str, deployment: DeploymentState,
                          observation: QueueObservation) -> tuple[quiesce.PodView, ...]:
        """The active pods of `deployment` as the scale-in sees them (in flight from
        `observation`, worker id = pod name)."""
        held = {w.worker_id: w.in_flight for w in observation.workers}
        return tuple(
            quiesce.PodView(p.name, held.get(p.name, 0), p.created,
                            quiesce.replicaset_rank(scheduled=p.scheduled, phase=p.phase,
                                                    ready=p.ready), p.deletion_cost)
            for p in await self.kube.list_pods(namespace, deployment.selector) if p.active)

    async def scale_in(self, namespace: str, client: aioredis.Redis, schema: keys.KeySchema,
                       plan: quiesce.Plan) -> quiesce.Settled:
        """Carry out `plan`: the quiesced-set writes (one MULTI/EXEC), then the pod-deletion-costs
        the reply gives; the count that is safe to set now. A Redis error defers the scale-in
        (nothing is removed this poll). On a poll with nothing to write it does no I/O."""
        after: dict[str, int] = {}
        if plan.writes:
            try:
                after = await queueops.quiesce(client, schema, add=plan.quiesce,
                                               remove=plan.release)
            except (aioredis.RedisError, OSError) as e:
                return plan.failed(type(e).__name__)
        if plan.settled is not None:
            return plan.settled
        costs = plan.costs(after)
        results = await asyncio.gather(*(
            self.kube.annotate_pod(namespace, p.name,
                                   {workload.DELETION_COST_ANNOTATION: costs[p.name]})
            for p in plan.pods if p.deletion_cost != costs[p.name]
        ), return_exceptions=True)
        return plan.settle(after, annotated=not any(isinstance(r, BaseException)
                                                   for r in results))

    async def scale(self, ref: ObjectRef, deployment: DeploymentState,
                    outcome: policy.Outcome) -> None:
        """Set the replicas of `outcome` (a change) on `deployment`, with an Event."""
        down = outcome.replicas < outcome.previous
        rv = None
        try:
            rv = await self.kube.scale_deployment(ref.namespace, deployment.name,
                                                  outcome.replicas)
        finally:
            self.deployments.scaled(ref.namespace, deployment.name, outcome.replicas, rv)
        direction = "down" if down else "up"
        metrics.SCALE_EVENTS.labels(ref.namespace, ref.name, direction).inc()
        message = f"{deployment.name} {outcome.previous} -> {outcome.replicas}: {outcome.reason}"
        log.info("scaled %s/%s %s", ref.namespace, ref.name, message)
        await self.kube.event(ref, type="Normal", reason=f"Scaled{direction.capitalize()}",
                              message=message)

    async def redis_read(self, ref: ObjectRef, *, last: str | None, error: str | None) -> None:
        """An Event when Redis becomes unreadable (or a new error, `last` being the last one
        reported) and when it is read again."""
        if error is None:
            if last is not None:
                await self.kube.event(ref, type="Normal", reason="RedisReachable",
                                      message="Redis can be read again")
            return
        metrics.REDIS_ERRORS.labels(ref.namespace, ref.name).inc()
        if error != last:
            log.warning("redis unreachable for %s/%s: %s", ref.namespace, ref.name, error)
            await self.kube.event(ref, type="Warning", reason="RedisUnreachable", message=error)

    async def history_refused(self, ref: ObjectRef, *, last: str | None,
                              refused: tuple[str, ...]) -> None:
        """A Warning Event when Redis refuses a history append with a new error (`last` being
        the last one reported)."""
        for error in refused:
            if error != last:
                message = (f"history not written: {error} (the operator's Redis user needs "
                           "XADD: `python -m taskqueue.redisio.acl operator`; "
                           "spec.history.retentionSeconds: 0 turns the history off)")
                log.warning("%s/%s: %s", ref.namespace, ref.name, message)
                await self.kube.event(ref, type="Warning", reason="HistoryNotWritten",
                                      message=message)

    async def fire(self, ref: ObjectRef, client: aioredis.Redis, schema: keys.KeySchema,
                   plans: list[schedules.Plan],
                   ) -> tuple[list[schedules.Fired] | None, str | None]:
        """The schedules' slots of `plans` fired (one fire.lua call), and Redis's refusal
        (password-free; None: no refusal). Nothing fired when Redis refused the call (NOPERM,
        WRONGTYPE, OOM...) or could not be reached (no refusal: the observation that follows
        reports it); the next poll sends the slots again."""
        if not plans:
            return [], None
        keys_, args = schedules.call(schema, plans)
        try:
            reply = await queueops.script("fire")(client, keys=queueops.wire(keys_),
                                                  args=queueops.wire(args))
        except (aioredis.RedisError, OSError) as e:
            error = f"{type(e).__name__}: {redact.scrub(str(e))}"
            log.warning("schedules of %s/%s not fired this poll: %s", ref.namespace, ref.name,
                        error)
            return None, error if isinstance(e, aioredis.ResponseError) else None
        return schedules.parse(reply, plans), None

    async def write_refused(self, ref: ObjectRef, kind: str, *, last: str | None,
                            refused: str | None) -> None:
        """A Warning Event when Redis refuses a write of condition `kind` (`status.WRITES`)
        with a new error (`last` being the last one reported), a Normal one when it takes the
        write again."""
        if refused is None:
            if last is not None:
                await self.kube.event(ref, type="Normal", reason=kind,
                                      message="Redis takes the write again")
            return
        if refused != last:
            message = statuses.refusal_message(kind, refused)
            log.warning("%s/%s: %s", ref.namespace, ref.name, message)
            await self.kube.event(ref, type="Warning", reason=statuses.WRITES[kind][1],
                                  message=message)

    async def schedule_notices(self, ref: ObjectRef, notices: list[schedules.Notice]) -> None:
        """A Warning Event per skipped or missed slot."""
        for n in notices:
            log.info("%s/%s: %s", ref.namespace, ref.name, n.message)
            await self.kube.event(ref, type="Warning", reason=n.reason, message=n.message)

    async def problem(self, ref: ObjectRef, problem: str, *, reason: str) -> None:
        """A spec the operator cannot act on: a Warning Event."""
        log.warning("%s/%s: %s", ref.namespace, ref.name, problem)
        await self.kube.event(ref, type="Warning", reason=reason, message=problem)

    async def write_status(self, ref: ObjectRef, status: statuses.Status) -> None:
        await self.kube.patch_status(ref.namespace, ref.name, status)


def record_metrics(ref: ObjectRef, observation: QueueObservation | None,
                   outcome: policy.Outcome, deployment: DeploymentState,
                   seconds: float, flows: tuple[QueueFlow, ...] = ()) -> None:
    """The operator's gauges for one poll (the queue gauges only when Redis was read)."""
    labels = (ref.namespace, ref.name)
    for q in flows:
        if q.limited:
            metrics.queue_gauge(metrics.QUEUE_PAUSED, *labels, q.key).set(1 if q.is_paused else 0)
        if q.max_in_flight is not None:
            metrics.queue_gauge(metrics.QUEUE_IN_FLIGHT_LIMIT, *labels, q.key).set(q.max_in_flight)
            metrics.queue_gauge(metrics.QUEUE_IN_FLIGHT, *labels, q.key).set(q.held or 0)
        if q.per_second is not None:
            metrics.queue_gauge(metrics.QUEUE_RATE_LIMIT, *labels, q.key).set(q.per_second)
    metrics.POLL_DURATION.labels(*labels).observe(seconds)
    metrics.DESIRED_REPLICAS.labels(*labels).set(outcome.replicas)
    metrics.REPLICAS.labels(*labels).set(deployment.ready_replicas)
    if observation is None:
        return
    for queue, n in observation.backlog.items():
        metrics.queue_gauge(metrics.BACKLOG, *labels, queue).set(n)
    for queue, n in observation.limited.items():
        metrics.queue_gauge(metrics.QUEUE_LIMITED, *labels, queue).set(n)
    metrics.IN_FLIGHT.labels(*labels).set(observation.in_flight)
    metrics.DELAYED.labels(*labels).set(observation.delayed)
    metrics.DEAD_LETTER.labels(*labels).set(observation.dead_letter)
    metrics.DEAD_LETTER_TRIMMED.labels(*labels).set(observation.dead_letter_trimmed_total)
    rate = outcome.decision.state.throughput_per_replica
    if rate is not None:
        metrics.THROUGHPUT_PER_REPLICA.labels(*labels).set(rate)
    age = observation.oldest_task_age
    if age is not None:
        metrics.OLDEST_TASK_AGE.labels(*labels).set(age)
