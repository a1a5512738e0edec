"""The service-time estimator: how long a task holds a worker slot, per queue. Pure.

Workers report what they measured: the seconds they spent on each queue's tasks and the attempts
(`QueueObservation.service`, added to the stats hash with each heartbeat). Where those totals
exist, a queue's service time is their decayed ratio, exact however bursty the traffic (raised
to Little's law while they still miss the slow tasks running: `ServiceTimes.unfinished_factor`).

Without reported totals, the service time is Little's law on the slots: in-flight task-seconds
divided by attempts ended. These sums decay per attempt ended (SERVICE_MEMORY_TASKS), so an idle
spell keeps the estimate for the next burst and slow tasks are remembered as long as fast ones.
Per queue, the service time then comes from a least-squares fit of each interval's held
task-seconds against the tasks taken from each queue in it (busy ~= sum S_q x taken_q), pulled
toward the overall mean (ridge), so a queue whose tasks are slower than the others' is seen as
such once its share of the work has varied; with one queue, or no counters, it is the mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from taskqueue.scaling.observation import QueueObservation

SERVICE_MEMORY_TASKS = 300.0
"""The service-time sums forget per attempt ended, not per second: the last few hundred tasks
count, however long they took (an hour-long task is not forgotten a minute later)."""
MIN_COMPLETIONS = 3.0
"""Attempts ended (decayed) needed before the service time is trusted."""
RIDGE = 0.05
"""Weight of the overall mean in the per-queue fit (relative to each queue's own diagonal)."""
UNFINISHED_MIN_POLLS = 2.0
"""`ServiceTimes.unfinished_factor` applies once the held task-seconds say tasks last at least
this many poll intervals: they are sampled at the polls, which misjudges shorter tasks (a burst
of 0.2 s tasks seen in flight at one poll counts as held for half the interval), and the reports
of such tasks are complete within seconds anyway."""


@dataclass(frozen=True)
class ServiceTimes:
    """Decayed service-time sums, and the workers' totals at the last observation."""

    busy_seconds: float = 0.0
    """Slot-seconds holding a task (in-flight x time)."""
    interval: float = 0.0
    """Seconds between the last two observations."""
    completions: float = 0.0
    """Attempts ended (completed or failed), decayed as `busy_seconds` is."""
    in_flight: int = 0
    """Tasks held at the last observation."""
    mix: tuple[tuple[str, str, float], ...] = ()
    """Decayed sums of taken_q x taken_r per interval (the fit's normal matrix)."""
    mix_busy: tuple[tuple[str, float], ...] = ()
    """Decayed sums of taken_q x held task-seconds per interval."""
    totals: tuple[tuple[str, float, int], ...] = ()
    """The workers' service totals at the last observation (queue, seconds, attempts)."""
    totals_sq: tuple[tuple[str, float, int], ...] = ()
    """The workers' sums of squared attempt times at the last observation (queue, seconds^2,
    attempts)."""
    sums: tuple[tuple[str, float, float], ...] = ()
    """Decayed sums of the reported (seconds, attempts) per queue."""
    sums_sq: tuple[tuple[str, float, float], ...] = ()
    """Decayed sums of the reported (seconds^2, attempts) per queue, where workers report them."""

    def cv2(self, queue: str) -> float | None:
        """Squared coefficient of variation of `queue`'s service time (variance / mean^2: 1 for
        exponential times, 0 for constant ones); None until reported for MIN_COMPLETIONS."""
        mean = self._reported(queue)
        for q, squares, attempts in self.sums_sq:
            if q == queue and attempts >= MIN_COMPLETIONS and mean:
                return max(0.0, squares / attempts / (mean * mean) - 1)
        return None

    def measured(self, queue: str) -> float | None:
        """Mean seconds per attempt the workers reported for `queue` (None: too few), raised
        by `unfinished_factor` while the reports still miss the slow tasks."""
        reported = self._reported(queue)
        return None if reported is None else reported * self.unfinished_factor

    def _reported(self, queue: str) -> float | None:
        for q, seconds, attempts in self.sums:
            if q == queue and attempts >= MIN_COMPLETIONS:
                return seconds / attempts
        return None

    @property
    def unfinished_factor(self) -> float:
        """How far the reported mean falls short of Little's law on the slots (held
        task-seconds / attempts ended), at least 1.

        Workers report a task's time when it ends, so while a fleet has run for less than a
        few service times (a new TaskQueue, the ramp to a new load) the reports hold the
        tasks that ended early and miss the slow ones still running: the mean they give is
        too low (9.6 s, not 20 s, 40 s into a steady stream of exponential 20 s tasks), and
        the fleet is sized too small. The held task-seconds count the running tasks' time as
        well (the exposure estimate, exact for exponential times); once the fleet has run
        long enough, the two agree and the reports' per-queue detail stands. Only varied
        times hide slow tasks: the shortfall is scaled by twice the squared coefficient of
        variation the reports show, at most 1 (an early sample of exponential times shows
        about half their spread; times of one length get no raise, where Little's law would
        overshoot right after the first completions)."""
        mean = self._reported_mean
        if mean is None or mean <= 0 or self.completions < MIN_COMPLETIONS:
            return 1.0
        held = self.busy_seconds / self.completions
        if held < UNFINISHED_MIN_POLLS * self.interval:
            return 1.0
        return 1.0 + self._reported_spread(mean) * max(0.0, held / mean - 1.0)

    @property
    def _reported_mean(self) -> float | None:
        """Seconds per attempt the workers reported over all queues (None: too few)."""
        attempts = sum(m[2] for m in self.sums)
        return sum(m[1] for m in self.sums) / attempts if attempts >= MIN_COMPLETIONS else None

    def _reported_spread(self, mean: float) -> float:
        """min(1, 2 x cv2) of the reported times (1 where the squares are not reported)."""
        squares = sum(m[1] for m in self.sums_sq)
        counted = sum(m[2] for m in self.sums_sq)
        if counted < MIN_COMPLETIONS:
            return 1.0
        return min(1.0, max(0.0, 2 * (squares / counted / (mean * mean) - 1)))

    @property
    def mean(self) -> float | None:
        """Mean seconds a task is held; before MIN_COMPLETIONS, the lower bound held
        task-seconds / (completed + held tasks) (the tasks in hand have run at least that)."""
        reported = self._reported_mean
        if reported is not None:
            return reported * self.unfinished_factor
        if self.busy_seconds <= 0:
            return None
        if self.completions < MIN_COMPLETIONS:
            started = self.completions + self.in_flight
            return self.busy_seconds / started if started >= 1 else None
        return self.busy_seconds / self.completions

    @property
    def lower_bound(self) -> float | None:
        """Held task-seconds over the attempts started (ended, decayed, + those in hand): each
        has been held at least that on average, however few have ended (None before any task
        was held)."""
        started = self.completions + self.in_flight
        return self.busy_seconds / started if self.busy_seconds > 0 and started > 0 else None

    @property
    def known(self) -> bool:
        """The mean service time is measured (reported for, or completed by, MIN_COMPLETIONS
        tasks), not the lower bound `mean` gives before."""
        return (self._reported_mean is not None
                or (self.busy_seconds > 0 and self.completions >= MIN_COMPLETIONS))

    @property
    def reported(self) -> bool:
        """The workers report their service totals (so each queue's own is on its way)."""
        return bool(self.totals)

    def by_queue(self, queues: list[str]) -> dict[str, float] | None:
        """Service seconds per queue (the mean for each when the fit cannot tell them apart);
        None until the mean is known."""
        mean = self.mean
        if mean is None:
            return None
        estimated = self._estimated_by_queue(queues, mean)
        return {q: self.measured(q) or estimated[q] for q in queues}

    def _estimated_by_queue(self, queues: list[str], mean: float) -> dict[str, float]:
        if len(queues) < 2 or not self.mix_busy:
            return dict.fromkeys(queues, mean)
        a = {(q, r): v for q, r, v in self.mix}
        b = dict(self.mix_busy)
        matrix = [[a.get((q, r), 0.0) for r in queues] for q in queues]
        diagonal = [matrix[i][i] for i in range(len(queues))]
        for i, d in enumerate(diagonal):  # ridge scaled per queue: each pulled alike
            matrix[i][i] += RIDGE * d
        fit = _solve(matrix, [b.get(q, 0.0) + RIDGE * d * mean
                              for q, d in zip(queues, diagonal, strict=True)])
        if fit is None:
            return dict.fromkeys(queues, mean)
        return {q: max(0.05 * mean, s) for q, s in zip(queues, fit, strict=True)}


def observed(service: ServiceTimes, obs: QueueObservation) -> ServiceTimes:
    """`service` with the workers' totals and the tasks in flight of `obs` (every observation,
    the first included: a queue's first totals count as its history)."""
    return replace(
        service, in_flight=obs.in_flight,
        totals=tuple((q, s, n) for q, (s, n) in obs.service.items()),
        totals_sq=tuple((q, s2, n) for q, (s2, n) in obs.service_sq.items()),
        sums=_decayed({q: (s, n) for q, s, n in service.totals}, obs.service, service.sums),
        sums_sq=_decayed({q: (s2, n) for q, s2, n in service.totals_sq}, obs.service_sq,
                         service.sums_sq),
    )


def after(service: ServiceTimes, before: ServiceTimes, *, obs: QueueObservation, dt: float,
          ended: int, taken: Mapping[str, int]) -> ServiceTimes:
    """`service` (`observed` already) after an interval of `dt` seconds since the observation of
    `before`, in which `ended` attempts ended; `taken`: the taken counters at its start."""
    busy = dt * (before.in_flight + obs.in_flight) / 2
    held = math.exp(-ended / SERVICE_MEMORY_TASKS)
    return replace(
        service,
        busy_seconds=before.busy_seconds * held + busy,
        interval=dt,
        completions=before.completions * held + ended,
        **_fit(before, obs, taken, busy, held),
    )


def restarted(service: ServiceTimes) -> ServiceTimes:
    """`service` with Little's-law sums started again (the stats hash was reset)."""
    return replace(service, busy_seconds=0.0, completions=0.0)


def _fit(before: ServiceTimes, obs: QueueObservation, taken: Mapping[str, int], busy: float,
         keep: float) -> dict[str, Any]:
    """The per-queue fit's sums after one interval (unchanged without taken counters)."""
    if len(obs.taken) < 2 or not all(q in taken for q in obs.taken):
        return {}
    n = {q: max(0, obs.taken[q] - taken[q]) for q in obs.taken}
    a = {(q, r): v for q, r, v in before.mix}
    b = dict(before.mix_busy)
    return {
        "mix": tuple((q, r, a.get((q, r), 0.0) * keep + n[q] * n[r]) for q in n for r in n),
        "mix_busy": tuple((q, b.get(q, 0.0) * keep + n[q] * busy) for q in n),
    }


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when singular."""
    size = len(rhs)
    m = [[*row, rhs[i]] for i, row in enumerate(matrix)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, size):
            f = m[r][col] / m[col][col]
            m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    out = [0.0] * size
    for r in range(size - 1, -1, -1):
        out[r] = (m[r][size] - sum(m[r][c] * out[c] for c in range(r + 1, size))) / m[r][r]
    return out


def _decayed(before: dict[str, tuple[float, int]], now: dict[str, tuple[float, int]],
             sums_before: tuple[tuple[str, float, float], ...],
             ) -> tuple[tuple[str, float, float], ...]:
    """Per queue, (total, attempts) sums forgetting per attempt, from cumulative totals: a total
    that went down (a reset stats hash) starts that queue again, and a queue's first totals (a
    new operator, or its first heartbeat) count as the history of their last
    SERVICE_MEMORY_TASKS attempts, so an operator restart knows the service time at once."""
    sums = {q: (v, n) for q, v, n in sums_before}
    for q, (total, attempts) in now.items():
        if q not in before:
            weight = min(float(attempts), SERVICE_MEMORY_TASKS)
            if attempts > 0 and q not in sums:
                sums[q] = (total / attempts * weight, weight)
            continue
        d_total, d_attempts = total - before[q][0], attempts - before[q][1]
        if d_total < 0 or d_attempts < 0:
            sums.pop(q, None)
            continue
        keep = math.exp(-d_attempts / SERVICE_MEMORY_TASKS)
        old, old_n = sums.get(q, (0.0, 0.0))
        sums[q] = (old * keep + d_total, old_n * keep + d_attempts)
    return tuple((q, v, n) for q, (v, n) in sums.items())
