"""The batch forecast: batches that recur at a stable period, released through the lull between
them, get their fleet started a start-up and a poll before the next is expected; irregular
batches, a burst that lasts, or batches held by the lull rule get none; a forecast batch that
does not come is overdue two polls past the spread of its gaps, then released by the idle rule
at a bounded cost, and not forecast again until the period is seen again. The onsets
(`forecast.noted`), the period (`forecast.expected`), the decision (`policy.decide`) and the
whole loop in the simulator. Pure."""

from __future__ import annotations

import random
from typing import Any

import pytest

from taskqueue.api.models import ScalingSpec, TaskQueue
from taskqueue.scaling import forecast, quiesce
from taskqueue.scaling.forecast import Onset, QueueBatches
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.policy import Decision, Outcome, PolicyState, Rule, decide
from taskqueue.scaling.quiesce import PodView
from taskqueue.simulate.run import simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.simulate.trace import Arrival
from taskqueue.wire.flow import QueueFlow

from .test_batch_arrivals import POLL, measured, with_service


# -- the onsets --------------------------------------------------------------------------------
def test_a_batch_is_noted_with_all_its_tasks() -> None:
    got = forecast.noted((), {"q": 30.0}, {"q": 3.5}, at=10.0, dt=2.0)
    assert got == (QueueBatches("q", (Onset(10.0, 10.0, 30.0),)),)


def test_a_plausible_count_is_no_batch() -> None:
    assert forecast.noted((), {"q": 3.0}, {"q": 3.0}, at=10.0, dt=2.0) == ()


def test_a_batch_over_two_polls_is_one() -> None:
    one = forecast.noted((), {"q": 20.0}, {"q": 3.0}, at=10.0, dt=2.0)
    two = forecast.noted(one, {"q": 10.0}, {"q": 3.0}, at=12.0, dt=2.0)
    later = forecast.noted(two, {"q": 25.0}, {"q": 3.0}, at=70.0, dt=2.0)
    assert later[0].onsets == (Onset(10.0, 12.0, 30.0, 2), Onset(70.0, 70.0, 25.0))


def test_only_the_last_onsets_are_kept() -> None:
    batches: tuple[QueueBatches, ...] = ()
    for i in range(10):
        batches = forecast.noted(batches, {"q": 10.0}, {"q": 3.0}, at=60.0 * i, dt=2.0)
    assert [o.at for o in batches[0].onsets] == [360.0, 420.0, 480.0, 540.0]


# -- the period --------------------------------------------------------------------------------
def onsets(*times: float, tasks: float = 20.0, polls: int = 1) -> tuple[QueueBatches, ...]:
    return (QueueBatches("q", tuple(Onset(t, t + 2.0 * (polls - 1), tasks, polls)
                                    for t in times)),)


@pytest.mark.parametrize("batches, now, at", [
    pytest.param(onsets(0, 120, 240), 300.0, 360.0, id="every-120s"),
    # seen at polls: a poll of jitter in the gaps is the same period
    pytest.param(onsets(0, 122, 240), 300.0, 360.0, id="a-poll-of-jitter"),
    pytest.param(onsets(0, 300, 600, 900), 1000.0, 1200.0, id="every-300s"),
    # only the last three count: an irregular start is forgotten once the period is stable
    pytest.param(onsets(0, 45, 200, 300, 400), 420.0, 500.0, id="stable-after-irregular"),
    # still forecast a little after its time (a batch a bit late is the batch forecast)
    pytest.param(onsets(0, 120, 240), 364.0, 360.0, id="a-little-late"),
    pytest.param(onsets(0, 120), 130.0, None, id="two-batches-are-no-period"),
    pytest.param(onsets(0, 60, 200), 230.0, None, id="irregular"),
    pytest.param(onsets(0, 120, 240), 400.0, None, id="overdue-the-forecast-missed"),
    # a burst of a high rate for 20 s every 120 s: no batch to start ahead of
    pytest.param(onsets(0, 120, 240, polls=10), 300.0, None, id="a-burst-that-lasts"),
    pytest.param((), 300.0, None, id="nothing-seen"),
])
def test_the_next_batch(batches: tuple[QueueBatches, ...], now: float,
                        at: float | None) -> None:
    got = forecast.expected(batches, "q", now=now, poll=POLL)
    assert (got.at if got is not None else None) == at


def test_the_forecast_size_is_the_regular_batches_mean() -> None:
    batches = (QueueBatches("q", (Onset(0, 0, 10), Onset(120, 120, 20), Onset(240, 240, 30))),)
    got = forecast.expected(batches, "q", now=250.0, poll=POLL)
    assert got is not None and (got.tasks, got.period) == (20.0, 120.0)


# -- the decision ------------------------------------------------------------------------------
def periodic(size: int, every: int, batches: int, *, jitter: int = 0, seed: int = 1) -> list[int]:
    """Counts per poll: `batches` batches of `size` tasks `every` polls (+- `jitter` polls),
    the last one in the last poll."""
    rng = random.Random(seed)
    counts: list[int] = []
    for _ in range(batches):
        gap = every + (rng.randint(-jitter, jitter) if jitter else 0)
        counts += [0] * (gap - 1) + [size]
    return counts


def decide_after(counts: list[int], *, idle_for: float, current: int = 0,
                 **spec: Any) -> tuple[int, Rule, str]:
    """The decision `idle_for` seconds after polls that saw `counts` arrive (of 0.5 s tasks),
    nothing queued since the last."""
    rates = with_service(measured(counts), 0.5)
    last = POLL * len(counts)
    scaling = ScalingSpec(**{"maxReplicas": 40, "idleCooldownSeconds": 30,
                             "scaleDownStabilizationSeconds": 0, "podStartupSeconds": 5,
                             "targetWaitSeconds": {"q": 2.0}, **spec})
    now = last + idle_for
    observation = QueueObservation(at=now, backlog={"q": 0}, taken=dict(rates.taken),
                                   completed_total=rates.completed)
    state = PolicyState(replicas=current, rates=rates, last_active=last)
    d = decide(spec=scaling, observation=observation, state=state, now=now, queue_order=("q",))
    return d.replicas, d.rule, d.reason


EVERY_2MIN = periodic(50, 60, 6)
"""Batches of 50 every 120 s (60 polls): released (~120 s apart, over the 7 s budget)."""


@pytest.mark.parametrize("counts, idle_for, spec, replicas, rule, says", [
    # expected 120 s after the last: 5 s start-up + a poll ahead, 50 x 0.5 s to start 95 %
    # within 2 s: 47.5 / (1 + max(2, 5 - 0.5) / 0.5) -> 5 pods
    pytest.param(EVERY_2MIN, 114.0, {}, 5, Rule.FORECAST,
                 "forecast: batch of ~50 on q expected in 6s (every ~120s): 5 started ahead",
                 id="recurring-batches-started-ahead"),
    pytest.param(EVERY_2MIN, 120.0, {}, 5, Rule.FORECAST, "expected in 0s",
                 id="held-at-its-time"),
    # not yet: released, as without the forecast
    pytest.param(EVERY_2MIN, 100.0, {}, 0, Rule.IDLE, "hold 0", id="too-early"),
    # a slower start-up starts it sooner, with fewer pods (each runs at least a start-up of
    # it, as for a burst: 47.5 / (1 + 19.5 / 0.5) -> 2)
    pytest.param(EVERY_2MIN, 100.0, {"podStartupSeconds": 20}, 2, Rule.FORECAST,
                 "expected in 20s", id="slow-pods-sooner"),
    # the gaps agreed to the poll: held two polls past its time, as its poll may be a poll late
    pytest.param(EVERY_2MIN, 124.0, {}, 5, Rule.FORECAST, "expected in 0s",
                 id="held-two-polls-late"),
    # not seen by then: overdue, the idle rule releases the fleet (well before a cooldown)
    pytest.param(EVERY_2MIN, 126.0, {}, 0, Rule.IDLE, "hold 0", id="overdue-released"),
    pytest.param(EVERY_2MIN, 152.0, {}, 0, Rule.IDLE, "hold 0", id="missed-released"),
    # gaps that differed by 2 polls (within the tolerance): held 2 polls longer
    pytest.param(periodic(50, 60, 6, jitter=2, seed=3), 130.0, {}, 5, Rule.FORECAST,
                 "started ahead", id="jittered-held-for-their-spread"),
    pytest.param(periodic(50, 60, 6, jitter=15), 114.0, {}, 0, Rule.IDLE, "hold 0",
                 id="irregular-batches-none"),
    pytest.param([0] * 300 + [50], 114.0, {}, 0, Rule.IDLE, "hold 0",
                 id="one-batch-none"),
    # without a wait target nothing sizes it: no forecast
    pytest.param(EVERY_2MIN, 114.0, {"targetWaitSeconds": None}, 0, Rule.IDLE, "hold 0",
                 id="no-wait-target"),
])
def test_the_forecast_decision(counts: list[int], idle_for: float, spec: dict[str, Any],
                               replicas: int, rule: Rule, says: str) -> None:
    got, got_rule, reason = decide_after(counts, idle_for=idle_for, **spec)
    assert (got, got_rule) == (replicas, rule)
    assert says in reason
    assert ("forecast" in reason) is (rule == Rule.FORECAST)


@pytest.mark.parametrize("cooldown, idle_for, current, replicas, rule", [
    # the cooldown ends (118 s) before the batch is due (120 s): no fleet bridges the two, the
    # idle rule keeps its one pod and then takes it to zero ...
    pytest.param(118, 114.0, 1, 1, Rule.IDLE_COOLDOWN, id="due-after-the-zero-waits-for-it"),
    # ... and the forecast starts the fleet from zero
    pytest.param(118, 120.0, 0, 5, Rule.FORECAST, id="then-started-from-zero"),
    # (a poll after it is due, the fleet went to zero before it: still started)
    pytest.param(118, 121.0, 0, 5, Rule.FORECAST, id="started-from-zero-a-poll-late"),
    # due before the zero (122 s): held, but not past the zero (the overdue time is 124 s); on
    # the poll at the zero the idle rule decides (holding through it, the stabilisation window
    # took the fleet to zero a poll after the cooldown)
    pytest.param(122, 120.0, 1, 5, Rule.FORECAST, id="due-before-the-zero-held-until-it"),
    pytest.param(122, 122.0, 1, 0, Rule.IDLE, id="zero-on-time"),
])
def test_a_forecast_keeps_the_idle_rule_s_zero(cooldown: float, idle_for: float, current: int,
                                               replicas: int, rule: Rule) -> None:
    got, got_rule, _ = decide_after(EVERY_2MIN, idle_for=idle_for, current=current,
                                    idleCooldownSeconds=cooldown)
    assert (got, got_rule) == (replicas, rule)


def test_batches_held_through_the_lull_are_not_forecast() -> None:
    # batches of 10 every 4 s: measured as batches ~4 s apart, under the 7 s lull budget: the
    # lull rule holds their fleet; the forecast adds nothing
    _, rule, reason = decide_after(periodic(10, 2, 150), idle_for=2.0, current=4)
    assert rule == Rule.NEXT_BATCH and "forecast" not in reason


# -- the whole loop ----------------------------------------------------------------------------
def manifest(**scaling: Any) -> TaskQueue:
    return TaskQueue.model_validate({"spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "tasks"}],
        "worker": {"concurrency": 1},
        "scaling": {"maxReplicas": 40, "targetWaitSeconds": {"tasks": 5.0},
                    "podStartupSeconds": 5, **scaling}}})


def batches(starts: list[float], size: int = 50, seed: int = 1) -> list[Arrival]:
    rng = random.Random(seed)
    return [Arrival(start, "tasks", rng.expovariate(2.0)) for start in starts
            for _ in range(size)]


def test_recurring_batches_wait_less_than_a_reactivation() -> None:
    # batches of 50 tasks of 0.5 s every 300 s (released: a poll + a 5 s start-up to
    # re-activate) with a 5 s target: the fleet started ahead of each batch after the third
    # meets it; a batch re-activated waits a poll + a start-up (~7 s) before its first task
    # starts, so the median of 12 batches is a forecast one's
    tq = manifest()
    result = simulate(tq, batches([150.0 + 300 * i for i in range(12)]), OperatorScaler(tq))
    assert (result.busy_deleted, result.interrupted, result.unserved) == (0, 0, 0)
    p50, _, _ = result.waits["tasks"]
    assert p50 < 5.0
    unforecast = simulate(tq, batches([150.0 + 300 * i for i in range(3)]), OperatorScaler(tq))
    assert unforecast.waits["tasks"][0] > 5.0


def test_a_forecast_batch_that_does_not_come_costs_a_bounded_start() -> None:
    # the same batches, then none: the fleet forecast for the 13th starts once, ahead of it,
    # and the idle rule releases it once it is overdue, a few polls after its time
    tq = manifest()
    starts = [150.0 + 300 * i for i in range(12)]
    result = simulate(tq, batches(starts), OperatorScaler(tq))
    assert result.restarts == 1
    assert result.zero_after is not None and result.zero_after <= 32.0
    forecast_at = starts[-1] + 300
    after = [(t, n) for t, n in result.scale_log if t > starts[-1] + 60]
    up = [t for t, n in after if n > 0]
    # started a start-up and a poll or two ahead of its time, zero a cooldown after it
    assert up and forecast_at - 12 <= up[0] <= forecast_at
    # and zero once it is overdue: a poll to see it, a poll of slack, the next poll's decision
    assert after[-1][1] == 0 and after[-1][0] <= forecast_at + 5 * POLL


def test_a_forecast_in_the_cooldown_still_leaves_zero_on_time() -> None:
    # batches every 60 s, a 55 s cooldown: the batch after the last one is due after the
    # cooldown ends, and its fleet would be asked for before it: the fleet still reaches zero
    # within the cooldown + a poll (+ 1 s, the bench's allowance for the API call), then starts
    tq = manifest(idleCooldownSeconds=55)
    result = simulate(tq, batches([150.0 + 60 * i for i in range(12)], size=20),
                      OperatorScaler(tq))
    assert result.zero_after is not None and result.zero_after <= 55 + POLL + 1
    assert result.restarts == 1


# -- the knob: spec.scaling.forecastBatches ------------------------------------------------------
@pytest.mark.parametrize("forecast_batches, idle_for, replicas, rule", [
    pytest.param(True, 114.0, 5, Rule.FORECAST, id="on-started-ahead"),
    pytest.param(False, 114.0, 0, Rule.IDLE, id="off-released-as-without-the-rule"),
    pytest.param(True, 120.0, 5, Rule.FORECAST, id="on-held-at-its-time"),
    pytest.param(False, 120.0, 0, Rule.IDLE, id="off-nothing-at-its-time"),
    # the knob changes nothing but the forecast: too early, both released
    pytest.param(True, 100.0, 0, Rule.IDLE, id="on-too-early"),
    pytest.param(False, 100.0, 0, Rule.IDLE, id="off-too-early"),
])
def test_forecast_batches_turns_the_rule_on_and_off(forecast_batches: bool, idle_for: float,
                                                    replicas: int, rule: Rule) -> None:
    got, got_rule, reason = decide_after(EVERY_2MIN, idle_for=idle_for,
                                         forecastBatches=forecast_batches)
    assert (got, got_rule) == (replicas, rule)
    assert ("forecast" in reason) is (rule == Rule.FORECAST)


def test_forecast_batches_is_on_by_default() -> None:
    assert ScalingSpec().forecastBatches is True
    assert manifest().spec.scaling.forecastBatches is True


@pytest.mark.parametrize("forecast_batches, restarts, met", [
    pytest.param(True, 1, True, id="on-met-then-one-start-for-the-batch-that-never-comes"),
    pytest.param(False, 0, False, id="off-each-batch-waits-a-reactivation"),
])
def test_taskqueue_simulate_follows_the_knob(forecast_batches: bool, restarts: int,
                                             met: bool) -> None:
    # 12 batches of 50 tasks of 0.5 s every 300 s, 5 s target (as above): with the rule, the
    # median batch is started ahead and the fleet starts once more after the last batch; without
    # it each batch waits a poll + a start-up, nothing starts after the trace
    tq = manifest(forecastBatches=forecast_batches)
    result = simulate(tq, batches([150.0 + 300 * i for i in range(12)]), OperatorScaler(tq))
    assert (result.busy_deleted, result.interrupted, result.unserved) == (0, 0, 0)
    assert result.restarts == restarts
    assert (result.waits["tasks"][0] < 5.0) is met


# -- the forecast among the rules that must win ---------------------------------------------------
def decide_in_lull(*, flow: tuple[QueueFlow, ...] = (), current: int = 0, redis: bool = True,
                   workers: tuple[WorkerObservation, ...] = (), **spec: Any) -> Decision:
    """The decision 4 s before the next of EVERY_2MIN's batches is due (the polls of the lull
    seen, as the operator sees them), `q` unbounded unless `flow` says otherwise."""
    counts = [*EVERY_2MIN, *[0] * 57]
    rates = with_service(measured(counts), 0.5)
    now = POLL * (len(counts) + 1)
    order = tuple(f.key for f in flow) or ("q",)
    scaling = ScalingSpec(**{"maxReplicas": 40, "idleCooldownSeconds": 30,
                             "scaleDownStabilizationSeconds": 0, "podStartupSeconds": 5,
                             "targetWaitSeconds": {"q": 2.0}, **spec})
    observation = QueueObservation(at=now, backlog=dict.fromkeys(order, 0),
                                   taken=dict(rates.taken), completed_total=rates.completed,
                                   workers=workers)
    state = PolicyState(replicas=current, rates=rates, last_active=POLL * len(EVERY_2MIN))
    return decide(spec=scaling, observation=observation if redis else None, state=state,
                  now=now, queue_order=order, flow=flow)


BUSY_6_OF_8 = tuple(WorkerObservation(f"w{i}", int((POLL * 500) * 1000), 1 if i < 6 else 0)
                    for i in range(8))


@pytest.mark.parametrize("case, replicas, rule", [
    pytest.param({}, 5, Rule.FORECAST, id="the-forecast-alone"),
    pytest.param({"maxReplicas": 3}, 3, Rule.MAX_REPLICAS, id="maxReplicas-caps-it"),
    pytest.param({"maxScaleUpStep": 2}, 2, Rule.MAX_SCALE_UP_STEP, id="maxScaleUpStep-paces-it"),
    pytest.param({"minReplicas": 7}, 7, Rule.MIN_REPLICAS, id="minReplicas-above-it"),
    pytest.param({"paused": True}, 0, Rule.PAUSED, id="a-paused-taskqueue-stays-at-zero"),
    pytest.param({"paused": True, "current": 2}, 2, Rule.PAUSED, id="a-paused-taskqueue-holds"),
    pytest.param({"redis": False}, 0, Rule.REDIS_UNREADABLE, id="redis-unreadable-holds"),
    pytest.param({"redis": False, "fallbackReplicas": 1}, 1, Rule.FALLBACK_REPLICAS,
                 id="redis-unreadable-fallbackReplicas"),
    pytest.param({"flow": (QueueFlow("q", paused=True),)}, 0, Rule.PAUSED_QUEUE,
                 id="its-queue-paused-by-the-spec"),
    pytest.param({"flow": (QueueFlow("q", paused_cli="1764800000 ops"),)}, 0,
                 Rule.PAUSED_QUEUE, id="its-queue-paused-by-taskqueue-pause"),
    pytest.param({"flow": (QueueFlow("q", paused=True),), "current": 3}, 0, Rule.PAUSED_QUEUE,
                 id="its-queue-paused-takes-the-fleet-to-zero"),
    pytest.param({"flow": (QueueFlow("q", max_in_flight=2),)}, 2, Rule.IN_FLIGHT_CAP,
                 id="maxInFlight-caps-it"),
    pytest.param({"flow": (QueueFlow("q", rate=(1, 1.0, 1)),)}, 1, Rule.RATE_LIMIT_CAP,
                 id="a-rate-limit-caps-it"),
    # a pause of another queue, idle, does not cap the batch forecast for this one
    pytest.param({"flow": (QueueFlow("q"), QueueFlow("p", paused=True))}, 5, Rule.FORECAST,
                 id="another-queue-paused-no-cap"),
    pytest.param({"forecastBatches": False}, 0, Rule.IDLE, id="forecastBatches-off"),
])
def test_the_rules_that_must_win_over_the_forecast(case: dict[str, Any], replicas: int,
                                                   rule: Rule) -> None:
    """The forecast only raises the recommendation, before the flow limits and the clamp and
    after paused and Redis unreadable (which return first): each of those wins over it."""
    d = decide_in_lull(**case)
    assert (d.replicas, d.rule) == (replicas, rule)
    if rule not in (Rule.PAUSED, Rule.REDIS_UNREADABLE, Rule.FALLBACK_REPLICAS, Rule.IDLE):
        assert "forecast: batch of ~50 on q" in d.reason


@pytest.mark.parametrize("after, replicas, rule", [
    pytest.param({"w7": 0, "w6": 0, "w5": 1}, 6, Rule.DRAINING, id="a-busy-victim-stays"),
    pytest.param({"w7": 0, "w6": 0, "w5": 0}, 5, Rule.FORECAST, id="all-drained-leave"),
])
def test_a_scale_in_under_the_forecast_is_quiesced_then_removed(
        after: dict[str, int], replicas: int, rule: Rule) -> None:
    """8 pods, 6 of them busy, the forecast wants 5: the victims are quiesced and only those
    that hold nothing leave (the ReplicaSet order and the costs as for any rule)."""
    d = decide_in_lull(current=8, workers=BUSY_6_OF_8)
    assert (d.replicas, d.rule) == (5, Rule.FORECAST)
    observation = QueueObservation(at=POLL * 500, backlog={"q": 0}, workers=BUSY_6_OF_8)
    pods = tuple(PodView(w.worker_id, w.in_flight, created=float(i))
                 for i, w in enumerate(BUSY_6_OF_8))
    plan = quiesce.plan_scale_in(target=d.replicas, current=8, observation=observation,
                                 pods=pods)
    assert set(plan.quiesce) == set(after)
    outcome = Outcome(d, plan.settle(after, annotated=True))
    assert (outcome.replicas, outcome.rule) == (replicas, rule)
