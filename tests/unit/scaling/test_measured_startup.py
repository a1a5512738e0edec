"""The pod start-up the policy measures (a scale-up from zero to the poll that sees its first
worker registered) and sizes with where it is shorter than podStartupSeconds: a manifest
that keeps the 30 s default for pods that start in 5 s sized each batch's pods to run 30 s of
it, and the batch drained on a handful of pods (the p95 of issue 34's batches of 50 every
2 min). Pure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.policy import PolicyState, decide, startup_seconds
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.service import ServiceTimes

SPEC = ScalingSpec(maxReplicas=40, targetWaitSeconds={"q": 5.0})


def seen(at: float, *, queued: int = 0, workers: int = 0) -> QueueObservation:
    alive = int((at + 15) * 1000)
    return QueueObservation(at=at, backlog={"q": queued},
                            oldest_enqueued_at={"q": at} if queued else {},
                            workers=tuple(WorkerObservation(f"w{i}", alive, 0)
                                          for i in range(workers)))


def run(polls: list[tuple[float, int, int]], state: PolicyState) -> PolicyState:
    """`state` after polls of (time, queued, workers registered)."""
    for at, queued, workers in polls:
        state = decide(spec=SPEC, observation=seen(at, queued=queued, workers=workers),
                       state=state, now=at, queue_order=("q",)).state
    return state


@pytest.mark.parametrize("polls, before, startup", [
    # 0 -> n at t=0; nothing registered at 2 and 4; the first worker seen at 6
    pytest.param([(0, 5, 0), (2, 5, 0), (4, 5, 0), (6, 5, 1)], None, 6.0, id="first-measure"),
    pytest.param([(0, 5, 0), (2, 5, 0), (4, 5, 0), (6, 5, 1)], 10.0, 8.0, id="smoothed"),
    pytest.param([(0, 5, 0), (2, 5, 0)], None, None, id="not-up-yet"),
    # workers already there: no scale-up from zero, nothing to measure
    pytest.param([(0, 5, 2), (2, 5, 2)], None, None, id="already-running"),
])
def test_the_startup_is_measured_from_zero_to_the_first_worker(
        polls: list[tuple[float, int, int]], before: float | None,
        startup: float | None) -> None:
    state = run(polls, PolicyState(replicas=0, startup=before))
    assert state.startup == startup


def test_a_fleet_back_at_zero_before_a_worker_registers_measures_nothing() -> None:
    activated = run([(0, 5, 0)], PolicyState(replicas=0))
    assert activated.activated_at == 0
    # someone scaled the Deployment back to zero before a worker came up
    state = run([(10, 0, 0), (12, 0, 1)], replace(activated, replicas=0))
    assert (state.activated_at, state.startup) == (None, None)


@pytest.mark.parametrize("spec, measured, used", [
    pytest.param({"podStartupSeconds": 30}, 6.0, 6.0, id="shorter-is-used"),
    pytest.param({"podStartupSeconds": 30}, 40.0, 30.0, id="longer-is-not"),
    pytest.param({"podStartupSeconds": 30}, None, 30.0, id="unmeasured"),
    pytest.param({"podStartupSeconds": 0}, 6.0, 0.0, id="zero-stays-zero"),
])
def test_the_sizing_uses_the_shorter_startup(spec: dict[str, Any], measured: float | None,
                                             used: float) -> None:
    state = PolicyState(replicas=1, startup=measured)
    assert startup_seconds(ScalingSpec(**spec), state).podStartupSeconds == used


def test_a_batch_gets_more_pods_when_they_come_up_sooner() -> None:
    # 50 tasks of 2 s just landed on an idle queue, podStartupSeconds 30 (the default):
    # sized to run 30 s each, 4 pods; pods measured up in 6 s: more, each with less of it
    rates = replace(Rates(), service=ServiceTimes(sums=(("q", 200.0, 100.0),)))
    def pods(startup: float | None) -> int:
        state = PolicyState(replicas=1, rates=rates, startup=startup)
        return decide(spec=SPEC, observation=seen(100, queued=50, workers=1), state=state,
                      now=100, queue_order=("q",)).replicas
    assert pods(None) == 4
    assert pods(6.0) > 2 * pods(None)
