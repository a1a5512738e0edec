"""Slots held past a burst's deadline, rescued tasks and the steady fleet a reaction allows
(`waitmodel.size_for_wait`'s `poll`, `waitmodel.reacts_in_time`, `waitpolicy.standing_slots`).

A slot busy with a task that runs past the oldest task's deadline starts none of a burst and
stays busy: the new slots come on top of it. Where a poll and a start-up still meet a queue's
target, a task queued that long is given a slot whatever the queue's length, and the steady
fleet is the one that costs least counting the rescues it leaves. Pure; no Redis."""

from __future__ import annotations

import pytest

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling.arrivals import Arrivals
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.policy import PolicyState, decide
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.service import ServiceTimes
from taskqueue.scaling.waitmodel import (
    NO_STANDING,
    QueueLoad,
    Standing,
    WaitSizing,
    reacts_in_time,
    size_for_wait,
)

NOW = 1_000_000.0


def sized(*, rate: float, queued: int, target: float, service: float, age: float = 0.0,
          cv2: float = 1.0, startup: float, poll: float,
          standing: Standing = NO_STANDING) -> WaitSizing:
    queue = QueueLoad("q", rate, queued, target, service=service, oldest_age=age, cv2=cv2)
    return size_for_wait([queue], service=service, horizon=max(startup, 2.0), startup=startup,
                         poll=poll, standing=standing)


@pytest.mark.parametrize(("target", "startup", "poll", "reacts"), [
    pytest.param(15.0, 5.0, 2.0, True, id="room-for-a-poll-and-a-start-up"),
    pytest.param(7.0, 5.0, 2.0, True, id="just-room"),
    pytest.param(5.0, 5.0, 2.0, False, id="a-start-up-takes-the-target"),
    pytest.param(30.0, 20.0, 2.0, True, id="slow-start-up-long-target"),
    pytest.param(15.0, 5.0, 0.0, False, id="no-reaction-counted-on"),
])
def test_a_reaction_meets_a_target_with_room_for_a_poll_and_a_start_up(
        target: float, startup: float, poll: float, reacts: bool) -> None:
    assert reacts_in_time(target=target, startup=startup, poll=poll) is reacts


@pytest.mark.parametrize(("service", "slots"), [
    # 2 queued on 3 slots busy with 20 s tasks: none frees by the deadline (5 - 1 s start-up),
    # so the queued ones get new slots on top of the 3
    pytest.param(20.0, 5, id="long-tasks-hold-their-slots"),
    # the same with 2 s tasks: the busy slots free in time and start them
    pytest.param(2.0, 2, id="short-tasks-free-in-time"),
])
def test_slots_busy_past_the_deadline_start_none_of_the_burst(service: float,
                                                              slots: int) -> None:
    got = sized(rate=0.5 / service, queued=2, target=5.0, service=service, startup=1.0,
                poll=0.0, standing=Standing(busy=3))
    assert got.slots == slots


@pytest.mark.parametrize(("age", "poll", "rescued"), [
    # 3 queued is within the normal fluctuation of 3.6 erlangs of 1 s tasks; the oldest has
    # waited 9 s of 15 with 5 s of start-up and a 2 s poll to come: it gets a slot now
    pytest.param(9.0, 2.0, True, id="due-a-slot-now"),
    pytest.param(3.0, 2.0, False, id="time-left-for-the-next-poll"),
    pytest.param(9.0, 0.0, False, id="no-reaction-counted-on"),
])
def test_a_task_queued_for_as_long_as_a_reaction_takes_is_rescued(age: float, poll: float,
                                                                  rescued: bool) -> None:
    got = sized(rate=3.6, queued=3, target=15.0, service=1.0, age=age, startup=5.0, poll=poll,
                standing=Standing(busy=5))
    assert (got.slots > got.steady) is rescued


@pytest.mark.parametrize(("rate", "service", "cv2", "target", "startup", "with_poll",
                          "without"), [
    # 0.2/s of heavy-tailed 8 s tasks, 15 s target: the tail is the rescue's, two slots
    pytest.param(0.2, 8.0, 20.0, 15.0, 5.0, 2, 5, id="heavy-tailed-5s-start-up"),
    pytest.param(0.2, 8.0, 20.0, 15.0, 1.0, 2, 5, id="heavy-tailed-1s-start-up"),
    # a 20 s start-up leaves no room for a reaction in 15 s: sized for the target alone
    pytest.param(0.2, 8.0, 20.0, 15.0, 20.0, 5, 5, id="no-room-to-react"),
    # half an erlang of 20 s tasks, 5 s target, 1 s start-up: one slot, a pod per task past it
    pytest.param(0.025, 20.0, 1.0, 5.0, 1.0, 1, 3, id="slow-tasks-fast-start-up"),
])
def test_a_target_a_reaction_meets_keeps_the_steady_fleet_that_costs_least(
        rate: float, service: float, cv2: float, target: float, startup: float,
        with_poll: int, without: int) -> None:
    steady = {poll: sized(rate=rate, queued=0, target=target, service=service, cv2=cv2,
                          startup=startup, poll=poll).steady for poll in (2.0, 0.0)}
    assert steady == {2.0: with_poll, 0.0: without}


@pytest.mark.parametrize(("rate", "service"), [
    pytest.param(1.5, 2.0, id="3-erlangs-of-2s"),
    pytest.param(75.0, 0.2, id="15-erlangs-of-0.2s"),
])
def test_fast_tasks_keep_the_fleet_their_target_asks_for(rate: float, service: float) -> None:
    # a rescue costs a start-up and a poll; where most tasks start in time anyway, the fleet
    # the target asks for is also the cheapest
    steady = {poll: sized(rate=rate, queued=0, target=5.0, service=service, startup=1.0,
                          poll=poll).steady for poll in (2.0, 0.0)}
    assert steady[2.0] == steady[0.0]


def test_a_quiesced_pod_still_busy_is_no_slot_for_a_rescue() -> None:
    # one pod taking tasks and one quiesced, both on 20 s tasks; a task has waited 2.5 s of a
    # 5 s target with 1 s start-up: the rescue needs a third pod, not the quiesced one back
    spec = ScalingSpec(pollIntervalSeconds=2.0, podStartupSeconds=1.0,
                       targetWaitSeconds={"q": 5.0}, maxReplicas=10)
    rates = Rates(at=NOW, completed=0,
                  arrivals=Arrivals(elapsed=100.0, elapsed_short=100.0),
                  service=ServiceTimes(busy_seconds=20_000.0, completions=1000.0))
    workers = tuple(WorkerObservation(f"w{i}", int((NOW + 15) * 1000), 1) for i in range(2))
    obs = QueueObservation(at=NOW, backlog={"q": 1}, oldest_enqueued_at={"q": NOW - 2.5},
                           workers=workers, quiesced=frozenset({"w1"}))
    d = decide(spec=spec, observation=obs, state=PolicyState(replicas=1, rates=rates), now=NOW,
               queue_order=("q",))
    assert d.replicas >= 3, d.reason
