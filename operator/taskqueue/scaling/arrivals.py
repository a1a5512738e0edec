"""The arrival estimator: tasks per second into each queue, and how bursty they come. Pure.

Between two polls, the tasks that entered queue q are the change of its length plus the tasks
workers took from it (`QueueObservation.taken`, the per-queue counters fetch.lua keeps; a queue
nothing was taken from yet has no counter: 0); without any of those counters (AtMostOnce
blocking pops) the arrivals of all queues are the change of queued + in flight plus the attempts
ended, counted against the first queue (the conservative side for the priority model):
`entered`. The rate is a sum that decays with MEMORY_SECONDS, so it
follows a change in about that time and a quiet period does not divide by zero; a second sum
forgets in SHORT_MEMORY_SECONDS, and the rate used is the lower of the two. The rate between
batches (`Arrivals.rate_between`) leaves out the polls that saw a batch: it is what a queue whose
batches are released through the lulls is sized for.

How bursty each queue's arrivals are (`Arrivals.cv2`: 1 for Poisson, the mean batch size for
tasks pushed in batches that recur) is the Allan factor of the count per interval, from the same
arrival counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from taskqueue.scaling import forecast
from taskqueue.scaling.observation import QueueObservation

MEMORY_SECONDS = 60.0
"""Time constant of the exponential forgetting of the sums."""
SHORT_MEMORY_SECONDS = 10.0
"""A second arrival sum forgets this fast; the rate used is the lower of the two, so a fleet
shrinks within seconds when arrivals stop, while a rise is met by the backlog (the queueing
model's burst term) and then by the long average."""
SHORT_MIN_TASKS = 10.0
"""The short average is used only when it spans this many tasks (at the long rate)."""
BATCH_SIGMAS = 4.0
BATCH_SLACK = 3.0
"""Arrivals in one interval beyond rate x dt + BATCH_SIGMAS x sqrt(D x rate x dt) + BATCH_SLACK are
a batch, not a rate (`_steady_part`; D is `Arrivals.cv2`, 1 for Poisson: batches that recur
are the rate)."""
SPREAD_MEMORY_SECONDS = 300.0
"""Time constant of the sums behind `Arrivals.cv2` (minutes: batches are counted by the dozen,
not by the task)."""
SPREAD_MIN_TASKS = 20.0
SPREAD_MIN_ONSETS = 5.0
"""`Arrivals.cv2` is trusted once its sums hold this many tasks, arrived in at least this many
separate runs of intervals (decayed: an onset is an interval with arrivals after one without):
batches that recur, not one burst, however long (a burst is the backlog's to start: the wait
model's burst term)."""
SPREAD_MAX = 50.0


class ArrivalSpread(NamedTuple):
    """One queue's decayed sums for `Arrivals.cv2`, x being an interval's arrivals per second:
    E[(x_i - x_{i-1})^2] = IDC x lambda x (1 / dt_i + 1 / dt_{i-1}) for a stationary count
    with index of dispersion IDC, so the ratio of `squares` to `base` estimates IDC."""

    queue: str
    squares: float = 0.0
    """Sum of (x_i - x_{i-1})^2."""
    base: float = 0.0
    """Sum of (x_i + x_{i-1}) / 2 x (1 / dt_i + 1 / dt_{i-1})."""
    tasks: float = 0.0
    onsets: float = 0.0
    """Intervals in which a task arrived after one in which none did."""
    last_rate: float = 0.0
    last_dt: float = 0.0


@dataclass(frozen=True)
class Arrivals:
    """Decayed arrival sums per queue since the first observation."""

    elapsed: float = 0.0
    counts: tuple[tuple[str, float], ...] = ()
    """Per queue, the decayed tasks that arrived (without batches: `_steady_part`)."""
    elapsed_short: float = 0.0
    counts_short: tuple[tuple[str, float], ...] = ()
    """The same, forgetting in SHORT_MEMORY_SECONDS."""
    spread: tuple[ArrivalSpread, ...] = ()
    """Per queue, the decayed sums behind `cv2`."""
    batches: tuple[forecast.QueueBatches, ...] = ()
    """Per queue, the last batches seen (what `_steady_part` left out), for `forecast`."""
    between: tuple[tuple[str, float], ...] = ()
    """Per queue, the decayed tasks that arrived on polls that saw no batch (as `counts`)."""

    def rate(self, queue: str) -> float:
        """Tasks/s into `queue`: the lower of the long and the short average."""
        if self.elapsed <= 0 or self.elapsed_short <= 0:
            return 0.0
        long = dict(self.counts).get(queue, 0.0) / self.elapsed
        # too few for a short average (batches count as one each: cv2 tasks)
        if long * SHORT_MEMORY_SECONDS < SHORT_MIN_TASKS * self.batch_factor(queue):
            return long
        return min(long, dict(self.counts_short).get(queue, 0.0) / self.elapsed_short)

    def rate_between(self, queue: str) -> float:
        """Tasks/s into `queue` on polls that saw no batch (at most `rate`): what arrives
        between its batches, the rate a queue whose batches are released is left with."""
        if self.elapsed <= 0:
            return 0.0
        return min(self.rate(queue), dict(self.between).get(queue, 0.0) / self.elapsed)

    def cv2(self, queue: str) -> float | None:
        """How much burstier than Poisson `queue`'s arrivals are: the index of dispersion of the
        count per poll interval (variance / mean: 1 for Poisson, for tasks arriving in batches
        the mean size of the batch a task arrives in, E[B^2] / E[B]; under 1 for a regular
        feed), estimated as the Allan factor (successive intervals' differences, so a rate that
        drifts or steps over minutes adds little). For the wait model it is the squared
        coefficient of variation of the inter-arrival times. None until SPREAD_MIN_TASKS arrived
        in SPREAD_MIN_ONSETS separate runs."""
        for s in self.spread:
            if (s.queue == queue and s.tasks >= SPREAD_MIN_TASKS
                    and s.onsets >= SPREAD_MIN_ONSETS and s.base > 0):
                return min(SPREAD_MAX, s.squares / s.base)
        return None

    def batch_factor(self, queue: str) -> float:
        """`cv2`, taken as 1 (Poisson) while unknown or when smaller: how many tasks one
        arrival counts for, for the uses that must not assume smoother than Poisson."""
        return max(1.0, self.cv2(queue) or 1.0)

    def lull_expected(self, seconds: float) -> bool:
        """The arrivals as measured (rate and batches) leave `seconds` without a task more than
        5 % of the time: a lull that long says nothing about the rate."""
        for q, _ in self.counts:
            rate = self.rate(q)
            if rate > 0 and rate * seconds / self.batch_factor(q) < math.log(20):
                return True
        return False


def entered(obs: QueueObservation, *, backlog: Mapping[str, int], taken: Mapping[str, int],
            in_flight: int, ended: int) -> dict[str, float]:
    """The tasks that entered each queue since the observation whose queue lengths were
    `backlog`, its taken counters `taken` and its tasks in flight `in_flight`, `ended`
    attempts having ended since (completed or failed)."""
    queues = list(obs.backlog)
    if queues and any(q in obs.taken for q in queues):
        # a queue's counter is written by the first take from it: until then it has taken 0
        return {q: max(0.0, float(obs.backlog[q] - backlog.get(q, 0)
                                  + obs.taken.get(q, 0) - taken.get(q, 0))) for q in queues}
    total = obs.queued - sum(backlog.values()) + obs.in_flight - in_flight + ended
    out = dict.fromkeys(queues, 0.0)
    if queues:
        out[queues[0]] = max(0.0, float(total))
    return out


def after(arrivals: Arrivals, raw: dict[str, float], dt: float, *, at: float) -> Arrivals:
    """`arrivals` after an interval of `dt` seconds, ending at `at`, in which `raw` tasks
    entered each queue."""
    keep = math.exp(-dt / MEMORY_SECONDS)
    steady = _steady_part(arrivals, raw, dt)
    keep_short = math.exp(-dt / SHORT_MEMORY_SECONDS)
    old, old_short = dict(arrivals.counts), dict(arrivals.counts_short)
    old_between = dict(arrivals.between)
    return Arrivals(
        elapsed=arrivals.elapsed * keep + dt,
        counts=tuple((q, old.get(q, 0.0) * keep + n) for q, n in steady.items()),
        elapsed_short=arrivals.elapsed_short * keep_short + dt,
        counts_short=tuple((q, old_short.get(q, 0.0) * keep_short + n)
                           for q, n in steady.items()),
        spread=_spread(arrivals, raw, dt),
        batches=(forecast.noted(arrivals.batches, raw, steady, at=at, dt=dt)
                 if arrivals.elapsed > 0 else arrivals.batches),
        # a poll with a batch (more entered than its steady part) adds nothing between batches
        between=tuple((q, old_between.get(q, 0.0) * keep + (0.0 if raw[q] > n else n))
                      for q, n in steady.items()),
    )


def restarted(arrivals: Arrivals) -> Arrivals:
    """`arrivals` with the rate sums started again (the stats hash was reset), the spread kept."""
    return replace(arrivals, elapsed=0.0, counts=(), elapsed_short=0.0, counts_short=(),
                   between=())


def _steady_part(arrivals: Arrivals, entered: dict[str, float],
                 dt: float) -> dict[str, float]:
    """`entered` without what is beyond a plausible count for the rate measured so far (the
    higher of the two averages x `dt`, + BATCH_SIGMAS standard deviations + BATCH_SLACK; the
    variance is D x the mean, D the measured dispersion, 1 for Poisson): a batch. The wait
    model starts a batch from the backlog (its burst term); counted as a rate, it would also
    hold standing capacity for a minute after it was served. A real rise passes the cap more
    each poll (the cap follows the rate it lets in)."""
    if arrivals.elapsed <= 0:
        return entered
    long, short = dict(arrivals.counts), dict(arrivals.counts_short)
    out = {}
    for q, n in entered.items():
        rate = max(long.get(q, 0.0) / arrivals.elapsed,
                   short.get(q, 0.0) / arrivals.elapsed_short
                   if arrivals.elapsed_short > 0 else 0.0)
        expected = rate * dt
        variance = arrivals.batch_factor(q) * expected
        out[q] = min(n, expected + BATCH_SIGMAS * math.sqrt(variance) + BATCH_SLACK)
    return out


def _spread(arrivals: Arrivals, entered: dict[str, float],
            dt: float) -> tuple[ArrivalSpread, ...]:
    """`arrivals.spread` after an interval of `dt` seconds in which `entered` tasks arrived."""
    keep = math.exp(-dt / SPREAD_MEMORY_SECONDS)
    before = {s.queue: s for s in arrivals.spread}
    out = []
    for q, n in entered.items():
        x, old = n / dt, before.get(q)
        if old is None:
            out.append(ArrivalSpread(q, last_rate=x, last_dt=dt))
            continue
        out.append(ArrivalSpread(
            q, squares=old.squares * keep + (x - old.last_rate) ** 2,
            base=old.base * keep + (x + old.last_rate) / 2 * (1 / dt + 1 / old.last_dt),
            tasks=old.tasks * keep + n,
            onsets=old.onsets * keep + (1.0 if n > 0 and old.last_rate == 0 else 0.0),
            last_rate=x, last_dt=dt))
    return tuple(out)
