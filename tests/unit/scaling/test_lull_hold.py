"""The next batch's fleet is held through a lull only while that costs less idle time than
re-activating it (a poll + podStartupSeconds, + scaling.holdThroughLullsSeconds): the gap
between batches (`QueueLoad.batch_gap`), what the wait model holds (`size_for_wait`'s
`hold_lulls`), the rule and reason the policy gives, and the end result in the simulator. Pure."""

from __future__ import annotations

import random
from typing import Any

import pytest

from taskqueue.api.models import ScalingSpec, TaskQueue
from taskqueue.scaling.observation import QueueObservation
from taskqueue.scaling.policy import Decision, PolicyState, Rule, decide
from taskqueue.scaling.waitmodel import QueueLoad, size_for_wait
from taskqueue.scaling.waitpolicy import lull_budget
from taskqueue.simulate.run import simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.simulate.trace import Arrival

from .test_batch_arrivals import (
    POLL,
    batch_counts,
    measured,
    poisson_counts,
    trickle_and_batches,
    with_service,
)


# -- the gap between batches -------------------------------------------------------------------
@pytest.mark.parametrize("rate, ca2, gap", [
    pytest.param(2.0, 11.0, 5.5, id="batches-of-11-at-2-per-s"),
    pytest.param(0.1, 30.0, 300.0, id="batches-of-30-at-0.1-per-s"),
    pytest.param(2.0, 1.0, None, id="poisson"),
    pytest.param(2.0, 0.5, None, id="smoother-than-poisson"),
    pytest.param(2.0, None, None, id="dispersion-unknown"),
    pytest.param(0.0, 11.0, None, id="no-arrivals"),
])
def test_the_gap_between_batches(rate: float, ca2: float | None, gap: float | None) -> None:
    assert QueueLoad("q", rate, 0, 5.0, arrival_cv2=ca2).batch_gap() == gap


@pytest.mark.parametrize("spec, budget", [
    pytest.param({}, 32.0, id="defaults-poll-2-startup-30"),
    pytest.param({"podStartupSeconds": 5}, 7.0, id="startup-5"),
    pytest.param({"podStartupSeconds": 5, "holdThroughLullsSeconds": 300}, 307.0,
                 id="paying-for-latency"),
])
def test_the_lull_budget_is_reactivation_plus_the_knob(spec: dict[str, Any],
                                                         budget: float) -> None:
    assert lull_budget(ScalingSpec(**spec)) == budget


# -- the wait model ----------------------------------------------------------------------------
@pytest.mark.parametrize("rate, ca2, queued, hold, steady, batches, released", [
    # batches of 11 at 2/s of 0.5 s tasks, ~5.5 s apart: held under a 7 s budget
    pytest.param(2.0, 11.0, 0, 7.0, 4, 4, (), id="close-batches-held"),
    # batches of 30 every ~300 s: sized as Poisson at 0.1/s (one slot), released
    pytest.param(0.1, 30.0, 0, 7.0, 1, 0, (("q", 300.0),), id="far-batches-released"),
    # ... unless the user pays for the latency
    pytest.param(0.1, 30.0, 0, 307.0, 9, 9, (), id="far-batches-held-by-the-knob"),
    # no budget given: every batch held (the model alone)
    pytest.param(0.1, 30.0, 0, None, 9, 9, (), id="no-budget-holds"),
    # Poisson arrivals have no batches to hold or release
    pytest.param(2.0, 1.0, 0, 7.0, 2, 0, (), id="poisson"),
])
def test_the_wait_model_holds_batches_that_pay(rate: float, ca2: float, queued: int,
                                               hold: float | None, steady: int, batches: int,
                                               released: tuple[tuple[str, float], ...]) -> None:
    sizing = size_for_wait([QueueLoad("q", rate, queued, 2.0, arrival_cv2=ca2)], service=0.5,
                           hold_lulls=hold)
    assert (sizing.steady, sizing.batches, sizing.released) == (steady, batches, released)


# batches of 30 at 0.3/s (~100 s apart) of 2 s tasks, 2 s target, 0.02/s between them
@pytest.mark.parametrize("between, hold, steady", [
    # released: Poisson at the rate between batches (0.04 erlangs: one slot)
    pytest.param(0.02, 7.0, 1, id="released-sized-by-the-rate-between"),
    # unmeasured: at the whole rate (0.6 erlangs: two)
    pytest.param(None, 7.0, 2, id="released-without-it-the-whole-rate"),
    # held, the batches are the rate: the slots that start the next one
    pytest.param(0.02, 307.0, 23, id="held-the-batches-count"),
])
def test_released_batches_leave_the_rate_between_them(between: float | None,
                                                      hold: float, steady: int) -> None:
    load = QueueLoad("q", 0.3, 0, 2.0, arrival_cv2=30.0, between_rate=between)
    assert size_for_wait([load], service=2.0, hold_lulls=hold).steady == steady


# batches of 11 at 2/s: ~5.5 s apart; against a 5 s budget they are over it, not far over
@pytest.mark.parametrize("hold, before, released", [
    pytest.param(5.0, frozenset(), (), id="held-stays-held-just-over-the-budget"),
    pytest.param(5.0, frozenset({"q"}), (("q", 5.5),), id="released-stays-released-over-it"),
    pytest.param(4.0, frozenset(), (("q", 5.5),), id="held-released-a-quarter-over"),
    pytest.param(6.0, frozenset({"q"}), (), id="released-held-again-under-it"),
    pytest.param(5.0, frozenset({"other"}), (), id="only-its-own-queue-counts"),
])
def test_the_choice_keeps_to_itself_near_the_budget(
        hold: float, before: frozenset[str], released: tuple[tuple[str, float], ...]) -> None:
    """Near the budget holding and re-activating cost the same and the gap is a measurement:
    a queue's batches change between held and released only once the gap leaves the band
    from the budget to LULL_MARGIN x the budget."""
    sizing = size_for_wait([QueueLoad("q", 2.0, 0, 2.0, arrival_cv2=11.0)], service=0.5,
                           hold_lulls=hold, released_before=before)
    assert sizing.released == released
    assert (sizing.batches > 0) is (not released)


def test_the_policy_remembers_which_batches_it_released() -> None:
    """The policy carries the released queues from one poll to the next
    (`PolicyState.lull_released`) and the forecast rule reads the same choice."""
    spec = {"podStartupSeconds": 3.0}  # a 5 s budget: MICRO's ~5.6 s gap is inside the band
    held = decide_state(MICRO, idle_for=6.0, **spec)
    assert held.lull_released == frozenset()
    released = decide_state(MICRO, idle_for=6.0, lull_released=frozenset({"q"}), **spec)
    assert released.lull_released == frozenset({"q"})


def test_a_released_batch_that_lands_is_a_burst() -> None:
    # 30 tasks queued on a queue whose batches are released: more than its Poisson fleet
    # starts in time (a burst, sized from the backlog); held, the same batch is the normal
    # queue of a fleet already sized for it
    load = QueueLoad("q", 0.1, 30, 2.0, arrival_cv2=30.0)
    released = size_for_wait([load], service=0.5, horizon=5.0, startup=5.0, hold_lulls=7.0)
    held = size_for_wait([load], service=0.5, horizon=5.0, startup=5.0, hold_lulls=307.0)
    assert released.burst and released.slots > released.steady == 1
    assert not held.burst


# -- the policy ----------------------------------------------------------------------------------
def decide_at(counts: list[int], *, idle_for: float, queued: int = 0, current: int = 5,
              **spec: Any) -> tuple[int, Rule, str]:
    """The decision after polls that saw `counts` arrive, of 0.5 s tasks, with `queued` tasks
    queued now and the last work seen `idle_for` seconds ago."""
    d = decision_at(counts, idle_for=idle_for, queued=queued, current=current, **spec)
    return d.replicas, d.rule, d.reason


def decide_state(counts: list[int], *, idle_for: float,
                 lull_released: frozenset[str] = frozenset(), **spec: Any) -> PolicyState:
    """The state `decide_at`'s decision leaves, from a state with `lull_released`."""
    return decision_at(counts, idle_for=idle_for, lull_released=lull_released, **spec).state


def decision_at(counts: list[int], *, idle_for: float, queued: int = 0, current: int = 5,
                lull_released: frozenset[str] = frozenset(), **spec: Any) -> Decision:
    rates = with_service(measured(counts), 0.5)
    scaling = ScalingSpec(**{"maxReplicas": 20, "idleCooldownSeconds": 30,
                             "scaleDownStabilizationSeconds": 0, "podStartupSeconds": 5,
                             "targetWaitSeconds": {"q": 2.0}, **spec})
    at = POLL * (len(counts) + 1)
    observation = QueueObservation(at=at, backlog={"q": queued}, taken=dict(rates.taken),
                                   completed_total=rates.completed,
                                   oldest_enqueued_at={"q": at} if queued else {})
    state = PolicyState(replicas=current, rates=rates, last_active=at - idle_for,
                        lull_released=lull_released)
    return decide(spec=scaling, observation=observation, state=state, now=at, queue_order=("q",))


MICRO = batch_counts(10, 5.0, 300)
"""Batches of ~10 every ~5 s: ~5.6 s apart as measured."""
APART = batch_counts(20, 30.0, 600)
"""Batches of 20 every ~30 s: ~32 s apart as measured."""


@pytest.mark.parametrize("counts, idle_for, spec, replicas, rule, says", [
    pytest.param(MICRO, 6.0, {}, 4, Rule.NEXT_BATCH, "for the next batch",
                 id="close-batches-held"),
    pytest.param(APART, 6.0, {}, 1, Rule.LULL_RELEASED,
                 "idle a held pod longer than 7s to re-activate: not held",
                 id="far-batches-released"),
    pytest.param(APART, 6.0, {"holdThroughLullsSeconds": 60}, 7, Rule.NEXT_BATCH,
                 "for the next batch", id="far-batches-held-by-the-knob"),
    pytest.param(APART, 6.0, {"podStartupSeconds": 60}, 7, Rule.NEXT_BATCH,
                 "for the next batch", id="slow-pods-make-holding-cheaper"),
    pytest.param(APART, 6.0, {"holdThroughLullsSeconds": 10}, 1, Rule.LULL_RELEASED,
                 "+ holdThroughLullsSeconds 10", id="too-little-paid-for-latency"),
    pytest.param(poisson_counts(2.0, 300), 6.0, {}, 1, Rule.IDLE_COOLDOWN, "idle 6s",
                 id="poisson-idle-is-idle"),
    pytest.param(APART, 40.0, {}, 0, Rule.IDLE, "idle 40s", id="past-the-cooldown"),
])
def test_the_idle_rule_holds_or_releases_the_next_batch(
        counts: list[int], idle_for: float, spec: dict[str, Any], replicas: int, rule: Rule,
        says: str) -> None:
    got, got_rule, reason = decide_at(counts, idle_for=idle_for, **spec)
    assert (got, got_rule) == (replicas, rule)
    assert says in reason


@pytest.mark.parametrize("spec, replicas", [
    pytest.param({}, 1, id="released-one-task-is-one-task"),
    pytest.param({"holdThroughLullsSeconds": 60}, 7, id="held-a-task-brings-the-batch-fleet"),
])
def test_a_task_between_released_batches_is_sized_by_the_rate(spec: dict[str, Any],
                                                              replicas: int) -> None:
    # one task queued between batches ~31 s apart: the fleet the rate needs, not the batch's
    got, _, _ = decide_at(APART, idle_for=0.0, queued=1, current=1, **spec)
    assert got == replicas


def test_a_trickle_between_released_batches_is_sized_by_its_own_rate() -> None:
    # 0.5/s of 0.5 s tasks and 30 at once every 60 s: ~1.05/s in all, batches ~16 s apart
    # (released); a task queued between two batches gets the trickle's pod (0.23 erlangs),
    # not the two the whole rate would ask for (0.53 erlangs against a 2 s target)
    d = decision_at(trickle_and_batches(0.5, 30, 30, 600), idle_for=0.0, queued=1, current=1)
    assert d.replicas == 1
    assert "at 0.467/s" in d.reason


# -- the whole loop ------------------------------------------------------------------------------
def manifest(**scaling: Any) -> TaskQueue:
    base: dict[str, Any] = {"maxReplicas": 40, "targetWaitSeconds": {"tasks": 5.0},
                            "podStartupSeconds": 5}
    return TaskQueue.model_validate({"spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "tasks"}],
        "worker": {"concurrency": 1}, "scaling": {**base, **scaling}}})


def batches_and_trickle(duration: float, seed: int = 1) -> list[Arrival]:
    """30 tasks of 2 s at once every 300 s, and 0.05 tasks/s in between (the issue's lull
    case: a trickle keeps the queue from ever being idle for the cooldown)."""
    rng, out = random.Random(seed), []
    for start in range(150, int(duration), 300):
        out += [Arrival(float(start), "tasks", rng.expovariate(0.5)) for _ in range(30)]
    t = rng.expovariate(0.05)
    while t < duration:
        out.append(Arrival(t, "tasks", rng.expovariate(0.5)))
        t += rng.expovariate(0.05)
    return sorted(out, key=lambda a: a.at)


def test_a_trickle_between_far_batches_does_not_hold_the_batch_fleet() -> None:
    arrivals = batches_and_trickle(1800.0)
    cheap = manifest()
    released = simulate(cheap, arrivals, OperatorScaler(cheap))
    paying = manifest(holdThroughLullsSeconds=600)
    held = simulate(paying, arrivals, OperatorScaler(paying))
    # held, each trickle task brought the whole batch fleet back (~5x the pod-seconds)
    assert released.worker_seconds < 0.5 * held.worker_seconds
    for r in (released, held):
        assert (r.busy_deleted, r.interrupted, r.unserved) == (0, 0, 0)
