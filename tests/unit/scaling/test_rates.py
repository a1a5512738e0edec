"""The estimators of `rates.update`: arrival rate per queue, service time, waits (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from taskqueue.scaling import arrivals
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.rates import Rates, update
from taskqueue.wire.keys import WAIT_EDGES_SECONDS


def obs(at: float, backlog: dict[str, int], *, taken: dict[str, int] | None = None,
        in_flight: int = 0, completed: int = 0) -> QueueObservation:
    workers = (WorkerObservation("w", int((at + 15) * 1000), in_flight),) if in_flight else ()
    return QueueObservation(at=at, backlog=backlog, taken=taken or {}, workers=workers,
                            completed_total=completed)


def feed(*observations: QueueObservation) -> Rates:
    rates = Rates()
    for o in observations:
        rates = update(rates, o)
    return rates


def test_per_queue_arrivals_from_length_change_plus_taken() -> None:
    rates = feed(
        obs(0, {"high": 0, "low": 10}, taken={"high": 0, "low": 0}),
        obs(10, {"high": 5, "low": 0}, taken={"high": 15, "low": 10}),
    )
    assert rates.arrivals.rate("high") == pytest.approx(2.0)  # (5 + 15) / 10 s
    assert rates.arrivals.rate("low") == pytest.approx(0.0)   # drained, nothing new


def test_without_counters_all_arrivals_count_against_the_first_queue() -> None:
    rates = feed(obs(0, {"a": 0, "b": 0}), obs(10, {"a": 2, "b": 3}, in_flight=4, completed=11))
    assert rates.arrivals.rate("a") == pytest.approx(2.0)  # 5 queued + 4 held + 11 done
    assert rates.arrivals.rate("b") == 0.0


def test_service_time_is_held_task_seconds_per_completion() -> None:
    rates = feed(*[obs(t, {"q": 0}, in_flight=4, completed=int(t * 2)) for t in range(0, 60, 5)])
    assert rates.service.mean == pytest.approx(2.0)  # 4 held / 2 done per s


def test_before_enough_completions_the_service_time_is_a_lower_bound() -> None:
    assert feed(obs(0, {"q": 0})).service.mean is None
    # two tasks held for 10 s, none done yet: each takes at least 10 s
    rates = feed(obs(0, {"q": 0}, in_flight=2), obs(10, {"q": 0}, in_flight=2))
    assert rates.service.mean == pytest.approx(10.0)


def test_an_idle_spell_keeps_the_service_time_and_forgets_the_rate() -> None:
    busy = [obs(t, {"q": 0}, in_flight=4, completed=int(t * 2)) for t in range(0, 60, 5)]
    # the last poll interval drains 4 -> 0 in flight: 10 task-seconds, 5 completions
    idle = [obs(t, {"q": 0}, completed=115) for t in range(60, 1000, 5)]
    rates = feed(*busy, *idle)
    assert rates.service.mean == pytest.approx(2.0, rel=0.05)
    assert rates.arrivals.rate("q") < 1e-6


def test_a_reset_counter_restarts_the_sums() -> None:
    rates = feed(*[obs(t, {"q": 0}, in_flight=4, completed=100 + t) for t in range(0, 30, 5)],
                 obs(30, {"q": 0}, in_flight=4, completed=3))
    assert rates.service.mean is None
    assert rates.completed == 3


def test_per_queue_service_times_are_told_apart_when_the_mix_varies() -> None:
    # spells of 4 intervals: 10 fast tasks (0.5 s) alone, then also 2 slow ones (5 s)
    observations, taken, done, t = [], {"fast": 0, "slow": 0}, 0, 0.0
    for i in range(40):
        slow = 2 if (i // 4) % 2 else 0
        held = (10 * 0.5 + slow * 5.0) / 5.0  # task-seconds in a 5 s interval / 5 s
        taken = {"fast": taken["fast"] + 10, "slow": taken["slow"] + slow}
        done += 10 + slow
        observations.append(obs(t, {"fast": 0, "slow": 0}, taken=dict(taken),
                                in_flight=round(held), completed=done))
        t += 5.0
    services = feed(*observations).service.by_queue(["fast", "slow"])
    assert services is not None
    assert services["slow"] > 3 * services["fast"]


def test_one_queue_or_no_counters_use_the_mean() -> None:
    rates = feed(*[obs(t, {"q": 0}, in_flight=4, completed=int(t * 2)) for t in range(0, 60, 5)])
    assert rates.service.by_queue(["q"]) == {"q": pytest.approx(2.0)}
    assert rates.service.by_queue(["a", "b"]) == {"a": pytest.approx(2.0),
                                                  "b": pytest.approx(2.0)}


def reported(at: float, service: dict[str, tuple[float, int]], *, in_flight: int = 0,
             completed: int = 0) -> QueueObservation:
    queues = dict.fromkeys(service, 0)
    return QueueObservation(at=at, backlog=queues, service=service, completed_total=completed,
                            workers=(WorkerObservation("w", int((at + 15) * 1000), in_flight),))


@pytest.mark.parametrize("observations, expected", [
    # the in-flight samples see nothing (every task ran between two polls): only the workers'
    # totals know the service time
    pytest.param([reported(0, {"q": (0.0, 0)}), reported(5, {"q": (20.0, 10)})],
                 {"q": 2.0}, id="bursty-between-polls"),
    pytest.param([reported(0, {"a": (0.0, 0), "b": (0.0, 0)}),
                  reported(5, {"a": (5.0, 10), "b": (40.0, 8)})],
                 {"a": 0.5, "b": 5.0}, id="per-queue"),
    pytest.param([reported(0, {"q": (600.0, 100)})], {"q": 6.0},
                 id="first-totals-are-history-a-restart-knows-at-once"),
    pytest.param([reported(0, {"q": (1000.0, 1000)}), reported(5, {"q": (1030.0, 1010)})],
                 {"q": pytest.approx((300 * 0.9672 + 30) / (300 * 0.9672 + 10), rel=0.01)},
                 id="old-history-weighs-at-most-300-attempts"),
    pytest.param([reported(0, {"q": (500.0, 100)}), reported(5, {"q": (4.0, 2)}),
                  reported(10, {"q": (16.0, 6)})],
                 {"q": 3.0}, id="reset-stats-start-again"),
])
def test_the_workers_totals_give_the_service_time(observations: list[QueueObservation],
                                                  expected: dict[str, float]) -> None:
    rates = feed(*observations)
    assert rates.service.by_queue(list(expected)) == {
        q: v if not isinstance(v, float) else pytest.approx(v) for q, v in expected.items()}


def test_too_few_reported_attempts_fall_back_to_the_estimate() -> None:
    sampled = [obs(t, {"q": 0}, in_flight=4, completed=int(t * 2)) for t in range(0, 60, 5)]
    rates = feed(*sampled, reported(60, {"q": (10.0, 2)}, in_flight=4, completed=120))
    assert rates.service.measured("q") is None
    assert rates.service.mean == pytest.approx(2.0, rel=0.05)


def steady_then(batch: int, *, rate: float = 2.0, polls: int = 24) -> Rates:
    """`rate`/s on one queue for `polls` polls of 5 s (all taken at once), then `batch` more
    tasks in the next 5 s."""
    observations, taken = [], 0
    for i in range(polls + 1):
        taken += round(rate * 5) if i else 0
        observations.append(obs(5.0 * i, {"q": 0}, taken={"q": taken}))
    observations.append(obs(5.0 * (polls + 1), {"q": batch}, taken={"q": taken + round(rate * 5)}))
    return feed(*observations)


@pytest.mark.parametrize("batch, lowest, highest", [
    # the cap at 2/s: 10 + 4 x sqrt(10) + 3 = 25.6 per 5 s interval
    pytest.param(0, 1.9, 2.1, id="steady-rate"),
    pytest.param(8, 2.0, 2.5, id="poisson-noise-counts-in-full"),
    pytest.param(600, 2.0, 2.5, id="a-batch-counts-only-up-to-the-cap"),
])
def test_a_batch_is_not_a_rate(batch: int, lowest: float, highest: float) -> None:
    assert lowest <= steady_then(batch).arrivals.rate("q") <= highest


def test_a_real_rise_is_learned_within_a_few_polls() -> None:
    # 2/s for two minutes, then 20/s: the cap follows the rate it lets in (a plain 60 s
    # average would be at 13.9/s after the same minute)
    observations, taken, t = [], 0, 0.0
    for i in range(24 + 12):
        rate = 2.0 if i < 24 else 20.0
        taken += round(rate * 5) if i else 0
        observations.append(obs(t, {"q": 0}, taken={"q": taken}))
        t += 5.0
    assert feed(*observations).arrivals.rate("q") > 10.0


@pytest.mark.parametrize("squares, cv2", [
    # 10 attempts of 2 s on average; the sum of their squares says how they spread
    pytest.param((40.0, 10), 0.0, id="all-2s-constant"),
    pytest.param((80.0, 10), 1.0, id="exponential-like"),
    pytest.param((20.0, 10), 0.0, id="inconsistent-clamped-at-0"),
    pytest.param(None, None, id="not-reported-unknown"),
])
def test_the_service_time_variance_from_the_workers_squares(
        squares: tuple[float, int] | None, cv2: float | None) -> None:
    def at(t: float, seconds: float, attempts: int,
           sq: tuple[float, int] | None) -> QueueObservation:
        return QueueObservation(at=t, backlog={"q": 0}, service={"q": (seconds, attempts)},
                                service_sq={"q": sq} if sq else {})
    rates = feed(at(0, 0.0, 0, (0.0, 0) if squares else None), at(5, 20.0, 10, squares))
    assert rates.service.cv2("q") == (None if cv2 is None else pytest.approx(cv2))


def histogram(total: int, over: dict[float, int]) -> tuple[int, ...]:
    """A reported wait histogram: `total` waits, `over[edge]` of them longer than the edge."""
    return (total, *(over.get(edge, 0) for edge in WAIT_EDGES_SECONDS))


def waited(at: float, counts: dict[str, tuple[int, ...]]) -> QueueObservation:
    return QueueObservation(at=at, backlog={"q": 0}, waited=counts)


# 100 waits: 40 over 2 s, 20 over 3 s, 10 over 5 s, 5 over 7.5 s, 2 over 10 s
SPREAD = histogram(100, {0.5: 60, 1.0: 50, 2.0: 40, 3.0: 20, 5.0: 10, 7.5: 5, 10.0: 2})


@pytest.mark.parametrize("target, share", [
    pytest.param(2.0, 0.40, id="on-an-edge"),
    pytest.param(2.5, 0.30, id="between-edges-linear"),
    pytest.param(10.0, 0.02, id="the-10s-edge"),
    pytest.param(0.25, 0.80, id="below-the-first-edge-from-all-at-0"),
    pytest.param(900.0, 0.0, id="past-the-last-edge"),
])
def test_the_late_share_reads_the_workers_histogram(target: float, share: float) -> None:
    rates = feed(waited(0.0, {"q": SPREAD}))
    assert rates.waits.late_share("q", target) == pytest.approx(share)


def test_the_late_share_follows_the_recent_tasks() -> None:
    # 600 on time, then 100 of which 30 waited past 10 s: the recent ones weigh more than 30/700
    on_time = histogram(600, {})
    then = (700, *(30 if edge <= 10 else 0 for edge in WAIT_EDGES_SECONDS))
    rates = feed(waited(0.0, {"q": on_time}), waited(2.0, {"q": then}))
    share = rates.waits.late_share("q", 10.0)
    assert share is not None and 30 / 700 < share < 30 / 100


@pytest.mark.parametrize("counts, share", [
    pytest.param({}, None, id="nothing-reported"),
    pytest.param({"q": histogram(5, {10.0: 5})}, None, id="too-few-waits"),
    pytest.param({"other": SPREAD}, None, id="another-queue"),
])
def test_no_late_share_until_enough_waits_are_measured(
        counts: dict[str, tuple[int, ...]], share: float | None) -> None:
    assert feed(waited(0.0, counts)).waits.late_share("q", 10.0) == share


def test_a_reset_stats_hash_starts_the_late_share_again() -> None:
    late = histogram(100, dict.fromkeys(WAIT_EDGES_SECONDS[:7], 50))
    rates = feed(waited(0.0, {"q": late}), waited(2.0, {"q": histogram(10, {})}))
    assert rates.waits.late_share("q", 10.0) is None  # counts went down: forgotten, 10 < MIN_WAITED


@pytest.mark.parametrize("quantile, wait", [
    pytest.param(0.95, 7.5, id="p95-on-an-edge"),
    pytest.param(0.99, 12.5, id="p99-between-edges"),
    pytest.param(0.50, 1.0, id="median"),
])
def test_the_measured_wait_quantile(quantile: float, wait: float) -> None:
    rates = feed(waited(0.0, {"q": SPREAD}))
    assert rates.waits.quantile("q", quantile) == pytest.approx(wait)
    assert rates.waits.late_share("q", wait) == pytest.approx(1 - quantile)


def test_past_the_last_edge_the_quantile_is_the_last_edge() -> None:
    counts = histogram(100, dict.fromkeys(WAIT_EDGES_SECONDS, 50))
    assert feed(waited(0.0, {"q": counts})).waits.quantile("q", 0.95) == WAIT_EDGES_SECONDS[-1]


def test_a_histogram_that_is_gone_is_forgotten() -> None:
    # the stats hash was deleted: no share from before it, and a new one starts afresh
    late = histogram(100, dict.fromkeys(WAIT_EDGES_SECONDS[:7], 50))
    rates = feed(waited(0.0, {"q": late}), waited(2.0, {}))
    assert rates.waits.late_share("q", 10.0) is None
    rates = update(rates, waited(4.0, {"q": histogram(40, {})}))
    assert rates.waits.late_share("q", 10.0) == 0.0


def polled(reported_mean: float, *, held: list[int], completed_per_poll: int,
           interval: float = 5.0, cv2: float | None = None) -> Rates:
    """One poll per `interval` seeing `held[i]` tasks in flight, `completed_per_poll` ending
    between polls, whose times the workers report at `reported_mean` each (and, given `cv2`,
    their squares: mean^2 x (1 + cv2) each)."""
    observations = []
    for i, in_flight in enumerate(held):
        n = completed_per_poll * i
        o = reported(i * interval, {"q": (reported_mean * n, n)}, in_flight=in_flight,
                     completed=n)
        if cv2 is not None:
            o = replace(o, service_sq={"q": (reported_mean ** 2 * (1 + cv2) * n, n)})
        observations.append(o)
    return feed(*observations)


@pytest.mark.parametrize("reported_mean, held, per_poll, interval, cv2, expected", [
    # 40 held x 5 s / 10 done = 20 s a task, but the ten that ended were the short ones (5 s):
    # the slow ones are still running
    pytest.param(5.0, [40] * 7, 10, 5.0, None, 20.0, id="ramp-reports-only-the-early-finishers"),
    # Little's law and the reports agree: the reports stand
    pytest.param(20.0, [40] * 7, 10, 5.0, None, 20.0, id="steady-reports-agree"),
    # the reports say longer than the slots do (a sampling dip): the reports stand
    pytest.param(25.0, [40] * 7, 10, 5.0, None, 25.0, id="reports-longer-stand"),
    # bursts of 0.2 s tasks that one poll sees in flight and the next sees done: sampled at
    # the polls they look held for 1 s each, shorter than two polls: the reports stand
    pytest.param(0.2, [0, 40] * 4, 40, 2.0, None, 0.2, id="short-tasks-trust-the-reports"),
    # the reports show times of one length: none can hide behind the ones that ended (Little's
    # law overshoots right after the first completions of such tasks)
    pytest.param(5.0, [40] * 7, 10, 5.0, 0.0, 5.0, id="constant-times-are-not-raised"),
    # a spread like an early sample of exponential times (half of cv2 1): raised all the way
    pytest.param(5.0, [40] * 7, 10, 5.0, 0.5, 20.0, id="varied-times-are-raised"),
    # a little spread: raised part of the way (2 x 0.1 of the shortfall 15 s)
    pytest.param(5.0, [40] * 7, 10, 5.0, 0.1, 8.0, id="little-spread-raised-a-little"),
])
def test_reports_missing_the_running_slow_tasks_are_raised_to_littles_law(
        reported_mean: float, held: list[int], per_poll: int, interval: float,
        cv2: float | None, expected: float) -> None:
    rates = polled(reported_mean, held=held, completed_per_poll=per_poll, interval=interval,
                   cv2=cv2)
    assert rates.service.measured("q") == pytest.approx(expected, rel=0.01)
    assert rates.service.mean == pytest.approx(expected, rel=0.01)


def test_a_restarted_operator_trusts_the_reported_history_until_it_has_its_own() -> None:
    # the first totals are history; the slots have no completions of their own yet
    rates = feed(reported(0, {"q": (600.0, 100)}, in_flight=40, completed=500),
                 reported(5, {"q": (610.0, 101)}, in_flight=40, completed=501))
    assert rates.service.unfinished_factor == 1.0
    assert rates.service.measured("q") == pytest.approx(6.0, rel=0.02)


def test_failed_attempts_end_on_the_slots_as_completed_ones_do() -> None:
    # 40 held, 10 attempts ending per 5 s poll, 3 of them failing (retried): each attempt held
    # its slot 20 s, as the workers report; counting only the 7 completed would make it 28.6 s
    observations = []
    for i in range(7):
        observation = reported(i * 5.0, {"q": (20.0 * 10 * i, 10 * i)}, in_flight=40,
                               completed=7 * i)
        observations.append(replace(observation, failed_total=3 * i))
    rates = feed(*observations)
    assert rates.service.unfinished_factor == pytest.approx(1.0)
    assert rates.service.mean == pytest.approx(20.0, rel=0.01)


@pytest.mark.parametrize(("before", "after", "expected"), [
    # taken counters (None: absent) before and after; high grew by 2, low by 3 in its length
    pytest.param({"high": 4}, {"high": 9}, {"high": 7.0, "low": 3.0},
                 id="low-has-no-counter-yet"),
    pytest.param({}, {"high": 5, "low": 1}, {"high": 7.0, "low": 4.0},
                 id="both-counters-written-in-the-interval"),
    pytest.param({}, {}, {"high": 5.0, "low": 0.0}, id="no-counters-all-to-the-first"),
])
def test_a_queue_nothing_was_taken_from_has_taken_nothing(
        before: dict[str, int], after: dict[str, int], expected: dict[str, float]) -> None:
    base = obs(0, {"high": 1, "low": 0}, taken=before)
    now = obs(10, {"high": 3, "low": 3}, taken=after)
    assert arrivals.entered(now, backlog=base.backlog, taken=base.taken, in_flight=0,
                            ended=0) == expected
