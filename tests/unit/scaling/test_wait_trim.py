"""A queue whose measured waits stay far inside its targetWaitSeconds has its steady sizing
trimmed: the workers' wait histograms (`Waits.late_share`) stretch the target the steady slots
and a backlog behind it are sized for (`waitpolicy.trimmed`, `QueueLoad.trim`), slowly and
bounded, and give it back as the late share rises."""

from __future__ import annotations

import math

import pytest

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling import waitpolicy
from taskqueue.scaling.policy import Decision
from taskqueue.scaling.waitmodel import QueueLoad, size_for_wait
from taskqueue.scaling.waits import Waits
from taskqueue.wire.keys import WAIT_EDGES_SECONDS
from tests.helpers.scaling import one_poll

SPEC = ScalingSpec(maxReplicas=100, targetWaitSeconds={"tasks": 5.0}, podStartupSeconds=5,
                   scaleDownStabilizationSeconds=0)


def histogram(share: float, total: int, target: float = 5.0) -> tuple[int, ...]:
    """`total` measured waits, `share` of them longer than `target` (and every edge up to it)."""
    over = round(total * share)
    return (total, *(over if edge <= target else 0 for edge in WAIT_EDGES_SECONDS))


def waits_of(histograms: dict[str, tuple[int, ...]]) -> Waits:
    """The wait estimator holding these histograms, as last reported and as its sums."""
    return Waits(totals=tuple(histograms.items()),
                 sums=tuple((q, tuple(map(float, c))) for q, c in histograms.items()))


def waits(share: float, total: int, target: float = 5.0) -> Waits:
    return waits_of({"tasks": histogram(share, total, target)})


BETWEEN = (waitpolicy.TRIM_BELOW + waitpolicy.GIVE_BACK_ABOVE) / 2
"""A late share between the trim's two thresholds (4 % and 4.5 %)."""
GIVING_BACK = (waitpolicy.GIVE_BACK_ABOVE + 0.05) / 2
"""A late share over the give-back threshold and under the quantile's 5 %."""


@pytest.mark.parametrize("share, before, measured, dt, trim", [
    pytest.param(0.0, 1.0, 100, 120.0, math.e, id="far-inside-grows-e-per-100-waits"),
    pytest.param(0.03, 2.0, 50, 120.0, 2.0 * math.exp(0.5), id="under-4-percent-grows"),
    pytest.param(0.0, 1.0, 100, 12.0, math.exp(0.1), id="at-most-e-per-120-seconds"),
    pytest.param(0.0, 3.0, 100, 120.0, waitpolicy.MAX_TRIM, id="bounded"),
    pytest.param(0.0, 2.0, 0, 120.0, 2.0, id="no-new-waits-no-growth"),
    pytest.param(BETWEEN, 2.0, 100, 120.0, 2.0, id="between-holds"),
    pytest.param(GIVING_BACK, 4.0, 10, 2.0, 4.0 * math.exp(-0.4),
                 id="over-4.5-percent-gives-back"),
    pytest.param(GIVING_BACK, 2.0, 25, 2.0, None, id="given-back-to-nothing"),
    pytest.param(0.06, 4.0, 0, 2.0, None, id="over-the-quantile-gone-at-once"),
])
def test_trimmed(share: float, before: float, measured: int, dt: float,
                 trim: float | None) -> None:
    out = waitpolicy.trimmed(SPEC, (("tasks", before),) if before > 1 else (),
                             before=waits(0.0, 500), after=waits(share, 500 + measured), dt=dt)
    if trim is None:
        assert out == ()
    else:
        assert dict(out) == {"tasks": pytest.approx(trim)}


@pytest.mark.parametrize("spec, after", [
    pytest.param(SPEC, waits(0.0, 10), id="too-few-waits"),
    pytest.param(SPEC.model_copy(update={"targetWaitSeconds": {"other": 5.0}}),
                 waits(0.0, 600), id="no-target"),
    pytest.param(SPEC, Waits(), id="histogram-gone"),
    pytest.param(SPEC.model_copy(update={"podStartupSeconds": 20}), waits(0.0, 600),
                 id="target-under-a-start-up"),
])
def test_untrusted_shares_trim_nothing(spec: ScalingSpec, after: Waits) -> None:
    assert waitpolicy.trimmed(spec, (("tasks", 3.0),), before=waits(0.0, 500),
                              after=after, dt=2.0) == ()


@pytest.mark.parametrize("target, startup, bounds", [
    pytest.param(5.0, 5, waitpolicy.IN_TIME_TRIM, id="a-pod-comes-in-time"),
    pytest.param(2.0, 5, waitpolicy.TIGHT_TRIM, id="back-in-3.5-targets"),
    pytest.param(1.75, 5, waitpolicy.TIGHT_TRIM, id="back-in-4-targets"),
    pytest.param(1.0, 5, None, id="back-in-7-targets-untrimmed"),
    pytest.param(5.0, 20, None, id="back-in-4.4-targets-untrimmed"),
])
def test_a_target_under_a_start_up_is_trimmed_less_or_not(
        target: float, startup: int, bounds: waitpolicy.TrimBounds | None) -> None:
    # a pod the trim took away is back a poll (2 s) and a start-up after the share rises
    spec = SPEC.model_copy(update={"podStartupSeconds": startup,
                                   "targetWaitSeconds": {"tasks": target}})
    assert waitpolicy.trim_bounds(spec, target) == bounds


TIGHT_BETWEEN = (waitpolicy.TIGHT_TRIM_BELOW + waitpolicy.TIGHT_GIVE_BACK_ABOVE) / 2
"""A late share between a tight target's thresholds (3 % and 3.5 %)."""


@pytest.mark.parametrize("before, share, trim", [
    pytest.param(1.5, 0.0, waitpolicy.TIGHT_MAX_TRIM, id="grows-to-the-tight-bound"),
    pytest.param(1.5, 0.02, waitpolicy.TIGHT_MAX_TRIM, id="under-3-percent-grows"),
    pytest.param(1.5, TIGHT_BETWEEN, 1.5, id="between-holds"),
    pytest.param(1.8, BETWEEN, None, id="over-3.5-percent-given-back-in-100-waits"),
    pytest.param(1.5, 0.06, None, id="over-the-quantile-gone"),
])
def test_trimmed_under_a_start_up(before: float, share: float, trim: float | None) -> None:
    spec = SPEC.model_copy(update={"targetWaitSeconds": {"tasks": 2.0}})
    out = waitpolicy.trimmed(spec, (("tasks", before),), before=waits(0.0, 500, 2.0),
                             after=waits(share, 600, 2.0), dt=120.0)
    assert dict(out) == ({} if trim is None else {"tasks": pytest.approx(trim)})


@pytest.mark.parametrize("bound, measured, extra", [
    pytest.param(0.05, 36.0, math.sqrt(0.05 * 0.95) * (1 / 6 - 1 / math.sqrt(600)),
                 id="36-waits-2.7-points"),
    pytest.param(0.035, 230.0, math.sqrt(0.035 * 0.965) * (1 / math.sqrt(230)
                                                          - 1 / math.sqrt(600)),
                 id="230-waits-half-a-point"),
    pytest.param(0.05, 600.0, 0.0, id="a-full-histogram-none"),
    pytest.param(0.05, 900.0, 0.0, id="never-negative"),
    pytest.param(0.05, 0.0, 0.0, id="no-waits-none"),
])
def test_chance_over(bound: float, measured: float, extra: float) -> None:
    assert waitpolicy.chance_over(bound, measured) == pytest.approx(extra)


@pytest.mark.parametrize("late, total, trim", [
    # a 2 s target under a 5 s start-up: given back over 3.5 %, gone over 5 %; 10 new waits
    pytest.param(2, 36, 1.5, id="2-late-of-36-is-noise-the-trim-holds"),
    pytest.param(4, 36, None, id="4-late-of-36-is-over-the-quantile-gone"),
    pytest.param(33, 600, None, id="5.5-percent-of-600-gone"),
    pytest.param(24, 600, 1.5 * math.exp(-4 * 10 / 100), id="4-percent-of-600-gives-back"),
])
def test_a_share_from_few_waits_is_judged_with_its_noise(late: int, total: int,
                                                         trim: float | None) -> None:
    spec = SPEC.model_copy(update={"targetWaitSeconds": {"tasks": 2.0}})
    out = waitpolicy.trimmed(spec, (("tasks", 1.5),), before=waits(0.0, total - 10, 2.0),
                             after=waits(late / total, total, 2.0), dt=2.0)
    assert dict(out) == ({} if trim is None else {"tasks": pytest.approx(trim)})


def two_queues(*, hi: tuple[int, int], lo: tuple[int, int]) -> Waits:
    """The histograms of queues "hi" and "lo": (waits, late against 5 s) each."""
    return waits_of({q: histogram(late / n, n) for q, (n, late) in (("hi", hi), ("lo", lo))})


@pytest.mark.parametrize("order, lo_late, trim", [
    # "hi" (5 s target) measured 2 waits since the last poll, "lo" (no target) 98
    pytest.param(("hi", "lo"), 0, math.e, id="a-lower-queue-inside-the-target-counts"),
    pytest.param(("hi", "lo"), 60, math.exp(0.02), id="a-lower-queue-late-does-not"),
    pytest.param(("lo", "hi"), 0, math.exp(0.02), id="a-higher-queue-does-not"),
])
def test_the_waits_of_lower_queues_confirm_a_trim(order: tuple[str, str], lo_late: int,
                                                  trim: float) -> None:
    spec = SPEC.model_copy(update={"targetWaitSeconds": {"hi": 5.0}})
    out = waitpolicy.trimmed(spec, (), before=two_queues(hi=(40, 0), lo=(400, 0)),
                             after=two_queues(hi=(42, 0), lo=(498, lo_late)), dt=120.0,
                             queue_order=order)
    assert dict(out) == {"hi": pytest.approx(trim)}


def heavy(trim: float = 1.0, *, queued: int = 0, age: float = 0.0) -> QueueLoad:
    """1 task/s of 2 s tasks with a service cv2 of 9 (Pareto 1.5) and a 5 s target."""
    return QueueLoad(key="tasks", arrival_rate=1.0, queued=queued, target_wait=5.0, cv2=9.0,
                     trim=trim, oldest_age=age)


@pytest.mark.parametrize("trim, slots", [
    pytest.param(1.0, 5, id="untrimmed"),
    pytest.param(2.0, 4, id="target-sized-as-10s"),
    pytest.param(0.5, 5, id="never-tighter"),
])
def test_the_trim_stretches_the_steady_target(trim: float, slots: int) -> None:
    sizing = size_for_wait([heavy(trim)], service=2.0)
    assert (sizing.slots, sizing.steady) == (slots, slots)
    assert ("trimmed by the measured waits" in sizing.why) is (trim > 1)


def test_a_burst_is_still_started_within_the_real_target() -> None:
    # 40 queued, 1 s old: the burst term sizes for the 5 s target, whatever the trim
    untrimmed = size_for_wait([heavy(1.0, queued=40, age=1.0)], service=2.0)
    trimmed = size_for_wait([heavy(4.0, queued=40, age=1.0)], service=2.0)
    assert trimmed.slots == untrimmed.slots > untrimmed.steady > trimmed.steady


@pytest.mark.parametrize("trim, slots", [
    # q0 (2 s target, 0.05/s of 0.5 s) behind a backlog of 4 s tasks on q1: load + 4 ln 20 / T
    pytest.param(1.0, 7, id="untrimmed-load-and-4-ln-20-over-2"),
    pytest.param(2.0, 4, id="sized-for-4s"),
    pytest.param(4.0, 2, id="sized-for-8s"),
])
def test_the_trim_stretches_the_backlog_behind(trim: float, slots: int) -> None:
    queues = [QueueLoad(key="q0", arrival_rate=0.05, queued=0, target_wait=2.0, service=0.5,
                        cv2=1.0, trim=trim),
              QueueLoad(key="q1", arrival_rate=0.2, queued=10, target_wait=None, service=4.0,
                        cv2=1.0)]
    assert size_for_wait(queues, service=3.3).slots == slots


@pytest.mark.parametrize("share, before, after, replicas", [
    pytest.param(0.0, (), math.e, 3, id="far-inside-trims"),
    pytest.param(0.0, (("tasks", 3.0),), waitpolicy.MAX_TRIM, 3, id="trimmed-to-the-bound"),
    pytest.param(BETWEEN, (), None, 4, id="holds-untrimmed"),
    pytest.param(0.06, (("tasks", 3.0),), None, 4, id="over-the-quantile-untrimmed"),
])
def test_decide_trims_and_names_it(share: float, before: tuple[tuple[str, float], ...],
                                   after: float | None, replicas: int) -> None:
    decision = decide_after(share, before)
    assert dict(decision.state.wait_trims) == ({} if after is None
                                               else {"tasks": pytest.approx(after)})
    assert decision.replicas == replicas
    assert ("trimmed by the measured waits: tasks x" in decision.reason) is (after is not None)


def test_decide_trims_a_2s_target_at_most_2x() -> None:
    # 1 task/s of 2 s tasks, every recent wait under 2 s, pods up in 5 s + a 2 s poll
    spec = SPEC.model_copy(update={"targetWaitSeconds": {"tasks": 2.0}})
    decision = one_poll(spec=spec, waits_before=waits(0.0, 500, 2.0),
                        waited=histogram(0.0, 600, 2.0))
    assert dict(decision.state.wait_trims) == {"tasks": waitpolicy.TIGHT_MAX_TRIM}
    assert "trimmed by the measured waits: tasks x2" in decision.reason


@pytest.mark.parametrize("measured, trimmed", [
    pytest.param(None, False, id="manifest-start-up-over-the-target"),
    pytest.param(30.0, False, id="measured-slower-the-manifest-stands"),
    pytest.param(3.0, True, id="measured-start-up-within-the-target"),
])
def test_decide_trims_with_the_start_up_it_sizes_with(measured: float | None,
                                                      trimmed: bool) -> None:
    # the manifest says pods take 20 s, over the 5 s target; pods measured up in 3 s come in
    # time, as the sizing (`startup_seconds`) and the cv2 it prices (`priced_cv2`) take them
    slow = SPEC.model_copy(update={"podStartupSeconds": 20})
    decision = decide_after(0.0, (), spec=slow, startup=measured)
    assert bool(decision.state.wait_trims) is trimmed


@pytest.mark.parametrize("replicas, trim", [
    # six pods asked for (starting): the trim grown on the fleet stands, and grows to its bound
    pytest.param(6, waitpolicy.MAX_TRIM, id="a-fleet-standing-keeps-its-trim"),
    # nothing up and none asked for: the next activation carries at most 2x
    pytest.param(0, waitpolicy.RESTART_MAX_TRIM, id="a-fleet-at-zero-carries-at-most-2x"),
])
def test_a_trim_grown_on_a_fleet_that_is_gone_is_held_at_2x(replicas: int, trim: float) -> None:
    decision = one_poll(spec=SPEC, waits_before=waits(0.0, 500), waited=histogram(0.0, 600),
                        trims=(("tasks", 6.0),), replicas=replicas)
    assert dict(decision.state.wait_trims) == {"tasks": trim}


def decide_after(share: float, before: tuple[tuple[str, float], ...], *,
                 spec: ScalingSpec = SPEC, startup: float | None = None) -> Decision:
    """One poll of 1 task/s of 2 s tasks (cv2 9, sized as PRICED_CV2: the 5 s target is a
    start-up), 100 of their waits measured since the last, `share` of the last 600 late;
    `before`: the trims so far, `startup`: the measured pod start-up."""
    return one_poll(spec=spec, waits_before=waits(0.0, 500), waited=histogram(share, 600),
                    trims=before, startup=startup)
