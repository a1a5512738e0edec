"""The queueing model behind targetWaitSeconds: Erlang C, priority classes, bursts."""

from __future__ import annotations

import math

import pytest

from taskqueue.scaling.waitmodel import (
    MAX_SLOTS,
    QueueLoad,
    batch_slots,
    erlang_c,
    normal_queue,
    size_for_wait,
    slots_for_queue,
    slots_for_wait,
    wait_tail,
)


@pytest.mark.parametrize("slots, load, expected", [
    pytest.param(1, 0.5, 0.5, id="mm1-waits-with-rho"),
    pytest.param(2, 1.0, 1 / 3, id="two-slots-load-one"),
    pytest.param(3, 2.0, 4 / 9, id="three-slots-load-two"),
    pytest.param(4, 4.0, 1.0, id="saturated"),
    pytest.param(4, 6.0, 1.0, id="overloaded"),
    pytest.param(4, 0.0, 0.0, id="no-load"),
])
def test_erlang_c(slots: int, load: float, expected: float) -> None:
    assert erlang_c(slots, load) == pytest.approx(expected)


def test_one_queue_tail_is_the_exact_erlang_c_tail() -> None:
    # M/M/c: P(W > t) = C(c, A) exp(-(c mu - lambda) t)
    tail = wait_tail(slots=3, service=2.0, load_before=0.0, load_through=2.0, load_total=2.0,
                     wait=1.0)
    assert tail == pytest.approx(4 / 9 * math.exp(-(3 / 2 - 1) * 1.0))


def test_lower_priority_waits_longer_than_higher() -> None:
    args = {"slots": 10, "service": 1.0, "load_total": 8.0, "wait": 1.0}
    high = wait_tail(load_before=0.0, load_through=4.0, **args)
    low = wait_tail(load_before=4.0, load_through=8.0, **args)
    assert high < low


@pytest.mark.parametrize("service, load, target, expected", [
    pytest.param(2.0, 19.6, 2.0, 22, id="steady-c4-example"),
    pytest.param(1.0, 0.5, 10.0, 1, id="light-load-one-slot"),
    pytest.param(1.0, 0.5, 0.01, 3, id="tight-target-needs-spares"),
])
def test_slots_for_one_queue(service: float, load: float, target: float, expected: int) -> None:
    slots = slots_for_queue(service=service, load_before=0.0, load_through=load,
                            load_total=load, target=target)
    assert slots == expected
    tail = wait_tail(slots=slots, service=service, load_before=0.0, load_through=load,
                     load_total=load, wait=target)
    assert tail <= 0.05
    if slots > 1:
        fewer = wait_tail(slots=slots - 1, service=service, load_before=0.0, load_through=load,
                          load_total=load, wait=target)
        assert fewer > 0.05


@pytest.mark.parametrize("before, through, total", [
    pytest.param(0.0, 19.6, 19.6, id="one-queue"),
    pytest.param(5.0, 12.0, 30.0, id="a-middle-queue"),
    pytest.param(0.0, 2.5, 900.0, id="a-high-queue-under-a-heavy-low-one"),
    pytest.param(0.0, 3000.0, 3000.0, id="thousands-of-erlangs"),
])
def test_the_slot_search_matches_erlang_c_at_every_count(
    before: float, through: float, total: float
) -> None:
    # slots_for_queue carries Erlang B from one count to the next: the same answer as asking
    # erlang_c afresh at each count, in linear time (it was quadratic: seconds per poll)
    args = {"service": 2.0, "load_before": before, "load_through": through,
            "load_total": total}
    slots = slots_for_queue(**args, target=1.0)
    assert wait_tail(slots=slots, **args, wait=1.0) <= 0.05 < wait_tail(slots=slots - 1, **args,
                                                                        wait=1.0)


def test_a_load_past_the_slot_cap_is_sized_at_the_cap() -> None:
    # garbage counters can make a load of millions of erlangs: the answer is the cap (then
    # maxReplicas), not millions of Erlang B steps per poll (a poll took minutes)
    assert slots_for_queue(service=1.0, load_before=0.0, load_through=2e6, load_total=2e6,
                           target=1.0) == MAX_SLOTS
    assert batch_slots(load=2e6, ca2=50.0, service=1.0, target=1.0) == MAX_SLOTS


@pytest.mark.parametrize("queues, expected_slots, binding", [
    pytest.param([QueueLoad("q", 9.8, 0, 2.0)], 22, "q", id="steady"),
    # 100 queued, 19 of them normal at 22 slots: 19.6 + 0.95 x 81 / (1 + 2 s / 2 s)
    pytest.param([QueueLoad("q", 9.8, 100, 2.0)], 59, "q", id="burst-drains-in-target"),
    pytest.param([QueueLoad("q", 0.0, 0, None)], 0, None, id="no-target"),
    # the high queue's own load is 4 slots, but whether it waits at all depends on all 8
    pytest.param([QueueLoad("high", 2.0, 0, 1.0), QueueLoad("low", 2.0, 0, None)], 10, "high",
                 id="high-target-counts-all-load-in-erlang-c"),
    pytest.param([QueueLoad("high", 2.0, 0, None), QueueLoad("low", 2.0, 30, 10.0)], 10, "low",
                 id="low-target-waits-behind-high"),
    pytest.param([QueueLoad("high", 2.0, 0, None), QueueLoad("low", 2.0, 30, 100.0)], 9, "low",
                 id="looser-low-target-fewer-slots"),
])
def test_slots_for_wait(queues: list[QueueLoad], expected_slots: int,
                        binding: str | None) -> None:
    slots, why = slots_for_wait(queues, service=2.0)
    assert slots == expected_slots
    if binding is not None:
        assert f"p95 wait of {binding} " in why


def test_a_normal_queue_adds_no_slots_a_burst_does() -> None:
    normal = normal_queue(slots=22, load=19.6)
    assert normal > 5
    calm, _ = slots_for_wait([QueueLoad("q", 9.8, normal, 2.0)], service=2.0)
    burst, _ = slots_for_wait([QueueLoad("q", 9.8, normal + 50, 2.0)], service=2.0)
    assert calm == 22
    # k new slots start k tasks at once, then k per 2 s: 0.95 x 50 = k (1 + 2 s / 2 s)
    assert burst == math.ceil(19.6 + 0.95 * 50 / 2)


@pytest.mark.parametrize("target, age, horizon, slots", [
    # 100 tasks of 1 s; k slots start k (1 + w / 1 s) of them within w, 95 % of them
    pytest.param(1.0, 2.0, 0.0, 95, id="missed-no-horizon-one-slot-per-task"),
    # each added slot runs at least the 5 s horizon: w >= 5 - 1 s
    pytest.param(1.0, 2.0, 5.0, 19, id="missed-slots-get-the-horizon-of-work"),
    pytest.param(1.0, 0.0, 5.0, 19, id="a-short-target-is-not-bought-below-the-horizon"),
    pytest.param(10.0, 0.0, 5.0, 9, id="a-long-target-needs-fewer"),
])
def test_horizon_bounds_the_burst_slots(target: float, age: float, horizon: float,
                                        slots: int) -> None:
    queues = [QueueLoad("q", 0.0, 100, target, oldest_age=age)]
    assert slots_for_wait(queues, service=1.0, horizon=horizon)[0] == slots


@pytest.mark.parametrize("queued, slots, steady, burst", [
    pytest.param(0, 22, 22, False, id="no-backlog"),
    pytest.param(19, 22, 22, False, id="normal-fluctuation"),
    # 100 beyond the normal 19, 95 % started within max(2 s target, 5 s horizon - 2 s):
    # 19.6 + 95 / (1 + 3 / 2)
    pytest.param(119, 58, 22, True, id="burst"),
])
def test_the_steady_part_excludes_the_burst(queued: int, slots: int, steady: int,
                                            burst: bool) -> None:
    sizing = size_for_wait([QueueLoad("q", 9.8, queued, 2.0)], service=2.0, horizon=5.0)
    assert (sizing.slots, sizing.steady, sizing.burst) == (slots, steady, burst)


@pytest.mark.parametrize("age, startup, horizon, slots", [
    # 60 tasks of 2 s, target 10 s, no arrivals: k slots start k (1 + w / 2 s) of them within
    # the w seconds left once pods are up; 95 % of them: k = 57 / (1 + w / 2)
    pytest.param(0.0, 0.0, 0.0, 10, id="whole-target-ahead"),
    pytest.param(0.0, 5.0, 0.0, 17, id="pods-up-after-5s-leave-5s"),
    pytest.param(2.0, 5.0, 0.0, 23, id="the-oldest-waited-2s"),
    # missed: each added slot still runs the 5 s horizon (w = 5 - 2 s)
    pytest.param(8.0, 5.0, 5.0, 23, id="late-no-faster-than-the-horizon"),
])
def test_a_burst_is_started_on_pods_that_take_startup_to_come_up(
        age: float, startup: float, horizon: float, slots: int) -> None:
    sizing = size_for_wait([QueueLoad("low", 0.0, 60, 10.0, oldest_age=age)], service=2.0,
                           horizon=horizon, startup=startup)
    assert sizing.slots == slots


@pytest.mark.parametrize("cv2, slots", [
    # 9.8/s x 2 s = 19.6 erlangs, p95 <= 2 s: exponential times need 22 slots (the M/M/c case)
    pytest.param(None, 22, id="unknown-is-exponential"),
    pytest.param(1.0, 22, id="exponential"),
    pytest.param(0.0, 21, id="constant-times-wait-half-as-long"),
    pytest.param(4.0, 24, id="heavy-tailed-wait-longer"),
])
def test_the_service_time_variance_scales_the_wait(cv2: float | None, slots: int) -> None:
    assert slots_for_wait([QueueLoad("q", 9.8, 0, 2.0, cv2=cv2)], service=2.0)[0] == slots


def test_queues_of_different_service_times_mix_into_a_more_variable_one() -> None:
    # each queue exponential, but 0.5 s and 4 s tasks mixed vary more than either (cv2 > 1);
    # until every arriving queue's variance is measured, the model keeps the exponential one
    both = [QueueLoad("a", 4.0, 0, 2.0, service=0.5, cv2=1.0),
            QueueLoad("b", 1.0, 0, None, service=4.0, cv2=1.0)]
    one = [QueueLoad("a", 4.0, 0, 2.0, service=0.5, cv2=1.0),
           QueueLoad("b", 1.0, 0, None, service=4.0)]
    assert slots_for_wait(both, service=1.2)[0] > slots_for_wait(one, service=1.2)[0]


@pytest.mark.parametrize("age, over_budget, slots", [
    # 60 tasks of 2 s, target 10 s, pods up after 5 s, each added slot runs >= 5 s of the burst:
    # 3 s old leaves w = 2 s, but the floor keeps w >= 5 - 2 = 3 s: 57 / (1 + 3 / 2)
    pytest.param(3.0, False, 23, id="on-budget-the-floor-holds"),
    # the queue's recent tasks were late more than 5 % of the time: start 95 % within the 2 s
    # still left, 57 / (1 + 2 / 2)
    pytest.param(3.0, True, 29, id="over-budget-the-target-wins"),
    # out of reach either way (8 s old + 5 s start-up > 10 s): the floor holds
    pytest.param(8.0, True, 23, id="over-budget-but-out-of-reach"),
])
def test_a_queue_over_its_late_budget_drops_the_burst_floor(age: float, over_budget: bool,
                                                            slots: int) -> None:
    queue = QueueLoad("low", 0.0, 60, 10.0, oldest_age=age, over_budget=over_budget)
    assert size_for_wait([queue], service=2.0, horizon=5.0, startup=5.0).slots == slots


@pytest.mark.parametrize("low_queued, low_service, slots", [
    # nothing queued behind: the high queue's own sizing (0.25 erlang, 2 s target: 2 slots)
    pytest.param(0, 8.0, 2, id="no-backlog-behind"),
    # 40 low tasks of 8 s queued take every slot that frees (non-preemptive): a high task
    # waits for the next end, P(W > 2) = exp(-2 (c - 0.25) / 8) <= 5 %: c >= 0.25 + 8 ln 20 / 2
    pytest.param(40, 8.0, 13, id="long-tasks-behind"),
    # short tasks behind end often enough: 0.25 + 0.5 x 3.0 / 2
    pytest.param(40, 0.5, 2, id="short-tasks-behind"),
    # a backlog smaller than that runs whole with a slot to spare: 0.25 + 3 + 1
    pytest.param(3, 8.0, 5, id="a-small-backlog-behind"),
])
def test_a_backlog_behind_a_queue_leaves_it_a_slot_in_time(low_queued: int, low_service: float,
                                                           slots: int) -> None:
    high = QueueLoad("high", 0.125, 0, 2.0, service=2.0)
    low = QueueLoad("low", 0.0, low_queued, None, service=low_service)
    sizing = size_for_wait([high, low], service=2.0, horizon=5.0, startup=5.0)
    assert sizing.slots == slots
    assert sizing.steady == 2  # the backlog's part leaves with it


@pytest.mark.parametrize("rate", [5e-324, 1e-320, 0.0])
def test_arrival_rates_decayed_to_nothing_size_by_the_backlog(rate: float) -> None:
    # a half-day idle spell decays the measured rates to denormals whose load underflows
    # to 0: the mix of service times is then the fleet's mean, not 0 / rate (a poll that
    # raised ZeroDivisionError once the TaskQueue had been idle for ~12 hours)
    queues = [QueueLoad(key="slow", arrival_rate=0.0, queued=171, target_wait=None,
                        service=216.0, cv2=0.0),
              QueueLoad(key="mid", arrival_rate=0.0, queued=11, target_wait=60.0, service=53.0),
              QueueLoad(key="fast", arrival_rate=rate, queued=1028, target_wait=None,
                        service=0.09)]
    sizing = size_for_wait(queues, service=111.0, horizon=30.0, startup=30.0)
    assert sizing.slots > 0
    assert "p95 wait of mid" in sizing.why
