"""scaling.expectedServiceSeconds: what a new TaskQueue's first burst is sized with until the
workers have measured the service time (`waitpolicy.service_times`), and what replaces it."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import manifest
from taskqueue.api.models import ScalingSpec
from taskqueue.scaling.observation import QueueObservation
from taskqueue.scaling.policy import PolicyState, decide
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.service import ServiceTimes
from taskqueue.scaling.waitpolicy import service_times
from taskqueue.simulate import trace
from taskqueue.simulate.run import Settings, simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.simulate.trace import Arrival

NOW = 1_000_000.0
QUEUES = ("high", "low")
NOTHING = Rates()
# 2 tasks in hand for 3 s each, none completed: the mean is at least 6 / 2 = 3 s
STARTED = Rates(at=NOW, service=ServiceTimes(busy_seconds=6.0, in_flight=2))
# 10 completions, 2 s of held time each (Little's law), from workers that report nothing
COMPLETED = Rates(at=NOW, service=ServiceTimes(busy_seconds=20.0, completions=10.0))
# the workers reported 5 attempts of 0.4 s on high
HIGH_REPORTED = Rates(at=NOW, service=ServiceTimes(
    busy_seconds=2.0, completions=5.0, totals=(("high", 2.0, 5),), sums=(("high", 2.0, 5.0),)))


@pytest.mark.parametrize("rates, expected, fleet, per_queue", [
    pytest.param(NOTHING, {}, None, None, id="nothing-known-no-hint"),
    pytest.param(NOTHING, {"high": 1.0, "low": 4.0}, 2.5, {"high": 1.0, "low": 4.0},
                 id="nothing-measured-the-hints"),
    pytest.param(NOTHING, {"low": 4.0}, 4.0, {"high": 4.0, "low": 4.0},
                 id="an-unhinted-queue-borrows-the-hints-mean"),
    pytest.param(STARTED, {}, 3.0, {"high": 3.0, "low": 3.0}, id="no-hint-the-lower-bound"),
    pytest.param(STARTED, {"high": 1.0, "low": 2.0}, 3.0, {"high": 1.0, "low": 2.0},
                 id="a-lower-bound-above-the-hints-is-the-fleet-mean"),
    pytest.param(STARTED, {"high": 5.0}, 5.0, {"high": 5.0, "low": 5.0},
                 id="hints-above-the-lower-bound"),
    pytest.param(COMPLETED, {"high": 9.0}, 2.0, {"high": 2.0, "low": 2.0},
                 id="measured-by-completions-replaces-the-hint-without-reports"),
    pytest.param(HIGH_REPORTED, {"high": 9.0, "low": 3.0}, 0.4, {"high": 0.4, "low": 3.0},
                 id="a-reported-queue-drops-its-hint-the-other-keeps-its-own"),
])
def test_service_times(rates: Rates, expected: dict[str, float], fleet: float | None,
                       per_queue: dict[str, float] | None) -> None:
    got = service_times(rates, expected, QUEUES)
    if fleet is None:
        assert got is None
        return
    assert got is not None
    assert got[0] == pytest.approx(fleet)
    assert got[1] == pytest.approx(per_queue)


def spec(**scaling: Any) -> ScalingSpec:
    return ScalingSpec(**{"maxReplicas": 100, "targetWaitSeconds": {"q": 2.0},
                          "podStartupSeconds": 5, "scaleDownStabilizationSeconds": 0,
                          **scaling})


@pytest.mark.parametrize("expected, replicas, why", [
    # nothing measured: nothing tells how soon a busy slot frees, so a slot per queued task
    pytest.param(None, 30, "no service time yet: a slot for each of 30 queued",
                 id="no-hint-a-slot-per-task"),
    # 2 s tasks, the 2 s target out of reach: 0.95 x 30 / (1 + (5 s - 2 s) / 2 s) = 11.4 slots
    pytest.param({"q": 2.0}, 12, "S 2s, 30 queued", id="hint-sizes-the-first-burst"),
    pytest.param({"q": 0.5}, 3, "S 0.5s, 30 queued", id="short-hint-fewer-pods"),
])
def test_the_first_burst_of_a_new_taskqueue(expected: dict[str, float] | None, replicas: int,
                                            why: str) -> None:
    observation = QueueObservation(at=NOW, backlog={"q": 30},
                                   oldest_enqueued_at={"q": NOW - 1})
    decision = decide(spec=spec(expectedServiceSeconds=expected), observation=observation,
                      state=PolicyState(replicas=0), now=NOW, concurrency=1, queue_order=("q",))
    assert decision.replicas == replicas
    assert why in decision.reason


def test_a_hint_sizes_a_new_taskqueues_first_spike_like_history_would() -> None:
    # a spike of 30 two-second tasks at concurrency 1: with the hint, a new TaskQueue meets it
    # as one that ran this traffic before does; without, it waits as little but pays a slot
    # for each task of its first spike; a wrong hint is replaced once measured
    tq = manifest.parse({"kind": "TaskQueue", "spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "tasks"}],
        "worker": {"concurrency": 1},
        "scaling": {"maxReplicas": 40, "targetWaitSeconds": {"tasks": 2},
                    "podStartupSeconds": 5}}})
    hinted = tq.model_copy(update={"spec": tq.spec.model_copy(update={
        "scaling": tq.spec.scaling.model_copy(update={"expectedServiceSeconds": {"tasks": 2.0}})})})
    spikes = [Arrival(50.0 + i * 0.01, "tasks", 2.0) for i in range(30)]
    spikes += [Arrival(400.0 + i * 0.01, "tasks", 2.0) for i in range(30)]
    settings = Settings(tail=120)
    new = simulate(tq, spikes, OperatorScaler(tq), settings)
    warm = simulate(tq, spikes, OperatorScaler(tq), Settings(tail=120, history=300))
    with_hint = simulate(hinted, spikes, OperatorScaler(hinted), settings)
    assert new.p95() == pytest.approx(warm.p95(), rel=0.1)
    assert with_hint.worker_seconds < new.worker_seconds
    assert with_hint.p95() == pytest.approx(warm.p95(), rel=0.1)
    assert with_hint.worker_seconds == pytest.approx(warm.worker_seconds, rel=0.1)


@pytest.mark.parametrize("expected", [
    pytest.param(None, id="no-hint"),
    pytest.param(2.0, id="right-hint"),
    pytest.param(8.0, id="four-times-too-long"),
    pytest.param(0.5, id="four-times-too-short"),
])
def test_a_hint_does_not_change_what_a_steady_load_holds(expected: float | None) -> None:
    # 40/s x 2 s = 80 busy slots = 20 pods of 4; once measured, the hint is gone
    scaling: dict[str, Any] = {"maxReplicas": 60, "targetWaitSeconds": {"tasks": 2.0},
                               "scaleDownStabilizationSeconds": 10}
    if expected is not None:
        scaling["expectedServiceSeconds"] = {"tasks": expected}
    tq = manifest.parse({"kind": "TaskQueue", "spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "tasks"}],
        "worker": {"concurrency": 4}, "scaling": scaling}})
    arrivals = trace.generate("steady", trace.Load(rate=40.0, service=2.0, duration=600.0))
    result = simulate(tq, arrivals, OperatorScaler(tq))
    assert 0.8 * 20 <= result.replicas_between(120, 600) <= 1.2 * 20
