"""A queue whose tasks wait longer than its targetWaitSeconds more than 5 % of the time gets its
bursts started within the target: the workers' wait histograms (`Waits.late_share`) switch off
the burst floor for it while the target can still be met (`waitpolicy.over_budget`)."""

from __future__ import annotations

import pytest

from taskqueue.api import manifest
from taskqueue.api.models import ScalingSpec
from taskqueue.scaling import policy, waitpolicy
from taskqueue.scaling.observation import QueueObservation
from taskqueue.scaling.policy import PolicyState, decide
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.service import ServiceTimes
from taskqueue.scaling.waits import Waits
from taskqueue.simulate import trace
from taskqueue.simulate.run import simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.wire.keys import WAIT_EDGES_SECONDS

NOW = 1_000_000.0


def late(share: float, total: int = 200, target: float = 10.0) -> Rates:
    """Rates whose workers measured 2 s tasks on `low` and `total` waits, `share` of them
    longer than `target` (and than every edge up to it)."""
    over = round(total * share)
    counts = (total, *(over if edge <= target else 0 for edge in WAIT_EDGES_SECONDS))
    return Rates(at=NOW,
                 service=ServiceTimes(totals=(("low", 20.0, 10),), sums=(("low", 20.0, 10.0),)),
                 waits=Waits(totals=(("low", counts),), sums=(("low", tuple(map(float, counts))),)))


@pytest.mark.parametrize("share, target, over", [
    pytest.param(0.02, 10.0, False, id="within-the-5-percent"),
    pytest.param(0.05, 10.0, False, id="exactly-the-budget"),
    pytest.param(0.08, 10.0, True, id="over-the-budget"),
    pytest.param(0.08, None, False, id="no-target"),
])
def test_over_budget(share: float, target: float | None, over: bool) -> None:
    assert waitpolicy.over_budget(late(share), "low", target) is over


def test_too_few_waits_measured_are_not_over_budget() -> None:
    assert waitpolicy.over_budget(late(0.5, total=10), "low", 10.0) is False


@pytest.mark.parametrize("share, replicas", [
    # 60 tasks of 2 s, 3 s old, pods up 5 s later: each added pod runs >= 5 s of the burst,
    # 57 / (1 + 3 / 2) = 22.8; over budget, 95 % within the 2 s left: 57 / (1 + 2 / 2) = 28.5
    pytest.param(0.0, 23, id="on-budget"),
    pytest.param(0.2, 29, id="over-budget"),
])
def test_a_late_queue_gets_more_pods_for_its_burst(share: float, replicas: int) -> None:
    spec = ScalingSpec(maxReplicas=100, targetWaitSeconds={"low": 10.0}, podStartupSeconds=5,
                       scaleDownStabilizationSeconds=0)
    rates = late(share)
    observation = QueueObservation(at=NOW, backlog={"low": 60},
                                   oldest_enqueued_at={"low": NOW - 3},
                                   waited=dict(rates.waits.totals))
    state = PolicyState(replicas=1, rates=rates)
    decision = decide(spec=spec, observation=observation, state=state, now=NOW, concurrency=1,
                      queue_order=("low",))
    assert decision.replicas == replicas


def test_batches_on_a_low_priority_queue_meet_its_target(monkeypatch: pytest.MonkeyPatch) -> None:
    # the bench's two-priority trace at concurrency 1: 1/s of 0.5 s tasks on `high` (2 s),
    # 60 tasks of 2 s on `low` every 5 min, for an hour. Low's target is 9.5 s, not the bench's
    # 10 s: with the measured API delay (0.1 s) the floor alone starts 95 % of a batch within
    # 9.95 s, so at 10 s this could not show what the late shares add (8.92 s with them)
    tq = manifest.parse({"kind": "TaskQueue", "spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "high"}, {"key": "low"}],
        "worker": {"concurrency": 1},
        "scaling": {"maxReplicas": 40, "targetWaitSeconds": {"high": 2, "low": 9.5},
                    "podStartupSeconds": 5}}})
    arrivals = [trace.Arrival(a.at, "high" if a.queue == trace.HIGH else "low", a.service)
                for a in trace.generate("two-priority",
                                        trace.Load(rate=1.0, service=2.0, duration=3600.0))]
    result = simulate(tq, arrivals, OperatorScaler(tq))
    assert result.waits["low"][1] <= 9.5
    assert result.waits["high"][1] <= 2.0
    # the floor alone (late shares ignored) starts too few of them in time; without the batch
    # forecast, which starts the batches from the fourth on ahead of them (9.02 s with it)
    monkeypatch.setattr(policy, "_forecast_batch", lambda *_, **__: None)
    assert simulate(tq, arrivals, OperatorScaler(tq)).waits["low"][1] <= 9.5
    monkeypatch.setattr(waitpolicy, "over_budget", lambda *_: False)
    floor_only = simulate(tq, arrivals, OperatorScaler(tq))
    assert floor_only.waits["low"][1] > 9.5
