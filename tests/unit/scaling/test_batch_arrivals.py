"""Tasks that arrive in batches: measuring how bursty arrivals are (`Arrivals.cv2`), the
slots that start a typical batch within the wait target (`waitmodel.batch_slots`), the fleet
held through the lulls between batches, and the end result in the simulator (pure)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from taskqueue.api.models import ScalingSpec, TaskQueue
from taskqueue.scaling.arrivals import after, restarted
from taskqueue.scaling.observation import QueueObservation
from taskqueue.scaling.policy import Decision, PolicyState, Rule, decide
from taskqueue.scaling.rates import Rates, update
from taskqueue.scaling.waitmodel import QueueLoad, batch_slots, size_for_wait
from taskqueue.simulate.run import simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.simulate.trace import Arrival

POLL = 2.0


def poisson(rng: random.Random, mean: float) -> int:
    count, t = 0, rng.expovariate(1.0)
    while t < mean:
        count, t = count + 1, t + rng.expovariate(1.0)
    return count


def measured(counts: list[int], *, poll: float = POLL) -> Rates:
    """Rates after polls `poll` apart that saw counts[i] tasks arrive in interval i (taken at
    once by workers, as the per-queue counters of fetch.lua count them)."""
    rates, taken = Rates(), 0
    for i, n in enumerate([0, *counts]):
        taken += n
        rates = update(rates, QueueObservation(at=i * poll, backlog={"q": 0},
                                               taken={"q": taken}))
    return rates


def poisson_counts(rate: float, polls: int, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    return [poisson(rng, rate * POLL) for _ in range(polls)]


def batch_counts(size: int, every: float, polls: int, seed: int = 1) -> list[int]:
    """Batches of `size` tasks at once, exponential gaps of mean `every` seconds."""
    rng = random.Random(seed)
    counts, t = [0] * polls, rng.expovariate(1 / every)
    while t < polls * POLL:
        counts[int(t // POLL)] += size
        t += rng.expovariate(1 / every)
    return counts


# -- measuring -----------------------------------------------------------------------------------
def allan(rates: Rates) -> float:
    """The estimate behind `Arrivals.cv2`, trusted or not."""
    (spread,) = rates.arrivals.spread
    return spread.squares / spread.base


@pytest.mark.parametrize("counts, lowest, highest", [
    pytest.param(poisson_counts(5.0, 300), 0.8, 1.25, id="poisson-is-1"),
    pytest.param(poisson_counts(0.5, 300), 0.8, 1.25, id="sparse-poisson-is-1"),
    # batches of 10 at once: a task arrives in a batch of 10
    pytest.param(batch_counts(10, 5.0, 300), 8.0, 12.0, id="batches-of-10"),
    pytest.param(batch_counts(40, 5.0, 300), 32.0, 48.0, id="batches-of-40"),
    # the same count every interval (a cron-like feeder)
    pytest.param([4] * 300, 0.0, 0.01, id="a-regular-feed-is-0"),
    # 2/s for five minutes, then 6/s: a step in the rate is not burstiness
    pytest.param(poisson_counts(2.0, 150) + poisson_counts(6.0, 150, seed=2), 0.8, 1.4,
                 id="a-rate-step-adds-little"),
])
def test_how_bursty_the_arrivals_are(counts: list[int], lowest: float, highest: float) -> None:
    assert lowest <= allan(measured(counts)) <= highest


@pytest.mark.parametrize("counts, trusted", [
    pytest.param(batch_counts(10, 5.0, 300), True, id="batches-that-recur"),
    pytest.param(poisson_counts(0.5, 300), True, id="sparse-poisson-reads-1"),
    # arrivals in every interval: no lull says they come in batches (taken as Poisson)
    pytest.param(poisson_counts(5.0, 300), False, id="dense-poisson"),
    pytest.param([4] * 300, False, id="a-regular-feed"),
    pytest.param([0] * 100, False, id="nothing-arrived"),
    pytest.param([0] * 50 + [60] + [0] * 100, False, id="one-batch-is-a-burst-not-a-pattern"),
    # 100/s for 20 s every 5 minutes: one long burst each time, not batches
    pytest.param(([0] * 140 + [200] * 10) * 2, False, id="a-long-burst-is-not-batches"),
    pytest.param([1, 0] * 4, False, id="too-few-tasks"),
])
def test_measured_only_for_batches_that_recur(counts: list[int], trusted: bool) -> None:
    assert (measured(counts).arrivals.cv2("q") is not None) is trusted


def test_a_batch_of_the_measured_size_counts_as_a_rate() -> None:
    # batches of 10 every ~5 s are 2/s; the cap a Poisson count would get (2 x 2 s + 4 sigmas
    # + 3 = 15) would cut the larger counts of two batches in one poll, and the rate with them
    counts = batch_counts(10, 5.0, 300)
    assert 1.7 <= measured(counts).arrivals.rate("q") <= 2.6


def trickle_and_batches(trickle: float, size: int, every: int, polls: int) -> list[int]:
    """Poisson at `trickle`/s, and `size` tasks at once every `every` polls."""
    counts = poisson_counts(trickle, polls)
    for i in range(every - 1, polls, every):
        counts[i] += size
    return counts


@pytest.mark.parametrize("counts, between", [
    # the polls that saw a batch left out: the trickle's rate as measured alone (the same
    # seed), less its share of the polls left out (1 in 30)
    pytest.param(trickle_and_batches(0.5, 30, 30, 600), measured(poisson_counts(0.5, 600)),
                 id="a-trickle-between-batches"),
    pytest.param(trickle_and_batches(0.05, 20, 30, 600), measured(poisson_counts(0.05, 600)),
                 id="a-sparse-trickle-between-batches"),
    # no batch: the rate
    pytest.param(poisson_counts(2.0, 300), None, id="poisson-is-the-rate"),
    # batches of 10 every ~5 s are within the cap their measured size gives: the rate (but
    # for the first, seen before their size was measured, long forgotten)
    pytest.param(batch_counts(10, 5.0, 300), None, id="batches-counted-as-the-rate"),
])
def test_the_rate_between_batches(counts: list[int], between: Rates | None) -> None:
    arrivals = measured(counts).arrivals
    if between is None:
        assert arrivals.rate_between("q") == pytest.approx(arrivals.rate("q"), rel=1e-4)
        return
    alone = between.arrivals.rate("q")
    assert 0.9 * alone <= arrivals.rate_between("q") <= alone
    assert arrivals.rate_between("q") < arrivals.rate("q") / 2


def test_a_restart_starts_the_rate_between_batches_again() -> None:
    # the stats hash reset: the sums start again, the one between batches with them
    arrivals = restarted(measured(trickle_and_batches(0.5, 30, 30, 600)).arrivals)
    assert arrivals.between == arrivals.counts == ()
    again = after(arrivals, {"q": 2.0}, 2.0, at=1.0)
    assert again.rate_between("q") == again.rate("q") == 1.0


@pytest.mark.parametrize("counts, seconds, expected", [
    # 5/s Poisson: 2 s without a task happens e^-10 of the time: the rate has dropped
    pytest.param(poisson_counts(5.0, 300), 2.0, False, id="poisson-lull-is-news"),
    pytest.param(poisson_counts(5.0, 300), 0.5, True, id="poisson-short-lull"),
    # batches of 10 every ~5 s: 10 s without one happens 13 % of the time
    pytest.param(batch_counts(10, 5.0, 300), 10.0, True, id="batches-lull-is-normal"),
    pytest.param(batch_counts(10, 5.0, 300), 40.0, False, id="batches-long-lull-is-news"),
])
def test_a_lull_between_batches_is_expected(counts: list[int], seconds: float,
                                            expected: bool) -> None:
    assert measured(counts).arrivals.lull_expected(seconds) is expected


# -- the model -----------------------------------------------------------------------------------
@pytest.mark.parametrize("ca2, load, service, target, slots", [
    pytest.param(1.0, 1.0, 0.5, 2.0, 0, id="poisson-adds-nothing"),
    pytest.param(0.3, 1.0, 0.5, 2.0, 0, id="regular-adds-nothing"),
    # batches of ~11 (5-15 tasks): 5 ahead on average, 95 % fewer than 5 x ln 20 = 15.0; k
    # free slots start k (1 + 2 / 0.5) = 5k tasks within 2 s: 3 slots + the 1 the load holds
    pytest.param(11.0, 1.0, 0.5, 2.0, 4, id="batches-of-11"),
    # 44 (20-60 tasks): 64.7 ahead / 5 = 12.9 + 4 busy
    pytest.param(44.0, 4.0, 0.5, 2.0, 17, id="batches-of-44"),
    # the longer the target, the fewer: 15.0 / (1 + 10 / 0.5) = 0.7 + 1
    pytest.param(11.0, 1.0, 0.5, 10.0, 2, id="a-long-target"),
])
def test_slots_that_start_a_batch_in_time(ca2: float, load: float, service: float,
                                          target: float, slots: int) -> None:
    assert batch_slots(load=load, ca2=ca2, service=service, target=target) == slots


@pytest.mark.parametrize("ca2, steady, batches", [
    # 2/s x 0.5 s = 1 erlang, p95 <= 2 s: Erlang C holds 2 slots for Poisson arrivals
    pytest.param(None, 2, 0, id="unknown-is-poisson"),
    pytest.param(1.0, 2, 0, id="poisson"),
    pytest.param(0.2, 2, 0, id="smoother-than-poisson-is-taken-as-poisson"),
    # Allen-Cunneen alone (waits x (11 + 1) / 2) would hold 3; starting a batch of ~11 takes 4
    pytest.param(11.0, 4, 4, id="batches-of-11"),
])
def test_the_steady_fleet_starts_the_batches(ca2: float | None, steady: int,
                                             batches: int) -> None:
    sizing = size_for_wait([QueueLoad("q", 2.0, 0, 2.0, arrival_cv2=ca2)], service=0.5)
    assert (sizing.steady, sizing.batches) == (steady, batches)


def test_a_lower_queue_s_batches_do_not_size_the_higher_one() -> None:
    high = QueueLoad("high", 2.0, 0, 2.0, service=0.5, arrival_cv2=1.0)
    low = QueueLoad("low", 0.2, 0, None, service=0.5, arrival_cv2=40.0)
    alone = size_for_wait([high], service=0.5)
    assert size_for_wait([high, low], service=0.5).batches == alone.batches == 0


# -- the policy ----------------------------------------------------------------------------------
def decide_idle(rates: Rates, idle_for: float, current: int = 5) -> Decision:
    spec = ScalingSpec(maxReplicas=20, idleCooldownSeconds=30, scaleDownStabilizationSeconds=0,
                       targetWaitSeconds={"q": 2.0})
    at = POLL * 301
    observation = QueueObservation(at=at, backlog={"q": 0}, taken=dict(rates.taken),
                                   completed_total=rates.completed)
    state = PolicyState(replicas=current, rates=rates, last_active=at - idle_for)
    return decide(spec=spec, observation=observation, state=state, now=at, queue_order=("q",))


def with_service(rates: Rates, seconds: float) -> Rates:
    return replace(rates, service=replace(rates.service, sums=(("q", seconds * 100, 100.0),)))


@pytest.mark.parametrize("counts, idle_for, replicas, rule", [
    # batches of 10 every ~5 s of 0.5 s tasks: the lull between two batches keeps the fleet
    # that starts the next one (batch_slots: 1 + 13.5 / 5 -> 4)
    pytest.param(batch_counts(10, 5.0, 300), 6.0, 4, Rule.NEXT_BATCH,
                 id="batches-hold-through-a-lull"),
    # ... until the lull is longer than batches leave (e^-x < 5 %): one pod, then zero
    pytest.param(batch_counts(10, 5.0, 300), 20.0, 1, Rule.IDLE_COOLDOWN,
                 id="batches-long-lull-drops-to-one"),
    # Poisson arrivals: idle is idle (one pod until the cooldown)
    pytest.param(poisson_counts(2.0, 300), 6.0, 1, Rule.IDLE_COOLDOWN, id="poisson-drops-to-one"),
])
def test_the_fleet_held_through_lulls(counts: list[int], idle_for: float, replicas: int,
                                      rule: Rule) -> None:
    decision = decide_idle(with_service(measured(counts), 0.5), idle_for)
    assert (decision.replicas, decision.rule) == (replicas, rule)


# -- the whole loop ------------------------------------------------------------------------------
def manifest(**scaling: Any) -> TaskQueue:
    base: dict[str, Any] = {"maxReplicas": 40, "targetWaitSeconds": {"tasks": 2.0},
                            "podStartupSeconds": 5}
    return TaskQueue.model_validate({"spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "tasks"}],
        "worker": {"concurrency": 1}, "scaling": {**base, **scaling}}})


def micro_batches(duration: float, seed: int = 1) -> list[Arrival]:
    """5-15 tasks of 0.5 s (exponential) at once, every ~5 s: 2/s, 1 erlang."""
    rng, out, t = random.Random(seed), [], 0.0
    while t < duration:
        t += rng.expovariate(1 / 5)
        out += [Arrival(t, "tasks", rng.expovariate(2.0)) for _ in range(rng.randint(5, 15))]
    return out


def test_batches_every_few_seconds_meet_the_wait_target() -> None:
    # Erlang C for 1 erlang holds 3 pods and lets the fleet drop to one between batches: 15
    # tasks on one pod wait up to 7 s (p95 5.9 s before batches were measured)
    tq = manifest()
    result = simulate(tq, micro_batches(1800.0), OperatorScaler(tq))
    assert result.waits["tasks"][1] <= 2.2
    assert result.busy_deleted == result.interrupted == result.unserved == 0
