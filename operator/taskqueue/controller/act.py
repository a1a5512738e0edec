"""Act on a decision: scale the Deployment, post Events, write the status (built by
`taskqueue.controller.status`), export the metrics. The scale executor. A scale-in reaches here only
as far as `taskqueue.controller.scalein` allows: its victims are quiesced, drained and the cheapest
to delete."""

from __future__ import annotations

import logging
from collections.abc import Callable

from taskqueue.controller import status as statuses
from taskqueue.controller.deployments import Deployments
from taskqueue.controller.kube import DeploymentState, Kube, ObjectRef
from taskqueue.controller.record import Record
from taskqueue.scaling import policy
from taskqueue.scaling.observation import QueueObservation
from taskqueue.telemetry import metrics

log = logging.getLogger("taskqueue.operator")


class Actor:
    """Writes to Kubernetes on behalf of the polls (one per operator)."""

    def __init__(self, kube: Kube, deployments: Deployments, clock: Callable[[], float]) -> None:
        self.kube = kube
        self.deployments = deployments
        self.clock = clock

    async def scale(self, ref: ObjectRef, deployment: DeploymentState,
                    decision: policy.Decision, observation: QueueObservation | None) -> None:
        down = decision.replicas < decision.previous
        rv = None
        try:
            rv = await self.kube.scale_deployment(ref.namespace, deployment.name,
                                                  decision.replicas)
        finally:
            self.deployments.wrote(ref.namespace, deployment.name, rv)
        direction = "down" if down else "up"
        metrics.SCALE_EVENTS.labels(ref.namespace, ref.name, direction).inc()
        message = f"{deployment.name} {decision.previous} -> {decision.replicas}: {decision.reason}"
        log.info("scaled %s/%s %s", ref.namespace, ref.name, message)
        await self.kube.event(ref, type="Normal", reason=f"Scaled{direction.capitalize()}",
                              message=message)

    async def redis_read(self, ref: ObjectRef, record: Record, error: str | None) -> None:
        """An Event when Redis becomes unreadable (or a new error) and when it is read again."""
        if error is None:
            recovered = record.last_error is not None
            record.last_error = None
            if recovered:
                await self.kube.event(ref, type="Normal", reason="RedisReachable",
                                      message="Redis can be read again")
            return
        metrics.REDIS_ERRORS.labels(ref.namespace, ref.name).inc()
        if error != record.last_error:
            log.warning("redis unreachable for %s/%s: %s", ref.namespace, ref.name, error)
            await self.kube.event(ref, type="Warning", reason="RedisUnreachable", message=error)
        record.last_error = error

    async def problem(self, ref: ObjectRef, record: Record, problem: str, *,
                      reason: str) -> None:
        """A spec the operator cannot act on: condition Ready=False and a Warning Event (once)."""
        if problem != record.last_error:
            log.warning("%s/%s: %s", ref.namespace, ref.name, problem)
            await self.kube.event(ref, type="Warning", reason=reason, message=problem)
        record.last_error = problem
        now = self.clock()
        new = statuses.problem_status(record.status, problem, reason=reason, now=now)
        await self.write_status(ref, record, new, throttle=False, now=now)

    async def write_status(self, ref: ObjectRef, record: Record, new: statuses.Status, *,
                           throttle: bool = True, now: float) -> None:
        """Patch the status when it changed (drift alone at most every STATUS_DRIFT_SECONDS)."""
        if new == record.status:
            return
        if throttle and not statuses.due(record.status, new, written=record.status_written,
                                         now=now):
            return
        await self.kube.patch_status(ref.namespace, ref.name, new)
        record.status, record.status_written = new, now


def record_metrics(ref: ObjectRef, observation: QueueObservation | None,
                   decision: policy.Decision, deployment: DeploymentState,
                   seconds: float) -> None:
    """The operator's gauges for one poll (the queue gauges only when Redis was read)."""
    labels = (ref.namespace, ref.name)
    metrics.POLL_DURATION.labels(*labels).observe(seconds)
    metrics.DESIRED_REPLICAS.labels(*labels).set(decision.replicas)
    metrics.REPLICAS.labels(*labels).set(deployment.ready_replicas)
    if observation is None:
        return
    for queue, n in observation.backlog.items():
        metrics.BACKLOG.labels(*labels, queue).set(n)
    metrics.IN_FLIGHT.labels(*labels).set(observation.in_flight)
    metrics.DELAYED.labels(*labels).set(observation.delayed)
    metrics.DEAD_LETTER.labels(*labels).set(observation.dead_letter)
    metrics.DEAD_LETTER_TRIMMED.labels(*labels).set(observation.dead_letter_trimmed_total)
    if decision.state.throughput_per_replica is not None:
        metrics.THROUGHPUT_PER_REPLICA.labels(*labels).set(decision.state.throughput_per_replica)
    age = observation.oldest_task_age
    if age is not None:
        metrics.OLDEST_TASK_AGE.labels(*labels).set(age)
