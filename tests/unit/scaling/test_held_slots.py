"""Slots held by long tasks (`waitpolicy.held_after`, `waitpolicy.standing_slots`,
`waitmodel.Standing.held`, `WorkerObservation.held`).

Workers report when their running tasks started with each heartbeat. A task that has run far
longer than the measured mean (a heavy-tailed task ten minutes long among sub-second ones: the
workers report a task's time only when it ends, so the mean does not hold it yet) holds its slot
for no time the wait model can count on. Once a task queued behind it has waited as long as a
reaction allows, the fleet keeps more slots than the load besides the held ones: a fleet sized
for the load alone scales its one free pod in and leaves the queue to the held one. Pure; no
Redis."""

from __future__ import annotations

import math

import pytest

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling.arrivals import Arrivals
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.policy import PolicyState, decide
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.service import ServiceTimes
from taskqueue.scaling.waitmodel import QueueLoad, Standing, size_for_wait
from taskqueue.scaling.waitpolicy import HELD_SERVICES, held_after, standing_slots

NOW = 1_000_000.0
SPEC = ScalingSpec(pollIntervalSeconds=2.0, podStartupSeconds=5.0,
                   targetWaitSeconds={"q": 15.0}, maxReplicas=10)


def worker(name: str, *started_ago: float, in_flight: int | None = None) -> WorkerObservation:
    return WorkerObservation(name, int((NOW + 15) * 1000),
                             len(started_ago) if in_flight is None else in_flight,
                             tuple(sorted(int((NOW - s) * 1000) for s in started_ago)))


def rates(*, mean: float | None) -> Rates:
    service = (ServiceTimes() if mean is None
               else ServiceTimes(busy_seconds=mean * 1000.0, completions=1000.0))
    return Rates(at=NOW, completed=0, arrivals=Arrivals(elapsed=300.0, elapsed_short=300.0,
                                                        counts=(("q", 300.0),),
                                                        counts_short=(("q", 300.0),)),
                 service=service)


@pytest.mark.parametrize(("started_ago", "in_flight", "longer_than", "held"), [
    pytest.param((600.0, 1.0), None, 30.0, 1, id="one-long-one-short"),
    pytest.param((600.0, 300.0), None, 30.0, 2, id="both-long"),
    pytest.param((10.0,), None, 30.0, 0, id="none-long-yet"),
    # the heartbeat's report can outlive a task that ended since: never more than in flight
    pytest.param((600.0, 500.0), 1, 30.0, 1, id="at-most-in-flight"),
    pytest.param((), 3, 30.0, 0, id="a-worker-that-reports-none"),
])
def test_a_worker_holds_the_slots_of_its_tasks_running_longer_than_the_limit(
        started_ago: tuple[float, ...], in_flight: int | None, longer_than: float,
        held: int) -> None:
    w = worker("w", *started_ago, in_flight=in_flight)
    assert w.held(now=NOW, longer_than=longer_than) == held


@pytest.mark.parametrize(("mean", "after"), [
    pytest.param(None, math.inf, id="no-service-time-yet"),
    pytest.param(0.3, 7.0, id="fast-tasks-a-poll-and-a-start-up"),
    pytest.param(2.0, HELD_SERVICES * 2.0, id="many-mean-service-times"),
])
def test_a_task_holds_its_slot_after_many_mean_times_and_a_reaction(
        mean: float | None, after: float) -> None:
    assert held_after(SPEC, rates(mean=mean)) == pytest.approx(after)


def test_only_the_slots_of_workers_taking_tasks_count_as_held() -> None:
    obs = QueueObservation(at=NOW, backlog={"q": 0},
                           workers=(worker("a", 600.0, 1.0), worker("b", 700.0)),
                           quiesced=frozenset({"b"}))
    got = standing_slots(SPEC, obs, replicas=2, scale_ups=(), concurrency=2, now=NOW,
                         held_after=30.0)
    assert (got.idle, got.busy, got.held) == (0, 3, 1)


def sized(*, held: int, queued: int, age: float, target: float = 15.0) -> int:
    # 0.3 erlangs of 0.3 s tasks: one slot, when it is free
    q = QueueLoad("q", 1.0, queued, target, service=0.3, oldest_age=age, cv2=1.0)
    return size_for_wait([q], service=0.3, horizon=5.0, startup=5.0, poll=2.0,
                         standing=Standing(idle=1, busy=1, held=held)).slots


@pytest.mark.parametrize(("held", "queued", "age", "target", "slots"), [
    # a 15 s target, 5 s start-up, 2 s poll: a reaction still starts a task queued for 8 s
    pytest.param(0, 12, 8.0, 15.0, 1, id="no-held-slot-one-serves-the-load"),
    pytest.param(1, 12, 8.0, 15.0, 2, id="a-held-slot-and-one-for-the-load"),
    pytest.param(2, 12, 8.0, 15.0, 3, id="two-held-slots"),
    pytest.param(1, 0, 0.0, 15.0, 1, id="nothing-queued-behind-it"),
    pytest.param(1, 12, 7.0, 15.0, 1, id="time-left-for-the-free-slot"),
    # a 2 s target no reaction meets: made up for once a task has waited a poll
    pytest.param(1, 3, 2.0, 2.0, 2, id="tight-target-after-a-poll"),
    pytest.param(1, 3, 1.0, 2.0, 1, id="tight-target-within-a-poll"),
])
def test_queued_tasks_get_slots_besides_the_held_ones(held: int, queued: int, age: float,
                                                      target: float, slots: int) -> None:
    assert sized(held=held, queued=queued, age=age, target=target) == slots


def test_a_fleet_with_a_pod_held_by_a_long_task_keeps_its_free_pod() -> None:
    # two pods at concurrency 1: one runs a task started 10 minutes ago (the mean is 0.3 s),
    # the other is free; 12 tasks have queued for 8 s. Sized for the load alone, the fleet is
    # one pod (what a worker that reports no start times gets), and scale-in would remove the
    # free one once the stabilisation window is over
    obs = QueueObservation(at=NOW, backlog={"q": 12}, oldest_enqueued_at={"q": NOW - 8.0},
                           workers=(worker("long", 600.0), worker("free")))
    state = PolicyState(replicas=2, rates=rates(mean=0.3))
    held = decide(spec=SPEC, observation=obs, state=state, now=NOW, queue_order=("q",))
    assert (held.recommendation, held.replicas) == (2, 2), held.reason
    assert "1 slots held by long tasks" in held.reason
    unknown = QueueObservation(at=NOW, backlog={"q": 12}, oldest_enqueued_at={"q": NOW - 8.0},
                               workers=(worker("long", in_flight=1), worker("free")))
    blind = decide(spec=SPEC, observation=unknown, state=state, now=NOW, queue_order=("q",))
    assert blind.recommendation == 1, blind.reason
