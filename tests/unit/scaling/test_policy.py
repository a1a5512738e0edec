"""The scaling policy, table by table: (spec, observation, previous state) -> decision."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling.arrivals import Arrivals
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.policy import Decision, PolicyState, Rule, decide
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.service import ServiceTimes
from taskqueue.scaling.waitpolicy import burst_horizon

NOW = 1_000_000.0


def obs(
    queued: int = 0, *held: int, completed: int = 0, at: float = NOW, dead: bool = False
) -> QueueObservation:
    """`queued` tasks in one queue; one live worker per entry of `held` holding that many."""
    deadline = int((at - 10 if dead else at + 15) * 1000)
    workers = tuple(
        WorkerObservation(worker_id=f"w{i}", deadline_ms=deadline, in_flight=n)
        for i, n in enumerate(held)
    )
    return QueueObservation(at=at, backlog={"q": queued}, completed_total=completed,
                            workers=workers)


def scaling(**kw: Any) -> ScalingSpec:
    base: dict[str, Any] = {"minReplicas": 0, "maxReplicas": 10, "targetBacklogPerReplica": 10,
                            "scaleDownStabilizationSeconds": 0, "idleCooldownSeconds": 0}
    return ScalingSpec(**{**base, **kw})


def run(spec: ScalingSpec, observation: QueueObservation | None, replicas: int,
        **state: Any) -> Decision:
    # without wait targets every recommendation is steady: both windows hold the same history
    state.setdefault("steady_recommendations", state.get("recommendations", ()))
    return decide(spec=spec, observation=observation, state=PolicyState(replicas=replicas, **state),
                  now=NOW)


# -- the rule that decided -----------------------------------------------------------------------
@pytest.mark.parametrize("spec, observation, current, state, replicas, rule", [
    pytest.param(scaling(), obs(25), 1, {}, 3, Rule.SCALE_UP, id="scale-up"),
    pytest.param(scaling(maxScaleUpStep=1), obs(25), 1, {}, 2, Rule.MAX_SCALE_UP_STEP,
                 id="max-scale-up-step"),
    pytest.param(scaling(), obs(15), 4, {}, 2, Rule.SCALE_DOWN, id="scale-down"),
    pytest.param(scaling(maxScaleDownStep=1), obs(15), 4, {}, 3, Rule.MAX_SCALE_DOWN_STEP,
                 id="max-scale-down-step"),
    pytest.param(scaling(), obs(40), 4, {}, 4, Rule.HOLD, id="hold"),
    pytest.param(scaling(scaleDownStabilizationSeconds=30), obs(15), 4,
                 {"recommendations": ((NOW - 10, 4),)}, 4, Rule.STABILISATION_WINDOW,
                 id="held-in-the-window"),
    pytest.param(scaling(scaleDownStabilizationSeconds=30), obs(15), 4,
                 {"recommendations": ((NOW - 10, 3),)}, 3, Rule.STABILISATION_WINDOW,
                 id="down-to-the-window"),
    pytest.param(scaling(scaleDownStabilizationSeconds=30), obs(40), 4,
                 {"recommendations": ((NOW - 10, 6),)}, 4, Rule.HOLD,
                 id="the-load-holds-whatever-the-window"),
    pytest.param(scaling(maxReplicas=5), obs(500), 2, {}, 5, Rule.MAX_REPLICAS,
                 id="max-replicas-up"),
    pytest.param(scaling(maxReplicas=5), obs(500), 5, {}, 5, Rule.MAX_REPLICAS,
                 id="held-at-max-replicas"),
    pytest.param(scaling(minReplicas=2), obs(3), 4, {}, 2, Rule.MIN_REPLICAS,
                 id="min-replicas"),
    pytest.param(scaling(idleCooldownSeconds=30), obs(0), 3, {"last_active": NOW - 5}, 1,
                 Rule.IDLE_COOLDOWN, id="idle-cooldown"),
    pytest.param(scaling(idleCooldownSeconds=30), obs(0), 1, {"last_active": NOW - 5}, 1,
                 Rule.IDLE_COOLDOWN, id="held-by-the-idle-cooldown"),
    pytest.param(scaling(idleCooldownSeconds=30), obs(0), 3, {"last_active": NOW - 60}, 0,
                 Rule.IDLE, id="idle-past-the-cooldown"),
    pytest.param(scaling(), obs(0), 0, {}, 0, Rule.IDLE, id="idle-at-zero"),
    pytest.param(scaling(paused=True), obs(500), 2, {}, 2, Rule.PAUSED, id="paused"),
    pytest.param(scaling(paused=True), None, 2, {}, 2, Rule.PAUSED, id="paused-redis-unreadable"),
    pytest.param(scaling(), None, 2, {}, 2, Rule.REDIS_UNREADABLE, id="redis-unreadable"),
    pytest.param(scaling(fallbackReplicas=4), None, 2, {}, 4, Rule.FALLBACK_REPLICAS,
                 id="fallback-replicas"),
])
def test_every_decision_names_its_rule(spec: ScalingSpec, observation: QueueObservation | None,
                                       current: int, state: dict[str, Any], replicas: int,
                                       rule: Rule) -> None:
    decision = run(spec, observation, current, **state)
    assert (decision.replicas, decision.rule) == (replicas, rule), decision.reason


# -- activation and scale-out --------------------------------------------------------------------
@pytest.mark.parametrize("observation, current, expected", [
    pytest.param(obs(1), 0, 1, id="one-task-activates-0-to-1"),
    pytest.param(obs(0, 1), 0, 1, id="in-flight-only-activates"),
    pytest.param(obs(10), 0, 1, id="exactly-one-target"),
    pytest.param(obs(11), 0, 2, id="ceil-above-target"),
    pytest.param(obs(35, 5, 5), 2, 5, id="queued-plus-in-flight"),
    pytest.param(obs(500), 1, 10, id="clamped-to-max"),
    pytest.param(obs(40), 4, 4, id="steady"),
])
def test_scale_out_follows_demand_over_target(
    observation: QueueObservation, current: int, expected: int
) -> None:
    decision = run(scaling(), observation, current)
    assert decision.replicas == expected
    assert decision.previous == current


@pytest.mark.parametrize("step, current, expected", [
    pytest.param(None, 0, 10, id="unbounded"),
    pytest.param(2, 0, 2, id="step-2-from-zero"),
    pytest.param(2, 3, 5, id="step-2-from-3"),
    pytest.param(1, 9, 10, id="last-step-to-max"),
])
def test_scale_up_is_immediate_and_bounded_by_step(
    step: int | None, current: int, expected: int
) -> None:
    decision = run(scaling(maxScaleUpStep=step, scaleDownStabilizationSeconds=300), obs(1000),
                   current)
    assert decision.replicas == expected
    assert decision.recommendation == 10
    if step is not None and expected < 10:
        assert "maxScaleUpStep" in decision.reason


def test_activation_reason_and_rule() -> None:
    decision = run(scaling(), obs(1), 0)
    assert decision.changed
    assert decision.rule is Rule.SCALE_UP
    assert decision.state.last_active == NOW
    assert "scale up 0 -> 1" in decision.reason
    assert "1 queued" in decision.reason


# -- scale-in: stabilisation, step, in-flight protection -------------------------------------------
@pytest.mark.parametrize("history, expected", [
    pytest.param((), 6, id="no-history-seeds-current-holds"),
    pytest.param(((NOW - 10, 4),), 4, id="highest-in-window"),
    pytest.param(((NOW - 100, 5),), 2, id="outside-window-forgotten"),
    pytest.param(((NOW - 50, 3), (NOW - 5, 2)), 3, id="max-of-several"),
])
def test_scale_down_is_stabilised_over_the_window(
    history: tuple[tuple[float, int], ...], expected: int
) -> None:
    spec = scaling(scaleDownStabilizationSeconds=60)
    decision = run(spec, obs(15), 6, recommendations=history, last_active=NOW)
    assert decision.recommendation == 2
    assert decision.replicas == expected
    assert all(NOW - t < 60 for t, _ in decision.state.recommendations)
    assert decision.state.recommendations[-1] == (NOW, 2)


@pytest.mark.parametrize("step, expected", [
    pytest.param(None, 1, id="unbounded"),
    pytest.param(1, 7, id="one-at-a-time"),
    pytest.param(3, 5, id="three-at-a-time"),
])
def test_scale_down_bounded_by_step(step: int | None, expected: int) -> None:
    decision = run(scaling(maxScaleDownStep=step), obs(5), 8, last_active=NOW)
    assert decision.replicas == expected


@pytest.mark.parametrize("held, current, expected", [
    pytest.param((1, 1, 1), 5, 1, id="three-busy-workers-do-not-pin-three"),
    pytest.param((1, 0, 0), 5, 1, id="idle-workers-do-not-count"),
    pytest.param((2, 2, 2, 2), 4, 1, id="demand-small-all-busy-still-one"),
])
def test_busy_workers_do_not_hold_the_fleet(
    held: tuple[int, ...], current: int, expected: int
) -> None:
    # the operator quiesces the pods it removes and deletes them once drained
    # (taskqueue.scaling.quiesce), so the policy asks for what the demand needs
    decision = run(scaling(targetBacklogPerReplica=100), obs(0, *held), current, last_active=NOW)
    assert decision.replicas == expected


def test_dead_workers_in_flight_counts_as_demand() -> None:
    # a crashed worker's list still holds tasks: they are demand, but no live pod holds them
    decision = run(scaling(targetBacklogPerReplica=100), obs(0, 3, 3, dead=True), 2,
                   last_active=NOW)
    assert decision.replicas == 1


# -- scale to zero ---------------------------------------------------------------------------------
@pytest.mark.parametrize("idle_for, cooldown, current, expected", [
    pytest.param(0, 60, 3, 1, id="just-idle-keeps-one"),
    pytest.param(59, 60, 1, 1, id="inside-cooldown-holds-one"),
    pytest.param(60, 60, 1, 0, id="cooldown-over-scales-to-zero"),
    pytest.param(600, 60, 4, 0, id="long-idle-straight-to-zero"),
    pytest.param(0, 0, 2, 0, id="no-cooldown"),
])
def test_scale_to_zero_only_after_idle_cooldown(
    idle_for: float, cooldown: float, current: int, expected: int
) -> None:
    decision = run(scaling(idleCooldownSeconds=cooldown), obs(0), current,
                   last_active=NOW - idle_for)
    assert decision.replicas == expected
    assert "idleCooldownSeconds" in decision.reason


@pytest.mark.parametrize("completed_before, completed_now, last_poll_ago, replicas, active_ago", [
    pytest.param(40, 41, 2, 1, 2, id="a-task-done-between-two-empty-polls-keeps-the-fleet"),
    pytest.param(40, 55, 5, 1, 5, id="counted-from-the-last-poll-not-from-this-one"),
    pytest.param(41, 41, 2, 0, 60, id="nothing-done-since-the-last-poll-is-idle"),
    pytest.param(90, 3, 2, 0, 60, id="a-reset-counter-is-not-activity"),
])
def test_tasks_that_come_and_go_between_polls_are_activity(
    completed_before: int, completed_now: int, last_poll_ago: float, replicas: int,
    active_ago: float,
) -> None:
    """Tasks shorter than a poll are never seen queued or held: the completions counter says
    the fleet served them, and the cooldown runs from the last poll before they ended."""
    decision = run(scaling(idleCooldownSeconds=30), obs(0, completed=completed_now), 1,
                   last_active=NOW - 60, completed_total=completed_before,
                   completed_at=NOW - last_poll_ago)
    assert decision.replicas == replicas
    assert decision.state.last_active == NOW - active_ago


def test_unknown_last_active_starts_the_cooldown_now() -> None:
    decision = run(scaling(idleCooldownSeconds=30), obs(0), 2)
    assert decision.replicas == 1
    assert decision.state.last_active == NOW


def test_min_replicas_floor_when_idle() -> None:
    decision = run(scaling(minReplicas=2), obs(0), 5, last_active=NOW - 1000)
    assert decision.replicas == 2
    assert "minReplicas" in decision.reason


@pytest.mark.parametrize("idle_for, expected", [
    pytest.param(9, 3, id="inside-cooldown-window-holds"),
    pytest.param(10, 0, id="cooldown-over-ignores-window"),
])
def test_scale_to_zero_after_the_cooldown_does_not_wait_for_the_window(
    idle_for: float, expected: int
) -> None:
    spec = scaling(idleCooldownSeconds=10, scaleDownStabilizationSeconds=300)
    decision = run(spec, obs(0), 3, last_active=NOW - idle_for, recommendations=((NOW - 25, 3),))
    assert decision.replicas == expected


def test_the_window_still_holds_a_busy_fleet() -> None:
    spec = scaling(idleCooldownSeconds=10, scaleDownStabilizationSeconds=300)
    decision = run(spec, obs(1), 3, last_active=NOW, recommendations=((NOW - 25, 3),))
    assert decision.replicas == 3


# -- throughput target -----------------------------------------------------------------------------
@pytest.mark.parametrize("drain, rate, queued, expected", [
    pytest.param(None, 1.0, 100, 10, id="no-drain-target"),
    pytest.param(10, 2.0, 100, 10, id="drain-larger-wins-5-vs-10"),
    pytest.param(10, 0.5, 100, 20, id="slow-rate-needs-more-clamped"),
    pytest.param(20, 1.0, 100, 10, id="backlog-target-larger"),
    pytest.param(10, None, 100, 10, id="rate-not-measured-yet"),
    # hours of long tasks without a completion halve the smoothed rate every poll, down to a
    # denormal: 100 / (5e-324 x 10) is infinity (OverflowError on every poll, before)
    pytest.param(10, 5e-324, 100, 40, id="rate-decayed-to-nothing-asks-for-max"),
])
def test_throughput_target(
    drain: float | None, rate: float | None, queued: int, expected: int
) -> None:
    spec = scaling(maxReplicas=40, targetDrainSeconds=drain)
    decision = run(spec, obs(queued), 1, throughput_per_replica=rate)
    assert decision.replicas == expected


def test_throughput_measured_from_the_completed_counter() -> None:
    state = PolicyState(replicas=2, completed_total=100, completed_at=NOW - 10, last_active=NOW)
    decision = decide(spec=scaling(), observation=obs(15, completed=140), state=state, now=NOW)
    assert decision.state.throughput_per_replica == pytest.approx(2.0)  # 40 tasks / 10 s / 2
    # smoothed with the previous estimate on the next poll
    later = decide(spec=scaling(), observation=obs(15, completed=160, at=NOW + 10),
                   state=decision.state, now=NOW + 10)
    assert later.state.throughput_per_replica == pytest.approx(0.5 * 1.0 + 0.5 * 2.0)


@pytest.mark.parametrize("previous, replicas, completed, queued", [
    pytest.param(100, 2, 90, 5, id="counter-reset"),
    pytest.param(100, 0, 150, 5, id="no-replicas"),
    pytest.param(100, 2, 100, 0, id="idle-keeps-old-rate"),
])
def test_throughput_not_updated_from_meaningless_samples(
    previous: int, replicas: int, completed: int, queued: int
) -> None:
    state = PolicyState(replicas=replicas, completed_total=previous, completed_at=NOW - 10,
                        throughput_per_replica=3.0, last_active=NOW)
    decision = decide(spec=scaling(), observation=obs(queued, completed=completed), state=state,
                      now=NOW)
    assert decision.state.throughput_per_replica == 3.0
    assert decision.state.completed_total == completed


# -- Redis errors and pause ------------------------------------------------------------------------
@pytest.mark.parametrize("fallback, current, expected", [
    pytest.param(None, 4, 4, id="hold"),
    pytest.param(None, 0, 0, id="hold-zero"),
    pytest.param(2, 4, 2, id="fallback"),
    pytest.param(3, 0, 3, id="fallback-from-zero"),
    pytest.param(0, 4, 1, id="never-drops-to-zero"),
    pytest.param(50, 1, 10, id="fallback-clamped"),
])
def test_redis_error(fallback: int | None, current: int, expected: int) -> None:
    decision = run(scaling(fallbackReplicas=fallback), None, current)
    assert decision.replicas == expected
    assert decision.reason.startswith("redis unreachable")


@pytest.mark.parametrize("observation", [
    pytest.param(obs(1000), id="burst"),
    pytest.param(obs(0), id="idle"),
    pytest.param(None, id="redis-error"),
])
@pytest.mark.parametrize("current", [0, 3])
def test_paused_holds(observation: QueueObservation | None, current: int) -> None:
    decision = run(scaling(paused=True, fallbackReplicas=5), observation, current,
                   last_active=NOW - 1000)
    assert decision.replicas == current
    assert decision.reason.startswith("paused")
    assert not decision.changed


# -- bounds changes and purity ---------------------------------------------------------------------
@pytest.mark.parametrize("spec, current, expected", [
    pytest.param(scaling(maxReplicas=3, maxScaleDownStep=1), 8, 3, id="max-lowered-applies-now"),
    pytest.param(scaling(minReplicas=4), 1, 4, id="min-raised-applies-now"),
    pytest.param(scaling(minReplicas=4, maxScaleUpStep=1), 0, 4, id="min-beats-the-up-step"),
    pytest.param(scaling(minReplicas=4, maxScaleUpStep=1), 2, 4, id="min-raised-beats-the-step"),
])
def test_bounds_changes_apply_at_once(spec: ScalingSpec, current: int, expected: int) -> None:
    assert run(spec, obs(25), current, last_active=NOW).replicas == expected


@pytest.mark.parametrize("window", [0, 300])
@pytest.mark.parametrize("step", [None, 1, 3])
def test_an_idle_taskqueue_past_its_cooldown_goes_to_zero_at_once(
    window: float, step: int | None
) -> None:
    # nothing is queued or in flight: the cooldown was the stabilisation, and no pod holds a
    # task, so neither the window nor maxScaleDownStep paces the pods out
    spec = scaling(idleCooldownSeconds=30, scaleDownStabilizationSeconds=window,
                   maxScaleDownStep=step)
    decision = run(spec, obs(0), 8, last_active=NOW - 31, recommendations=((NOW - 20, 8),))
    assert (decision.recommendation, decision.replicas) == (0, 0)
    assert "idleCooldownSeconds" in decision.reason


def test_maxscaledownstep_still_paces_a_scale_in_under_load() -> None:
    decision = run(scaling(maxScaleDownStep=1, idleCooldownSeconds=30), obs(0, 1), 8,
                   last_active=NOW)
    assert decision.replicas == 7


def test_decide_is_pure() -> None:
    state = PolicyState(replicas=2, last_active=NOW - 5)
    first = decide(spec=scaling(), observation=obs(33), state=state, now=NOW)
    second = decide(spec=scaling(), observation=obs(33), state=state, now=NOW)
    assert first == second
    assert state == PolicyState(replicas=2, last_active=NOW - 5)


def test_a_poll_sequence_burst_then_drain_then_zero() -> None:
    spec = scaling(maxReplicas=5, idleCooldownSeconds=10, scaleDownStabilizationSeconds=5)
    state, t, seen = PolicyState(replicas=0), NOW, []
    for queued, held in [(1, ()), (80, (1,)), (30, (1, 1, 1, 1, 1)), (0, (1, 1)), (0, ()),
                         (0, ()), (0, ()), (0, ()), (0, ()), (0, ()), (0, ())]:
        d = decide(spec=spec, observation=obs(queued, *held, at=t), state=state, now=t)
        state, t = d.state, t + 2
        seen.append(d.replicas)
    # t=4: 35/10 = 4 but the window (5 s) holds the 5 of t=2 until t=6; t=8: the window holds
    # 4 (t=4); t=10: idle 4 s < 10 s keeps one; t=16: idle 10 s: zero at once, not waiting for
    # the window (the cooldown is the idle fleet's stabilisation).
    assert seen == [1, 5, 5, 5, 4, 1, 1, 1, 0, 0, 0]


# -- targetWaitSeconds -----------------------------------------------------------------------------
def measured(rate: dict[str, float], service: float) -> Rates:
    """Rates as if measured over a long busy spell: `rate` tasks/s per queue, `service` s each."""
    counts = tuple((q, r * 100) for q, r in rate.items())
    return Rates(at=NOW, completed=0,
                 arrivals=Arrivals(elapsed=100.0, elapsed_short=100.0, counts=counts,
                                   counts_short=counts),
                 service=ServiceTimes(busy_seconds=service * 1000, completions=1000.0))


def wait_obs(backlog: dict[str, int], *held: int) -> QueueObservation:
    workers = tuple(WorkerObservation(f"w{i}", int((NOW + 15) * 1000), n)
                    for i, n in enumerate(held))
    return QueueObservation(at=NOW, backlog=backlog, workers=workers)


@pytest.mark.parametrize("targets, backlog, rate, concurrency, expected", [
    # 9.8/s x 2 s = 19.6 slots busy; p95 <= 2 s needs 22 slots
    pytest.param({"q": 2.0}, {"q": 0}, {"q": 9.8}, 4, 6, id="steady-c4"),
    pytest.param({"q": 2.0}, {"q": 0}, {"q": 9.8}, 1, 22, id="steady-c1"),
    pytest.param({"q": 60.0}, {"q": 0}, {"q": 9.8}, 4, 5, id="loose-target-fewer"),
    # 100 queued beyond the normal 19: 19.6 + 81 x 2 s / max(2 s, start-up 5 s) slots
    pytest.param({"q": 2.0}, {"q": 100}, {"q": 9.8}, 4, 13, id="burst-within-a-poll"),
    pytest.param({"high": 1.0}, {"high": 0, "low": 0}, {"high": 2.0, "low": 2.0}, 1, 10,
                 id="high-priority-target"),
    pytest.param({"low": 100.0}, {"high": 0, "low": 0}, {"high": 2.0, "low": 2.0}, 1, 9,
                 id="low-priority-target"),
])
def test_wait_target_sizes_the_fleet(targets: dict[str, float], backlog: dict[str, int],
                                     rate: dict[str, float], concurrency: int,
                                     expected: int) -> None:
    spec = scaling(maxReplicas=100, targetWaitSeconds=targets, podStartupSeconds=5)
    state = PolicyState(replicas=3, rates=measured(rate, 2.0), last_active=NOW)
    decision = decide(spec=spec, observation=wait_obs(backlog, 1), state=state, now=NOW,
                      concurrency=concurrency, queue_order=tuple(backlog))
    assert decision.recommendation == expected
    assert "p95 wait of" in decision.reason


A_SLOT_EACH = "no service time yet: a slot for each of 35 queued + 1 in flight / concurrency 1 = 36"


@pytest.mark.parametrize("targets, service, replicas, why", [
    pytest.param(None, ServiceTimes(), 4, "demand 36 (35 queued + 1 in flight) / target 10 = 4",
                 id="no-target-the-length-target"),
    # no service time: a slot per task queued or in flight, up to maxReplicas
    pytest.param({"q": 2.0}, ServiceTimes(), 36, A_SLOT_EACH, id="a-slot-per-task"),
    # the burst's first task has run 1 s and one has ended after 1 s: a lower bound of the
    # service time, not a measure of it (a long task is still running); the wait model sized
    # with it asks for fewer pods, and each task still gets a slot
    pytest.param({"q": 2.0}, ServiceTimes(busy_seconds=2.0, completions=1.0, in_flight=1), 36,
                 A_SLOT_EACH, id="a-slot-per-task-on-the-lower-bound"),
    # three tasks ended: measured, the wait model alone sizes the burst
    pytest.param({"q": 2.0}, ServiceTimes(busy_seconds=3.0, completions=3.0, in_flight=1), 3,
                 "p95 wait of q <= 2s at 1/s, S 1s", id="measured-the-wait-model"),
])
def test_a_wait_target_gives_each_task_a_slot_until_the_service_time_is_known(
        targets: dict[str, float] | None, service: ServiceTimes, replicas: int,
        why: str) -> None:
    spec = scaling(maxReplicas=100, targetWaitSeconds=targets)
    arrivals = Arrivals(elapsed=100.0, elapsed_short=100.0, counts=(("q", 100.0),),
                        counts_short=(("q", 100.0),))
    decision = run(spec, obs(35, 1), 1, rates=Rates(at=NOW, arrivals=arrivals, service=service))
    assert decision.replicas == replicas
    assert why in decision.reason
    assert (A_SLOT_EACH in decision.reason) == (why == A_SLOT_EACH)


def test_the_first_bursts_pods_leave_with_its_backlog() -> None:
    # the poll before, 36 pods for 36 tasks (no service time yet); now nothing is queued and
    # 20 tasks are in flight, the service time still unknown: the window's 36 was a burst's, so
    # only the steady window holds the fleet (quiesce removes the pods as they drain)
    spec = scaling(maxReplicas=100, targetWaitSeconds={"q": 2.0},
                   scaleDownStabilizationSeconds=15)
    first = decide(spec=spec, observation=obs(35, 1), state=PolicyState(replicas=1), now=NOW - 2,
                   queue_order=("q",))
    assert first.replicas == 36
    drained = decide(spec=spec, observation=obs(0, *[1] * 20), state=first.state, now=NOW,
                     queue_order=("q",))
    assert drained.replicas == 2


@pytest.mark.parametrize("low_rate, low_queued, held, expected, why", [
    pytest.param(0.0, 95, 1, 10, "demand 95", id="95-queued-on-low-over-10-per-replica"),
    # the low queue's 10/s x 1 s = 10 slots hold 10 pods at concurrency 1; the high queue's
    # load is the wait model's (counted there, not twice)
    pytest.param(10.0, 0, 10, 10, "the measured load 10 slots", id="low-queue-load-holds-it"),
])
def test_length_target_still_applies_to_queues_without_a_wait_target(
        low_rate: float, low_queued: int, held: int, expected: int, why: str) -> None:
    spec = scaling(maxReplicas=100, targetWaitSeconds={"high": 60.0})
    state = PolicyState(replicas=held, rates=measured({"high": 0.1, "low": low_rate}, 1.0),
                        last_active=NOW)
    decision = decide(spec=spec, observation=wait_obs({"high": 0, "low": low_queued},
                                                      *([1] * held)),
                      state=state, now=NOW, concurrency=1, queue_order=("high", "low"))
    assert decision.recommendation == expected
    assert why in decision.reason


@pytest.mark.parametrize("queued, held, rate, service, expected, why", [
    # 20/s x 1 s = 20 busy slots = 5 pods of 4; the length target alone says 20 / 10 = 2
    pytest.param(0, (4, 4, 4, 4, 4), 20.0, 1.0, 5, "the measured load 20 slots",
                 id="load-holds-the-fleet-when-the-queue-is-briefly-empty"),
    pytest.param(7, (4, 4, 4, 4, 3), 20.0, 1.0, 5, "the measured load",
                 id="load-over-a-short-queue"),
    # a backlog the length target sizes past the load: the length target wins
    pytest.param(95, (4, 4, 4, 4, 4), 20.0, 1.0, 12, "demand 115",
                 id="length-target-over-the-load"),
    pytest.param(0, (2, 2), 2.0, 1.0, 1, "demand 4", id="light-load-length-target"),
])
def test_length_target_holds_at_least_the_measured_load(
        queued: int, held: tuple[int, ...], rate: float, service: float, expected: int,
        why: str) -> None:
    spec = scaling(maxReplicas=100)
    state = PolicyState(replicas=len(held), rates=measured({"q": rate}, service),
                        last_active=NOW)
    observation = QueueObservation(at=NOW, backlog={"q": queued}, workers=tuple(
        WorkerObservation(f"w{i}", int((NOW + 15) * 1000), n) for i, n in enumerate(held)))
    decision = decide(spec=spec, observation=observation, state=state, now=NOW, concurrency=4,
                      queue_order=("q",))
    assert decision.recommendation == expected
    assert why in decision.reason


def test_the_load_floor_waits_for_a_measured_service_time() -> None:
    # arrivals measured, no task completed yet: the length target alone
    rates = Rates(at=NOW, arrivals=Arrivals(elapsed=100.0, elapsed_short=100.0,
                                            counts=(("q", 2000.0),),
                                            counts_short=(("q", 2000.0),)))
    state = PolicyState(replicas=5, rates=rates, last_active=NOW)
    decision = decide(spec=scaling(maxReplicas=100), observation=obs(0, 4, 4, 4, 4, 4),
                      state=state, now=NOW, concurrency=4, queue_order=("q",))
    assert decision.recommendation == 2
    assert "measured load" not in decision.reason


@pytest.mark.parametrize("due_soon, expected, why", [
    pytest.param(0, 0, "hold 0", id="nothing-due-stays-at-zero"),
    pytest.param(1, 1, "p95 wait", id="one-due-activates"),
    pytest.param(35, 4, "35 due soon", id="due-soon-over-the-wait-target"),
])
def test_tasks_due_soon_count_beside_the_wait_targets(due_soon: int, expected: int,
                                                       why: str) -> None:
    # every queue has a wait target and no arrivals are measured: the wait model asks for at
    # most one slot, but delayed tasks falling due within the horizon are still demand
    spec = scaling(maxReplicas=100, targetWaitSeconds={"q": 2.0})
    state = PolicyState(replicas=0, rates=measured({"q": 0.0}, 1.0))
    observation = QueueObservation(at=NOW, backlog={"q": 0}, due_soon=due_soon)
    decision = decide(spec=spec, observation=observation, state=state, now=NOW,
                      concurrency=1, queue_order=("q",))
    assert decision.recommendation == expected
    assert why in decision.reason


# -- a burst's pods leave with its backlog -----------------------------------------------
@pytest.mark.parametrize("backlog, expected, why", [
    # 9.8/s x 2 s needs 6 pods at concurrency 4; the window remembers 13 from the burst
    pytest.param(0, 6, "scale down 13 -> 6", id="backlog-gone-steady-window-only"),
    pytest.param(19, 6, "scale down 13 -> 6", id="normal-fluctuation-is-not-a-burst"),
    pytest.param(60, 13, "hold 13", id="burst-still-draining-holds-the-window"),
])
def test_burst_pods_are_not_stabilised(backlog: int, expected: int, why: str) -> None:
    spec = scaling(maxReplicas=100, targetWaitSeconds={"q": 2.0},
                   scaleDownStabilizationSeconds=60)
    state = PolicyState(replicas=13, rates=measured({"q": 9.8}, 2.0), last_active=NOW,
                        recommendations=((NOW - 10, 13),), steady_recommendations=((NOW - 10, 6),))
    decision = decide(spec=spec, observation=wait_obs({"q": backlog}, 4), state=state, now=NOW,
                      concurrency=4, queue_order=("q",))
    assert decision.replicas == expected
    assert why in decision.reason
    assert decision.state.steady_recommendations[-1] == (NOW, 6)


def test_a_steady_rise_is_still_stabilised() -> None:
    # no burst: the steady window (the rates measured a minute ago) holds the fleet as the HPA's
    spec = scaling(maxReplicas=100, targetWaitSeconds={"q": 2.0},
                   scaleDownStabilizationSeconds=60)
    state = PolicyState(replicas=8, rates=measured({"q": 9.8}, 2.0), last_active=NOW,
                        recommendations=((NOW - 10, 8),), steady_recommendations=((NOW - 10, 8),))
    decision = decide(spec=spec, observation=wait_obs({"q": 0}, 4), state=state, now=NOW,
                      concurrency=4, queue_order=("q",))
    assert decision.recommendation == 6
    assert decision.replicas == 8


def test_the_workers_reported_service_time_sizes_the_wait_target() -> None:
    # every task ran between two polls: the in-flight samples see none, the workers' totals
    # say 60 low tasks took 4 s each; 60 just queued on low, with pods up in 5 s, have the
    # other 5 s of their 10 s target to start in: k slots start k (1 + 5 s / 4 s) of them,
    # 95 % of 60 -> 25.3 slots, plus the arrivals they count as (a batch: capped at 3 in 5 s)
    spec = scaling(maxReplicas=100, targetWaitSeconds={"low": 10.0}, podStartupSeconds=5)
    state, seen = PolicyState(replicas=1, last_active=NOW), []
    for at, backlog, service in [
        (NOW - 10, {"high": 0, "low": 0}, {"high": (0.0, 0), "low": (0.0, 0)}),
        (NOW - 5, {"high": 0, "low": 0}, {"high": (10.0, 20), "low": (240.0, 60)}),
        (NOW, {"high": 0, "low": 60}, {"high": (10.0, 20), "low": (240.0, 60)}),
    ]:
        observation = QueueObservation(at=at, backlog=backlog, service=service,
                                       oldest_enqueued_at={"low": at} if backlog["low"] else {})
        decision = decide(spec=spec, observation=observation, state=state, now=at,
                          concurrency=1, queue_order=("high", "low"))
        state = decision.state
        seen.append(decision)
    assert "S 4s" in seen[-1].reason
    assert seen[-1].recommendation == 26


@pytest.mark.parametrize("poll, startup, horizon, slots", [
    # 19.6 busy + 0.95 x (100 - 19 normal) / (1 + w / 2 s), at concurrency 1: each added slot
    # runs at least the horizon, w = horizon - 2 s (the 2 s target is out of reach)
    pytest.param(5, 5, 5, 51, id="pods-up-in-a-poll"),
    pytest.param(1, 5, 5, 51, id="fast-polls-do-not-overreact"),
    pytest.param(5, 30, 30, 25, id="slow-start-up-fewer-pods"),
    pytest.param(10, 0, 10, 35, id="at-least-a-poll"),
])
def test_a_burst_is_started_no_faster_than_pods_start(poll: float, startup: float,
                                                      horizon: float, slots: int) -> None:
    spec = scaling(maxReplicas=1000, targetWaitSeconds={"q": 2.0},
                   pollIntervalSeconds=poll, podStartupSeconds=startup)
    assert burst_horizon(spec) == horizon
    state = PolicyState(replicas=3, rates=measured({"q": 9.8}, 2.0), last_active=NOW)
    decision = decide(spec=spec, observation=wait_obs({"q": 100}, 1), state=state, now=NOW,
                      concurrency=1, queue_order=("q",))
    assert decision.recommendation == slots
