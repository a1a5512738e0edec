"""The act side of a scale-in: quiesce the victims, remove only the drained ones (I/O).

`settle()` turns the policy's replica count into the count that is safe to set now, following
`taskqueue.scaling.quiesce` (pure): victims are quiesced in Redis and their processing lists read in
one MULTI/EXEC (`queueops.quiesce`); the drained ones get the lowest pod-deletion-cost, every other
pod its in-flight count; the replica count drops by the drained victims the ReplicaSet deletes
first only (it ranks pods not yet Ready, Pending or unscheduled before any cost). Victims no
longer needed are released. On a poll with nothing to remove and nothing quiesced it does no I/O.
Quiescing needs worker id = pod name (the operator's own Deployment sets TASKQUEUE_WORKER_ID from
metadata.name); when busy workers are not pods by name, the count stays at or above them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

import redis.asyncio as aioredis

from taskqueue.api import models
from taskqueue.controller import workload
from taskqueue.controller.kube import DeploymentState, Kube
from taskqueue.redisio import queueops
from taskqueue.scaling import policy, quiesce
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import keys


async def settle_decision(kube: Kube, client: aioredis.Redis, tq: models.TaskQueue, *,
                          namespace: str, deployment: DeploymentState, decision: policy.Decision,
                          observation: QueueObservation | None,
                          last_scale: float | None) -> policy.Decision:
    """`decision` with the replica count that is safe to set now (`settle`); a Redis error
    defers the scale-in (nothing is removed this poll)."""
    try:
        settled = await settle(kube, client, keys.KeySchema.from_spec(tq.spec),
                               namespace=namespace, deployment=deployment,
                               observation=observation, target=decision.replicas)
    except (aioredis.RedisError, OSError) as e:
        held = max(decision.replicas, deployment.replicas)
        settled = Settled(held, f"scale-in deferred: {type(e).__name__}")
    return applied(decision, settled, last_scale=last_scale)


@dataclass(frozen=True)
class Settled:
    replicas: int
    """The replica count to set now."""
    note: str = ""
    """What the scale-in did, for the decision's reason ("" when nothing)."""


async def settle(kube: Kube, client: aioredis.Redis, schema: keys.KeySchema, *, namespace: str,
                 deployment: DeploymentState, observation: QueueObservation | None,
                 target: int) -> Settled:
    """The replica count to set for `target`, quiescing and releasing pods on the way."""
    current = deployment.replicas
    if observation is None:  # Redis unreadable: nothing can be quiesced, hold what we have
        return Settled(max(target, current) if target < current else target)
    if target >= current:
        if observation.quiesced:
            await queueops.quiesce(client, schema, add=(), remove=sorted(observation.quiesced))
            return Settled(target, f"released {len(observation.quiesced)} quiesced pod(s)")
        return Settled(target)
    pods = [p for p in await kube.list_pods(namespace, deployment.selector) if p.active]
    held = {w.worker_id: w.in_flight for w in observation.workers}
    names = {p.name for p in pods}
    strangers = [w for w in observation.workers
                 if w.in_flight and w.alive(now=observation.at) and w.worker_id not in names]
    if strangers:  # worker ids are not pod names (a scaleTargetRef without TASKQUEUE_WORKER_ID)
        floor = min(current, max(target, observation.busy_workers))
        return Settled(floor, f"{len(strangers)} busy worker(s) are not pod names: no quiesce, "
                              f"not below {observation.busy_workers} busy workers")
    views = [quiesce.PodView(p.name, held.get(p.name, 0), p.created,
                             quiesce.replicaset_rank(scheduled=p.scheduled, phase=p.phase,
                                                     ready=p.ready))
             for p in pods]
    plan = quiesce.plan(views, target=target, quiesced=observation.quiesced)
    release = sorted(set(plan.release) | (observation.quiesced - set(plan.victims)))
    after = await queueops.quiesce(client, schema, add=plan.victims, remove=release)
    drained = quiesce.drained(plan.victims, after)
    costs = quiesce.deletion_costs([p.name for p in pods], {**held, **after}, drained)
    results = await asyncio.gather(*(
        kube.annotate_pod(namespace, p.name, {workload.DELETION_COST_ANNOTATION: costs[p.name]})
        for p in pods if p.deletion_cost != costs[p.name]
    ), return_exceptions=True)
    # a pod whose cost could not be written may rank below a victim: remove nothing this time
    annotated = not any(isinstance(r, BaseException) for r in results)
    removable = quiesce.removable(views, drained) if annotated else 0
    replicas = quiesce.replicas_after(current=current, target=target, pods=len(pods),
                                      removable=removable)
    busy = len(plan.victims) - len(drained)
    note = f"quiesced {len(plan.victims)} pod(s), {len(drained)} drained"
    if busy:
        note += f", {busy} still finishing their tasks"
    if annotated and removable < len(drained):
        note += (f", {len(drained) - removable} kept while the ReplicaSet would delete a busy pod "
                 "first (not yet Ready, Pending or unscheduled)")
    return Settled(replicas, note)


def applied(decision: policy.Decision, settled: Settled, *,
            last_scale: float | None) -> policy.Decision:
    """`decision` with the replica count `settled` allows (and its note in the reason)."""
    if settled.replicas == decision.replicas and not settled.note:
        return decision
    reason = f"{decision.reason}; {settled.note}" if settled.note else decision.reason
    if settled.replicas != decision.replicas:
        reason += f"; now {settled.replicas}"
    state = replace(decision.state, replicas=settled.replicas,
                    last_scale=decision.state.last_scale
                    if settled.replicas != decision.previous else last_scale)
    return replace(decision, replicas=settled.replicas, reason=reason, state=state)
