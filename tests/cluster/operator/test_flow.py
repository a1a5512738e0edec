"""Scaling that knows the flow limits, against the real API server + controller-manager and a
real redis-server: a paused queue scales its fleet to zero whatever its backlog, and the
operator writes the pause into Redis without undoing `taskqueue pause`; a queue with
maxInFlight or a rate limit holds the fleet at what the limit can use (where the backlog alone
would go to maxReplicas); the status says why, and so does the decision log when the count
changes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from taskqueue.api import manifest
from taskqueue.redisio import flowops
from taskqueue.wire import flow, history, keys
from taskqueue_devcluster import ControlPlane
from tests.helpers.kube import OperatorThread, apply, events, get, replicas, taskqueue
from tests.helpers.wait import wait_for

Start = Callable[..., OperatorThread]


def status(cp: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    return dict((get(cp, "taskqueue", name, "-n", ns) or {}).get("status") or {})


def rules(r: redis.Redis, schema: keys.KeySchema) -> list[str]:
    return [e.rule for _, e in history.decisions(r.xrange(schema.decisions))]


def test_paused_queue_scales_to_zero_and_a_cli_pause_is_kept(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str,
) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    scaling = {"targetBacklogPerReplica": 1, "maxReplicas": 5}
    tq = taskqueue("fl", redis_url, scaling=scaling, queues=[{"key": "fl:jobs"}])
    schema = keys.KeySchema.from_spec(manifest.parse(tq).spec)
    r.lpush("fl:jobs", *[str(i) for i in range(20)])
    run_operator(namespace)
    apply(control_plane, namespace, tq)
    wait_for("5 replicas", lambda: replicas(control_plane, namespace, "fl-worker") == 5)

    apply(control_plane, namespace, taskqueue("fl", redis_url, scaling=scaling,
                                              queues=[{"key": "fl:jobs", "paused": True}]))
    wait_for("0 replicas", lambda: replicas(control_plane, namespace, "fl-worker") == 0)
    assert r.hget(schema.flow, flow.PAUSED + "fl:jobs") == flow.PAUSED_BY_SPEC
    wait_for("status shows the pause", lambda: status(control_plane, namespace, "fl").get(
        "pausedQueues") == ["fl:jobs"])
    assert "fl:jobs is paused" in status(control_plane, namespace, "fl")["reason"]
    wait_for("the decision log names the rule", lambda: "paused-queue" in rules(r, schema),
             timeout=10)

    flowops.pause(r, schema, "fl:jobs", at=time.time(), who="oncall")
    apply(control_plane, namespace, taskqueue("fl", redis_url, scaling=scaling,
                                              queues=[{"key": "fl:jobs"}]))
    wait_for("the spec's pause lifted", lambda: not r.hexists(schema.flow, flow.PAUSED + "fl:jobs"))
    time.sleep(2)  # polls after the spec change: the incident pause holds the fleet at zero
    assert replicas(control_plane, namespace, "fl-worker") == 0
    assert r.hexists(schema.flow, flow.PAUSED_CLI + "fl:jobs")
    at, who = str(r.hget(schema.flow, flow.PAUSED_CLI + "fl:jobs")).split()
    wait_for("status names the incident pause", lambda: status(
        control_plane, namespace, "fl")["flow"]["fl:jobs"].get("pausedBy") == [
            f"taskqueue pause at {at} by {who}"])
    assert who == "oncall"

    assert flowops.resume(r, schema, "fl:jobs") == (True, False)
    wait_for("5 replicas again", lambda: replicas(control_plane, namespace, "fl-worker") == 5)


def test_limits_hold_the_fleet_at_what_they_can_use(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str,
) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    scaling = {"targetBacklogPerReplica": 1, "maxReplicas": 8,
               "expectedServiceSeconds": {"lim:jobs": 1.0}}
    r.lpush("lim:jobs", *[str(i) for i in range(50)])
    run_operator(namespace)
    apply(control_plane, namespace, taskqueue(
        "lim", redis_url, scaling=scaling,
        queues=[{"key": "lim:jobs", "maxInFlight": 3}]))
    wait_for("3 replicas", lambda: replicas(control_plane, namespace, "lim-worker") == 3)
    schema = keys.KeySchema(prefix="lim:jobs", queues=(keys.QueueRef("lim:jobs"),),
                            dead_letter="lim:jobs:dead")
    assert r.hget(schema.flow, flow.MAX + "lim:jobs") == "3"
    wait_for("the reason", lambda: "capped by maxInFlight of lim:jobs: 3 slots" in (
        status(control_plane, namespace, "lim").get("reason") or ""))
    assert "in-flight-cap" in rules(r, schema)

    # 2 tasks/s x 1 s expected service = 2 slots, +5-10 % headroom: 3 pods of concurrency 1
    apply(control_plane, namespace, taskqueue(
        "lim", redis_url, scaling=scaling,
        queues=[{"key": "lim:jobs", "rateLimit": {"tasks": 2, "perSeconds": 1}}]))
    wait_for("the rate limit's need", lambda: "rateLimit of lim:jobs: 2/s x 1 s = 2 slots" in (
        status(control_plane, namespace, "lim").get("reason") or ""))
    assert replicas(control_plane, namespace, "lim-worker") == 3
    assert not r.hexists(schema.flow, flow.MAX + "lim:jobs")
    assert r.hget(schema.flow, flow.RATE + "lim:jobs") == "2 1 2"


def test_a_refused_flow_write_and_schedule_fire_are_a_condition_and_an_event(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str,
) -> None:
    """Redis refuses the poll's own writes (here: the flow hash and the schedules hash hold
    strings, WRONGTYPE): the status says so in conditions FlowControlWritten and SchedulesFired
    with the refusal and its fix, and a Warning Event each; once the keys are deleted both are
    written again and the conditions turn True."""
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    body = taskqueue("ref", redis_url, queues=[{"key": "ref:jobs", "maxInFlight": 2}])
    body["spec"]["schedules"] = [{"name": "tick", "cron": "* * * * * *", "queue": "ref:jobs"}]
    schema = keys.KeySchema.from_spec(manifest.parse(body).spec)
    r.set(schema.flow, "not a hash")
    r.set(schema.schedules, "not a hash")
    run_operator(namespace)
    apply(control_plane, namespace, body)

    def conditions() -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in status(control_plane, namespace, "ref").get(
            "conditions", [])}

    wait_for("both refusals in the status", lambda: all(
        conditions().get(k, {}).get("status") == "False"
        for k in ("FlowControlWritten", "SchedulesFired")))
    flow_cond, fire_cond = conditions()["FlowControlWritten"], conditions()["SchedulesFired"]
    assert flow_cond["reason"] == "FlowControlNotWritten" and schema.flow in flow_cond["message"]
    assert fire_cond["reason"] == "SchedulesNotFired" and "WRONGTYPE" in fire_cond["message"]
    wait_for("the Events", lambda: events(control_plane, namespace, "FlowControlNotWritten")
             and events(control_plane, namespace, "SchedulesNotFired"))
    assert r.type(schema.flow) == "string" and r.zcard(schema.delayed) == 0

    r.delete(schema.flow, schema.schedules)
    wait_for("written again", lambda: all(
        conditions().get(k, {}).get("status") == "True"
        for k in ("FlowControlWritten", "SchedulesFired")))
    assert r.hget(schema.flow, flow.MAX + "ref:jobs") == "2"
    assert r.zcard(schema.delayed) > 0
    assert len(events(control_plane, namespace, "FlowControlNotWritten")) == 1  # once per error
