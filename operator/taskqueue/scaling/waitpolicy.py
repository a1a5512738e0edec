"""targetWaitSeconds: the wait model's inputs from the spec, the measured rates and one
observation (`taskqueue.scaling.waitmodel` does the queueing maths, `taskqueue.scaling.rates` the
measuring). Pure; called by `taskqueue.scaling.policy`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling import waitmodel
from taskqueue.scaling.observation import QueueObservation
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.waits import WAIT_MEMORY_TASKS, Waits

MIN_SERVICE_SECONDS = 0.001
"""The least service time the wait model is given: the resolution of the workers' reports
(whole milliseconds), under which a measured mean reads 0."""


def sizing(spec: ScalingSpec, rates: Rates, obs: QueueObservation,
           queue_order: tuple[str, ...],
           standing: waitmodel.Standing = waitmodel.NO_STANDING, *,
           ready: bool = False,
           trims: Mapping[str, float] | None = None,
           released_before: frozenset[str] = frozenset()) -> waitmodel.WaitSizing | None:
    """Slots for the wait targets; None without targets or until a service time is known
    (measured, or expected: `expectedServiceSeconds`). `standing`: the slots already up or
    on their way (`standing_slots`); `ready`: the slots added are up when the backlog lands
    (started ahead of a forecast batch), not podStartupSeconds later, and each runs at least
    `burst_horizon` of it whatever the late shares (a bet on a batch that may not come pays
    its start-up). `trims`: each queue's trim of its steady sizing (`trimmed`; none when
    `ready`: a forecast batch is sized as it lands). `released_before`: the queues whose
    batches the last sizing did not hold through the lulls (`waitmodel.lull_released`)."""
    targets = spec.targetWaitSeconds
    known = service_times(rates, spec.expectedServiceSeconds or {}, queue_order)
    if not targets or known is None:
        return None
    service, services = known
    loads = [
        waitmodel.QueueLoad(key=q, arrival_rate=rates.arrivals.rate(q),
                            queued=obs.backlog.get(q, 0), target_wait=targets.get(q),
                            service=services.get(q), oldest_age=obs.oldest_age(q) or 0.0,
                            cv2=priced_cv2(spec, cv2=rates.service.cv2(q), target=targets.get(q)),
                            arrival_cv2=rates.arrivals.cv2(q),
                            between_rate=rates.arrivals.rate_between(q),
                            over_budget=not ready and over_budget(rates, q, targets.get(q)),
                            trim=1.0 if ready else (trims or {}).get(q, 1.0))
        for q in queue_order
    ]
    return waitmodel.size_for_wait(loads, service=service, horizon=burst_horizon(spec),
                                   startup=0.0 if ready else spec.podStartupSeconds,
                                   standing=standing,
                                   hold_lulls=lull_budget(spec),
                                   released_before=released_before,
                                   poll=0.0 if ready else spec.pollIntervalSeconds)


def comes_in_time(spec: ScalingSpec, target: float) -> bool:
    """A pod started when a queue's waits grow is up within its `target` (podStartupSeconds
    <= target): the fleet may then meet rare demand as it comes (`priced_cv2`, `trim_bounds`)."""
    return target >= spec.podStartupSeconds


PRICED_CV2 = 2.0
"""The most spread of service times (squared coefficient of variation) that the steady sizing
prices for a queue whose target is at least podStartupSeconds (`priced_cv2`)."""


def priced_cv2(spec: ScalingSpec, *, cv2: float | None, target: float | None) -> float | None:
    """The squared coefficient of variation of a queue's service times as its wait is sized.

    Allen-Cunneen scales the whole wait by (1 + cv2) / 2, a mean wait's factor. On heavy-tailed
    times the measured cv2 is large and set by a few long tasks, and the steady fleet it asks
    for holds slots all the time against tasks that come rarely. Where a pod started when the
    queue grows still comes within the target (a target of at least podStartupSeconds), those
    tasks are met as they come instead: a slot a long task holds is counted as held
    (`held_after`) and the measured waits trim or restore the fleet (`trimmed`); the steady
    sizing prices at most PRICED_CV2. A tighter target keeps the measured cv2: a pod started for
    a long task comes too late for the tasks queued behind it."""
    if cv2 is None or target is None or not comes_in_time(spec, target):
        return cv2
    return min(cv2, PRICED_CV2)


def reactivation_seconds(spec: ScalingSpec) -> float:
    """What re-activating a pod released in a lull costs when the next batch lands: the poll
    that sees the batch and the pod's start-up, in seconds the batch waits (and the start-up
    in pod-seconds billed before the pod runs anything)."""
    return spec.pollIntervalSeconds + spec.podStartupSeconds


def lull_budget(spec: ScalingSpec) -> float:
    """The idle seconds a pod held through a lull for the next batch may cost: re-activation's
    (`reactivation_seconds`), plus what the user pays for latency (holdThroughLullsSeconds).
    Batches further apart than that are not held for (`waitmodel.size_for_wait`)."""
    return reactivation_seconds(spec) + spec.holdThroughLullsSeconds


HELD_SERVICES = 20.0
"""A running task holds its slot past what the wait model counts on once it has run this many
mean service times (`held_after`): an exponential task does so once in 500 million, so only the
outliers of a heavy tail that the measured mean does not hold yet count."""


def held_after(spec: ScalingSpec, rates: Rates) -> float:
    """Seconds after which a running task's slot counts as held (`waitmodel.Standing.held`):
    HELD_SERVICES mean service times, and at least a poll and a pod start-up (a pod asked for a
    slot held for less comes when it is free again); inf while no service time is known."""
    mean = rates.service.mean
    if mean is None:
        return math.inf
    return max(HELD_SERVICES * mean, spec.pollIntervalSeconds + spec.podStartupSeconds)


def standing_slots(spec: ScalingSpec, obs: QueueObservation, *, replicas: int,
                   scale_ups: tuple[tuple[float, int], ...], concurrency: int,
                   now: float, held_after: float = math.inf) -> waitmodel.Standing:
    """The slots of the `replicas` the Deployment asks for, as a burst can use them: those of
    running workers (the ones registered in Redis, at most `replicas`: idle or busy; not the
    quiesced ones, which take nothing unless this decision keeps them, though the tasks they
    hold keep those slots busy until they end: a burst asking for them back gets no free slot
    from them), and those of pods not
    running yet. Each of those is taken as asked for by the newest scale-up (`scale_ups`:
    (time, pods added)) it can belong to, and up podStartupSeconds after it and a poll later
    (a scale-up's pods are not all up at once, and the start-up is an estimate: counted from
    when they were asked for, a low queue's 10 s target on the two-priority bench trace is
    missed, 10.47 s), but never later than a pod asked for now; one that should be up
    already, a poll from now; one no scale-up explains (the operator restarted, or someone
    scaled the Deployment), as a pod asked for now. `held`: of the busy slots, those whose task
    has run longer than `held_after` seconds by the workers' last heartbeats."""
    alive = [w for w in obs.workers if w.alive(now=obs.at)]
    taking = [w for w in alive if w.worker_id not in obs.quiesced]
    running = min(len(taking), replicas)
    busy = min(sum(w.in_flight for w in taking), running * concurrency)
    held = min(busy, sum(w.held(now=obs.at, longer_than=held_after) for w in taking))
    waiting = max(0, replicas - len(alive))
    startup, poll = spec.podStartupSeconds, spec.pollIntervalSeconds
    starting: list[tuple[float, int]] = []
    for at, added in reversed(scale_ups):
        if waiting <= 0:
            break
        pods = min(added, waiting)
        waiting -= pods
        due = at + startup - now
        starting.append((min(startup, due + poll if due > 0 else poll), pods * concurrency))
    if waiting > 0:
        starting.append((startup, waiting * concurrency))
    draining = sum(w.in_flight for w in alive if w.worker_id in obs.quiesced)
    return waitmodel.Standing(idle=running * concurrency - busy, busy=busy + draining,
                              starting=tuple(starting), held=held)


def service_times(rates: Rates, expected: dict[str, float], queue_order: tuple[str, ...],
                  ) -> tuple[float, dict[str, float]] | None:
    """The fleet-wide mean service time and each queue's, or None while nothing is known.

    A queue's expected time (`expectedServiceSeconds`) stands until the workers have reported
    that queue's own (or, from workers that report none, until MIN_COMPLETIONS tasks have
    completed: the estimate then takes over). Until the fleet's mean is measured, it is the
    higher of the expected times' mean and the lower bound the tasks in hand give, and the
    queues without an expected time have that."""
    measured = rates.service.known
    fleet = rates.service.mean
    if not measured and expected:
        prior = sum(expected.values()) / len(expected)
        fleet = prior if fleet is None else max(fleet, prior)
    if fleet is None:
        return None
    estimated = (rates.service.by_queue(list(queue_order)) or {}) if measured else {}
    hinted = not measured or rates.service.reported
    own = {q: rates.service.measured(q) for q in queue_order}
    # tasks faster than the workers' millisecond reports (a no-op handler) measure 0 s: they
    # are taken as lasting one millisecond, so the model never divides by a zero service time
    return max(fleet, MIN_SERVICE_SECONDS), {
        q: max(own[q] or (expected[q] if hinted and q in expected else estimated.get(q, fleet)),
               MIN_SERVICE_SECONDS)
        for q in queue_order
    }


def over_budget(rates: Rates, queue: str, target: float | None) -> bool:
    """More of `queue`'s recent tasks waited longer than its target than the quantile allows
    (False without a target or until the workers have measured enough waits)."""
    if target is None:
        return False
    late = rates.waits.late_share(queue, target)
    return late is not None and late > 1 - waitmodel.QUANTILE


def burst_horizon(spec: ScalingSpec) -> float:
    """The least work each pod added for a burst gets: podStartupSeconds (a pod with less work
    than its start-up costs more than it runs), at least a poll (no decision comes sooner)."""
    return max(spec.pollIntervalSeconds, spec.podStartupSeconds)


TRIM_BELOW = 0.04
"""A queue whose recent tasks waited longer than its target less often than this (the workers'
wait histograms, `waits.Waits.late_share`) has its steady sizing trimmed (`trimmed`): its
fleet meets the target with room to spare. Near the quantile's 5 % on purpose: a trim that
stops growing at 2 % late holds a fleet that the target does not ask for (on Pareto service
times at concurrency 1, `bench/scaling/families.py`, a fourth pod for half the hour)."""
GIVE_BACK_ABOVE = 0.045
"""A queue whose late share is over this gives its trim back (the quantile allows 5 %: the
margin keeps the share that the trim lets rise under it; over 5 % the trim is gone at once)."""
TRIM_TASKS = 100.0
"""The trim grows by a factor e per this many measured waits (and at most TRIM_SECONDS) while
the late share stays under TRIM_BELOW, and gives back four times as fast over GIVE_BACK_ABOVE:
slow enough that the waits of the trimmed fleet are measured (the late share is that of the
last ~600 tasks) before it goes much further. The waits counted for growth are the queue's own
and those of the queues after it that meet its target with room too (`_confirming`)."""
TRIM_SECONDS = 120.0
"""The trim grows by a factor e in no less than this many seconds, however many tasks arrive:
at 15 tasks/s, 100 waits come in 7 s, less than a pod takes to start when the share rises."""
MAX_TRIM = 8.0
"""The most the measured waits stretch a queue's target in its steady sizing."""
TIGHT_MAX_TRIM = 2.0
"""The most they stretch a target under podStartupSeconds (`trim_bounds`)."""
TIGHT_TRIM_BELOW = 0.03
TIGHT_GIVE_BACK_ABOVE = 0.035
"""TRIM_BELOW and GIVE_BACK_ABOVE for a target under podStartupSeconds: room under the
quantile's 5 % for the tasks that come while a pod the trim took away is on its way back (at
4 % and 4.5 %, ramps with 2 s targets and 5 s start-ups in `bench/scaling/families.py` went
just over them: 2.01-2.05 s)."""
RESTART_MAX_TRIM = TIGHT_MAX_TRIM
"""The most a trim stretches a target while the queue's fleet is at zero (`trimmed`'s
`restarting`): each pod it withholds from the next activation comes a poll and a start-up after
the tasks that needed it, as a pod taken from a target under a start-up does. A trim grown
larger was measured on the fleet that is gone, at its load: one grown to 4x on two pods, where
it never took the second (one pod cannot run 0.95 erlangs), took the second on the next
activation's ramp at 0.8 erlangs, and its tasks went late."""
TIGHT_LAG_TARGETS = 4.0
"""A target under podStartupSeconds is trimmed only where a pod the trim took away is back
within this many targets (`trim_bounds`)."""


class TrimBounds(NamedTuple):
    """How a queue's trim moves (`trimmed`): it grows while under `below` of the queue's recent
    tasks are late, gives back over `give_back`, and stretches the target at most `most`."""

    below: float
    give_back: float
    most: float


IN_TIME_TRIM = TrimBounds(TRIM_BELOW, GIVE_BACK_ABOVE, MAX_TRIM)
TIGHT_TRIM = TrimBounds(TIGHT_TRIM_BELOW, TIGHT_GIVE_BACK_ABOVE, TIGHT_MAX_TRIM)


def trim_bounds(spec: ScalingSpec, target: float) -> TrimBounds | None:
    """How the measured waits may trim a queue with `target` (None: not at all).

    Where a pod comes in time (`comes_in_time`), IN_TIME_TRIM. Under a start-up, a pod the trim
    took away comes back a poll and a start-up after the late share rises, too late for the
    tasks queued meanwhile: such a target is trimmed within TIGHT_TRIM, and only where that lag
    is at most TIGHT_LAG_TARGETS targets. On `bench/scaling/families.py`, 2 s targets with 5 s
    start-ups (a lag of 3.5 targets) are met trimmed; in `bench/scaling/sweep.py`, 20 s
    start-ups with 1 s and 5 s targets (lags of 22 and 4.4 targets) went late trimmed (42 -> 50
    runs over their target)."""
    if comes_in_time(spec, target):
        return IN_TIME_TRIM
    if spec.pollIntervalSeconds + spec.podStartupSeconds <= TIGHT_LAG_TARGETS * target:
        return TIGHT_TRIM
    return None


def chance_over(bound: float, measured: float) -> float:
    """How much further over `bound` a late share drawn from `measured` waits strays by chance
    than one from a full histogram (WAIT_MEMORY_TASKS waits) does: one standard error of a
    binomial share at `bound`, sqrt(b (1 - b) / n), less a full histogram's.

    The trim's bounds were set on full histograms (`bench/scaling/families.py`: ramps with 2 s
    targets go late at a give-back of 4.5 %, not at 3.5 %); a queue with few tasks measures a
    noisier share. On a queue taking 0.04 tasks/s, 2 late of 34 (5.9 %) took its trim away at
    once, and it took most of an hour to regrow; its share is judged against the bounds plus
    this (at a bound of 5 %: 2.85 points at 34 waits, 0.9 at 150, none at 600)."""
    if measured <= 0:
        return 0.0
    spread = math.sqrt(bound * (1 - bound))
    return spread * max(0.0, 1 / math.sqrt(measured) - 1 / math.sqrt(WAIT_MEMORY_TASKS))


def _confirming(queue: str, target: float, below: float, *, after_it: tuple[str, ...],
                waits: Waits, measured: Mapping[str, int]) -> int:
    """The waits measured since the last observation that say `queue`'s `target` is met with
    room: its own, and those of the queues after it in priority order (`after_it`), as far as
    each of them has under `below` of its recent tasks waiting longer than `target`. On the
    same fleet a task of a lower queue waits at least as long as one of `queue` would
    (non-preemptive priority starts `queue`'s first), so its waits inside the target speak for
    `queue` too: a high queue taking a small share of the tasks (0.04 tasks/s, with 100 waits
    per factor e) trims at its neighbours' pace, not over hours."""
    count = measured.get(queue, 0)
    for lower in after_it:
        share = waits.late_share(lower, target)
        if share is None or share >= below:
            break
        count += measured.get(lower, 0)
    return count


def trimmed(spec: ScalingSpec, trims: tuple[tuple[str, float], ...], *, before: Waits,
            after: Waits, dt: float, queue_order: tuple[str, ...] = (),
            restarting: bool = False) -> tuple[tuple[str, float], ...]:
    """Each queue's trim of its steady sizing after an observation (the queues with one > 1).

    The wait model sizes a queue's steady fleet for P(W > target) <= 5 % from the measured
    rates and service times; where it is pessimistic (Allen-Cunneen's (1 + cv2) / 2 is a mean
    wait's factor, and heavy-tailed service times give a large, unstable cv2; a backlog behind a
    queue is sized for its own p95, not for the share of the queue's tasks that meet one), the
    fleet beats the target by far and pays for it. The trim is a bounded, slow correction from
    what the workers measured: the factor (1 to MAX_TRIM) the steady sizing stretches the
    queue's target by (`waitmodel.QueueLoad.trim`). It grows with each wait measured (over
    the `dt` seconds since the last observation, at most e per TRIM_SECONDS; the waits of the
    queues after it count too where they meet its target with room: `_confirming`) while
    fewer than TRIM_BELOW of the queue's recent tasks are late, holds between, shrinks four
    times as fast over GIVE_BACK_ABOVE, and is gone at once over the quantile's 5 % or while
    the share is not trusted (too few waits, a reset stats hash); a share from few waits is
    judged over those two with its extra noise (`chance_over`). Bursts are still started
    within the real target. A target under a start-up is trimmed less or not at all
    (`trim_bounds`). `queue_order`: the queue keys in priority order (default: the targets');
    `restarting`: the fleet is at zero, each trim held at most at RESTART_MAX_TRIM."""
    old = dict(trims)
    counted = {q: counts[0] for q, counts in before.totals if counts}
    now = {q: counts[0] for q, counts in after.totals if counts}
    measured = {q: max(0, n - counted.get(q, n)) for q, n in now.items()}
    targets = spec.targetWaitSeconds or {}
    order = queue_order or tuple(targets)
    allowed = 1 - waitmodel.QUANTILE
    out: list[tuple[str, float]] = []
    for q, target in targets.items():
        late = after.late_share(q, target)
        bounds = trim_bounds(spec, target)
        if bounds is None or late is None:
            continue
        n = after.counted(q)
        if late > allowed + chance_over(allowed, n):
            continue
        step = 0.0
        if late < bounds.below:
            after_it = order[order.index(q) + 1:] if q in order else ()
            confirming = _confirming(q, target, bounds.below, after_it=after_it, waits=after,
                                     measured=measured)
            step = min(confirming / TRIM_TASKS, max(0.0, dt) / TRIM_SECONDS)
        elif late > bounds.give_back + chance_over(bounds.give_back, n):
            step = -4 * measured.get(q, 0) / TRIM_TASKS
        most = min(bounds.most, RESTART_MAX_TRIM) if restarting else bounds.most
        trim = min(most, old.get(q, 1.0) * math.exp(step))
        if trim > 1.0:
            out.append((q, trim))
    return tuple(out)
