"""The simulator models the queues' flow limits (as Redis enforces them whatever scales the
fleet); only this operator's policy knows them, the KEDA models do not, so the difference shows:
on arrivals 3x a queue's rate limit the operator holds the fleet near the limit's need while
KEDA climbs to maxReplicas, and a paused queue keeps the operator's fleet at zero."""

from __future__ import annotations

from typing import Any

from taskqueue.api.models import TaskQueue
from taskqueue.simulate import trace
from taskqueue.simulate.flowsim import FlowSim
from taskqueue.simulate.run import simulate
from taskqueue.simulate.scalers import KEDA_DEFAULTS, KedaScaler, OperatorScaler
from taskqueue.simulate.trace import Load
from taskqueue.wire.flow import QueueFlow


def manifest(**queue: Any) -> TaskQueue:
    return TaskQueue.model_validate({"spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "tasks", **queue}],
        "worker": {"concurrency": 4},
        "scaling": {"maxReplicas": 60, "idleCooldownSeconds": 30,
                    "scaleDownStabilizationSeconds": 10}}})


def test_arrivals_3x_the_rate_limit_hold_the_fleet_at_the_limits_need_where_keda_climbs() -> None:
    # limit 10/s x 2 s service = 20 busy slots = 5 pods of 4; arrivals 30/s
    tq = manifest(rateLimit={"tasks": 10})
    arrivals = trace.generate("steady", Load(rate=30.0, service=2.0, duration=300.0))
    ours = simulate(tq, arrivals, OperatorScaler(tq))
    keda = simulate(tq, arrivals, KedaScaler(tq, KEDA_DEFAULTS))
    need = 10 * 2.0 / 4
    held = ours.replicas_between(120, 300)
    assert need <= held <= 1.2 * need, held
    assert keda.replicas_between(120, 300) >= 55


def test_the_limit_holds_in_the_simulated_world() -> None:
    flow = FlowSim.of([QueueFlow("q", rate=(10, 1.0, 5))])
    assert flow is not None
    starts = []
    t = 0.0
    while len(starts) < 25:
        if flow.allows("q", t, running=0):
            starts.append(flow.start("q", t))
        else:
            t += 0.01
    assert starts[:5] == [0.0] * 5
    assert starts[-1] >= (25 - 5) / 10 - 1e-9


def test_a_paused_queue_keeps_the_operators_fleet_at_zero_and_keda_scales_for_nothing() -> None:
    tq = manifest(paused=True)
    arrivals = trace.generate("steady", Load(rate=5.0, service=1.0, duration=120.0))
    ours = simulate(tq, arrivals, OperatorScaler(tq))
    keda = simulate(tq, arrivals, KedaScaler(tq, KEDA_DEFAULTS))
    assert ours.replicas_between(0, 120) == 0
    assert keda.replicas_between(60, 120) > 10
