"""Arrival rate per queue and service time per task, measured from successive observations. Pure.

Between two polls, the tasks that entered queue q are the change of its length plus the tasks
workers took from it (`QueueObservation.taken`, the per-queue counters fetch.lua keeps); without
those counters (older workers, AtMostOnce blocking pops) the arrivals of all queues are the change
of queued + in flight plus the completions, counted against the first queue (the conservative
side for the priority model). The service time is Little's law on the slots: in-flight
task-seconds divided by completions. Both are sums that decay with `MEMORY_SECONDS`, so a rate
follows a change in about that time and a quiet period does not divide by zero; the service-time
sums decay per completed task (`SERVICE_MEMORY_TASKS`), so an idle spell keeps the estimate for
the next burst and slow tasks are remembered as long as fast ones.

How bursty each queue's arrivals are (`Rates.arrival_cv2`: 1 for Poisson, the mean batch size
for tasks pushed in batches that recur) is the Allan factor of the count per interval, from the
same arrival counts.

Workers report what they measured: the seconds they spent on each queue's tasks and the attempts
(`QueueObservation.service`, added to the stats hash with each heartbeat). Where those totals
exist, a queue's service time is their decayed ratio, exact however bursty the traffic (raised
to Little's law while they still miss the slow tasks running: `Rates.unfinished_factor`); the
estimates below are the fallback for workers that do not report them.

Per queue, without reported totals, the service time comes from a least-squares fit of each
interval's held task-seconds against the tasks taken from each queue in it (busy ~= sum S_q x
taken_q), pulled toward the overall mean (ridge), so a queue whose tasks are slower than the
others' is seen as such once its share of the work has varied; with one queue, or no counters,
it is the mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire.keys import WAIT_EDGES_SECONDS

MEMORY_SECONDS = 60.0
"""Time constant of the exponential forgetting of the sums."""
SHORT_MEMORY_SECONDS = 10.0
"""A second arrival sum forgets this fast; the rate used is the lower of the two, so a fleet
shrinks within seconds when arrivals stop, while a rise is met by the backlog (the queueing
model's burst term) and then by the long average."""
SERVICE_MEMORY_TASKS = 300.0
"""The service-time sums forget per completion, not per second: the last few hundred tasks
count, however long they took (an hour-long task is not forgotten a minute later)."""
SHORT_MIN_TASKS = 10.0
"""The short average is used only when it spans this many tasks (at the long rate)."""
MIN_COMPLETIONS = 3.0
"""Completions (decayed) needed before the service time is trusted."""
BATCH_SIGMAS = 4.0
BATCH_SLACK = 3.0
"""Arrivals in one interval beyond rate x dt + BATCH_SIGMAS x sqrt(D x rate x dt) + BATCH_SLACK are
a batch, not a rate (`_steady_part`; D is `Rates.arrival_cv2`, 1 for Poisson: batches that
recur are the rate)."""
RIDGE = 0.05
"""Weight of the overall mean in the per-queue fit (relative to each queue's own diagonal)."""
WAIT_MEMORY_TASKS = 600.0
"""The wait histograms forget per measured task: the late share is that of the last few hundred
tasks of the queue."""
SPREAD_MEMORY_SECONDS = 300.0
"""Time constant of the sums behind `Rates.arrival_cv2` (minutes: batches are counted by the
dozen, not by the task)."""
SPREAD_MIN_TASKS = 20.0
SPREAD_MIN_ONSETS = 5.0
"""`Rates.arrival_cv2` is trusted once its sums hold this many tasks, arrived in at least this
many separate runs of intervals (decayed: an onset is an interval with arrivals after one
without): batches that recur, not one burst, however long (a burst is the backlog's to start:
the wait model's burst term)."""
SPREAD_MAX = 50.0
MIN_WAITED = 20.0
"""Measured waits (decayed) needed before a queue's late share is trusted."""
UNFINISHED_MIN_POLLS = 2.0
"""`Rates.unfinished_factor` applies once the held task-seconds say tasks last at least this
many poll intervals: they are sampled at the polls, which misjudges shorter tasks (a burst of
0.2 s tasks seen in flight at one poll counts as held for half the interval), and the reports
of such tasks are complete within seconds anyway."""


class ArrivalSpread(NamedTuple):
    """One queue's decayed sums for `Rates.arrival_cv2`, x being an interval's arrivals per
    second: E[(x_i - x_{i-1})^2] = IDC x lambda x (1 / dt_i + 1 / dt_{i-1}) for a stationary
    count with index of dispersion IDC, so the ratio of `squares` to `base` estimates IDC."""

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
class Rates:
    """Decayed sums since the first observation; `at` is the time of the last one."""

    at: float | None = None
    elapsed: float = 0.0
    arrivals: tuple[tuple[str, float], ...] = ()
    elapsed_short: float = 0.0
    arrivals_short: tuple[tuple[str, float], ...] = ()
    busy_seconds: float = 0.0
    """Slot-seconds holding a task (in-flight x time)."""
    interval: float = 0.0
    """Seconds between the last two observations."""
    completions: float = 0.0
    """Attempts ended (completed or failed), decayed as `busy_seconds` is."""
    backlog: tuple[tuple[str, int], ...] = ()
    taken: tuple[tuple[str, int], ...] = ()
    in_flight: int = 0
    completed: int = 0
    failed: int = 0
    """The `completed` and `failed` counters at the last observation: an attempt ends in one or
    the other (a retried task's next attempt is another arrival and another end)."""
    mix: tuple[tuple[str, str, float], ...] = ()
    """Decayed sums of taken_q x taken_r per interval (the fit's normal matrix)."""
    mix_busy: tuple[tuple[str, float], ...] = ()
    """Decayed sums of taken_q x held task-seconds per interval."""
    reported: tuple[tuple[str, float, int], ...] = ()
    """The workers' service totals at the last observation (queue, seconds, attempts)."""
    reported_sq: tuple[tuple[str, float, int], ...] = ()
    """The workers' sums of squared attempt times at the last observation (queue, seconds^2,
    attempts)."""
    measured: tuple[tuple[str, float, float], ...] = ()
    """Decayed sums of the reported (seconds, attempts) per queue."""
    measured_sq: tuple[tuple[str, float, float], ...] = ()
    """Decayed sums of the reported (seconds^2, attempts) per queue, where workers report them."""
    waited: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """The workers' wait histograms at the last observation (`QueueObservation.waited`)."""
    waits: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """Decayed sums of the reported wait histograms per queue (the count, then over each edge
    of `keys.WAIT_EDGES_SECONDS`)."""
    spread: tuple[ArrivalSpread, ...] = ()
    """Per queue, the decayed sums behind `arrival_cv2`."""

    def wait_quantile(self, queue: str, quantile: float) -> float | None:
        """The wait of `queue`'s recent tasks that `quantile` of them stayed under (linear
        between the histogram's edges; the last edge when more are past it); None until
        MIN_WAITED waits were measured."""
        sums = self._trusted_waits(queue)
        return None if sums is None else wait_quantile_of(sums, quantile)

    def late_share(self, queue: str, target: float) -> float | None:
        """The share of `queue`'s recent tasks that waited longer than `target` seconds (linear
        between the histogram's edges; past the last edge, the share over it); None until
        MIN_WAITED waits were measured (or for tasks without an envelope time: never)."""
        sums = self._trusted_waits(queue)
        return None if sums is None else _over(sums, target) / sums[0]

    def _trusted_waits(self, queue: str) -> tuple[float, ...] | None:
        """`queue`'s decayed wait histogram once it holds MIN_WAITED waits."""
        for q, sums in self.waits:
            if q == queue and sums and sums[0] >= MIN_WAITED:
                return sums
        return None

    def service_cv2(self, queue: str) -> float | None:
        """Squared coefficient of variation of `queue`'s service time (variance / mean^2: 1 for
        exponential times, 0 for constant ones); None until reported for MIN_COMPLETIONS."""
        mean = self._reported_service(queue)
        for q, squares, attempts in self.measured_sq:
            if q == queue and attempts >= MIN_COMPLETIONS and mean:
                return max(0.0, squares / attempts / (mean * mean) - 1)
        return None

    def measured_service(self, queue: str) -> float | None:
        """Mean seconds per attempt the workers reported for `queue` (None: too few), raised
        by `unfinished_factor` while the reports still miss the slow tasks."""
        reported = self._reported_service(queue)
        return None if reported is None else reported * self.unfinished_factor

    def _reported_service(self, queue: str) -> float | None:
        for q, seconds, attempts in self.measured:
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
        attempts = sum(m[2] for m in self.measured)
        return sum(m[1] for m in self.measured) / attempts if attempts >= MIN_COMPLETIONS else None

    def _reported_spread(self, mean: float) -> float:
        """min(1, 2 x cv2) of the reported times (1 where the squares are not reported)."""
        squares = sum(m[1] for m in self.measured_sq)
        counted = sum(m[2] for m in self.measured_sq)
        if counted < MIN_COMPLETIONS:
            return 1.0
        return min(1.0, max(0.0, 2 * (squares / counted / (mean * mean) - 1)))

    def arrival_cv2(self, queue: str) -> float | None:
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
        """`arrival_cv2`, taken as 1 (Poisson) while unknown or when smaller: how many tasks one
        arrival counts for, for the uses that must not assume smoother than Poisson."""
        return max(1.0, self.arrival_cv2(queue) or 1.0)

    def lull_expected(self, seconds: float) -> bool:
        """The arrivals as measured (rate and batches) leave `seconds` without a task more than
        5 % of the time: a lull that long says nothing about the rate."""
        for q, _ in self.arrivals:
            rate = self.arrival_rate(q)
            if rate > 0 and rate * seconds / self.batch_factor(q) < math.log(20):
                return True
        return False

    def arrival_rate(self, queue: str) -> float:
        """Tasks/s into `queue`: the lower of the long and the short average."""
        if self.elapsed <= 0 or self.elapsed_short <= 0:
            return 0.0
        long = dict(self.arrivals).get(queue, 0.0) / self.elapsed
        # too few for a short average (batches count as one each: arrival_cv2 tasks)
        if long * SHORT_MEMORY_SECONDS < SHORT_MIN_TASKS * self.batch_factor(queue):
            return long
        return min(long, dict(self.arrivals_short).get(queue, 0.0) / self.elapsed_short)

    @property
    def service_seconds(self) -> float | None:
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
    def service_known(self) -> bool:
        """The mean service time is measured (reported for, or completed by, MIN_COMPLETIONS
        tasks), not the lower bound `service_seconds` gives before."""
        return (self._reported_mean is not None
                or (self.busy_seconds > 0 and self.completions >= MIN_COMPLETIONS))

    @property
    def reports_service(self) -> bool:
        """The workers report their service totals (so each queue's own is on its way)."""
        return bool(self.reported)

    def service_by_queue(self, queues: list[str]) -> dict[str, float] | None:
        """Service seconds per queue (the mean for each when the fit cannot tell them apart);
        None until the mean is known."""
        mean = self.service_seconds
        if mean is None:
            return None
        estimated = self._estimated_by_queue(queues, mean)
        return {q: self.measured_service(q) or estimated[q] for q in queues}

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


def update(rates: Rates, obs: QueueObservation) -> Rates:
    """`rates` after `obs` (the first observation only records the counters)."""
    counters = replace(
        rates, at=obs.at, backlog=tuple(obs.backlog.items()), taken=tuple(obs.taken.items()),
        in_flight=obs.in_flight, completed=obs.completed_total, failed=obs.failed_total,
        reported=tuple((q, s, n) for q, (s, n) in obs.service.items()),
        reported_sq=tuple((q, s2, n) for q, (s2, n) in obs.service_sq.items()),
        measured=_measured(rates, obs),
        measured_sq=_measured_sq(rates, obs),
        waited=tuple(obs.waited.items()),
        waits=_waits(rates, obs),
    )
    if rates.at is None or obs.at <= rates.at:
        return counters
    dt = obs.at - rates.at
    keep = math.exp(-dt / MEMORY_SECONDS)
    ended = obs.completed_total - rates.completed + max(0, obs.failed_total - rates.failed)
    if obs.completed_total < rates.completed:  # the stats hash was reset: start the sums again
        return replace(counters, elapsed=0.0, arrivals=(), elapsed_short=0.0,
                       arrivals_short=(), busy_seconds=0.0, completions=0.0)
    raw = _arrivals(rates, obs, ended)
    entered = _steady_part(rates, raw, dt)
    busy = dt * (rates.in_flight + obs.in_flight) / 2
    held = math.exp(-ended / SERVICE_MEMORY_TASKS)
    keep_short = math.exp(-dt / SHORT_MEMORY_SECONDS)
    old, old_short = dict(rates.arrivals), dict(rates.arrivals_short)
    return replace(
        counters,
        elapsed=rates.elapsed * keep + dt,
        arrivals=tuple((q, old.get(q, 0.0) * keep + n) for q, n in entered.items()),
        elapsed_short=rates.elapsed_short * keep_short + dt,
        arrivals_short=tuple((q, old_short.get(q, 0.0) * keep_short + n)
                             for q, n in entered.items()),
        busy_seconds=rates.busy_seconds * held + busy,
        interval=dt,
        completions=rates.completions * held + ended,
        spread=_spread(rates, raw, dt),
        **_fit(rates, obs, busy, held),
    )


def _steady_part(rates: Rates, entered: dict[str, float], dt: float) -> dict[str, float]:
    """`entered` without what is beyond a plausible count for the rate measured so far (the
    higher of the two averages x `dt`, + BATCH_SIGMAS standard deviations + BATCH_SLACK; the
    variance is D x the mean, D the measured dispersion, 1 for Poisson): a batch. The wait
    model starts a batch from the backlog (its burst term); counted as a rate, it would also
    hold standing capacity for a minute after it was served. A real rise passes the cap more
    each poll (the cap follows the rate it lets in)."""
    if rates.elapsed <= 0:
        return entered
    long, short = dict(rates.arrivals), dict(rates.arrivals_short)
    out = {}
    for q, n in entered.items():
        rate = max(long.get(q, 0.0) / rates.elapsed,
                   short.get(q, 0.0) / rates.elapsed_short if rates.elapsed_short > 0 else 0.0)
        expected = rate * dt
        variance = rates.batch_factor(q) * expected
        out[q] = min(n, expected + BATCH_SIGMAS * math.sqrt(variance) + BATCH_SLACK)
    return out


def _spread(rates: Rates, entered: dict[str, float], dt: float) -> tuple[ArrivalSpread, ...]:
    """`rates.spread` after an interval of `dt` seconds in which `entered` tasks arrived."""
    keep = math.exp(-dt / SPREAD_MEMORY_SECONDS)
    before = {s.queue: s for s in rates.spread}
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


def _arrivals(rates: Rates, obs: QueueObservation, ended: int) -> dict[str, float]:
    before, taken_before = dict(rates.backlog), dict(rates.taken)
    queues = list(obs.backlog)
    if queues and all(q in obs.taken and q in taken_before for q in queues):
        return {q: max(0.0, float(obs.backlog[q] - before.get(q, 0)
                                  + obs.taken[q] - taken_before[q])) for q in queues}
    total = obs.queued - sum(before.values()) + obs.in_flight - rates.in_flight + ended
    entered = dict.fromkeys(queues, 0.0)
    if queues:
        entered[queues[0]] = max(0.0, float(total))
    return entered


def _fit(rates: Rates, obs: QueueObservation, busy: float, keep: float) -> dict[str, Any]:
    """The per-queue fit's sums after one interval (unchanged without taken counters)."""
    before = dict(rates.taken)
    if len(obs.taken) < 2 or not all(q in before for q in obs.taken):
        return {}
    n = {q: max(0, obs.taken[q] - before[q]) for q in obs.taken}
    a = {(q, r): v for q, r, v in rates.mix}
    b = dict(rates.mix_busy)
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


def _measured(rates: Rates, obs: QueueObservation) -> tuple[tuple[str, float, float], ...]:
    """The decayed reported service sums after `obs` (each queue forgets per attempt, as the
    estimate does; a total that went down, a reset stats hash, starts that queue again). A
    queue's first totals (a new operator, or its first heartbeat) count as the history of their
    last SERVICE_MEMORY_TASKS attempts, so an operator restart knows the service time at once."""
    before = {q: (s, n) for q, s, n in rates.reported}
    return _decayed(before, obs.service, rates.measured)


def _measured_sq(rates: Rates, obs: QueueObservation) -> tuple[tuple[str, float, float], ...]:
    """The same for the sums of squared attempt times (queues whose workers report them)."""
    before = {q: (s2, n) for q, s2, n in rates.reported_sq}
    return _decayed(before, obs.service_sq, rates.measured_sq)


def _decayed(before: dict[str, tuple[float, int]], now: dict[str, tuple[float, int]],
             sums_before: tuple[tuple[str, float, float], ...],
             ) -> tuple[tuple[str, float, float], ...]:
    """Per queue, (total, attempts) sums forgetting per attempt, from cumulative totals."""
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


def _over(sums: tuple[float, ...], target: float) -> float:
    """Tasks over `target` in a histogram (the count, then the tasks over each edge)."""
    low, below = 0.0, sums[0]
    for edge, over in zip(WAIT_EDGES_SECONDS, sums[1:], strict=False):
        if target <= edge:
            return below + (over - below) * (max(target, low) - low) / (edge - low)
        low, below = edge, over
    return below


def wait_quantile_of(counts: Sequence[float], quantile: float) -> float | None:
    """The wait `quantile` of a wait histogram's tasks stayed under (the count, then the tasks
    over each edge of WAIT_EDGES_SECONDS, as workers report it); None for an empty one."""
    if not counts or counts[0] <= 0:
        return None
    return _under(counts, (1 - quantile) * counts[0])


def _under(sums: Sequence[float], late: float) -> float:
    """The wait that `late` tasks of a histogram are over (the inverse of `_over`)."""
    low, above = 0.0, sums[0]
    for edge, over in zip(WAIT_EDGES_SECONDS, sums[1:], strict=False):
        if over <= late:
            return low + (edge - low) * (above - late) / (above - over) if above > over else low
        low, above = edge, over
    return low


def _waits(rates: Rates, obs: QueueObservation) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """The decayed wait histograms after `obs` (per measured task; a count that went down or a
    histogram that is gone, a reset stats hash, starts that queue again; a queue's first
    histogram, e.g. the totals so far when the operator starts, counts as its last
    WAIT_MEMORY_TASKS tasks)."""
    before = dict(rates.waited)
    sums = {q: v for q, v in rates.waits if q in obs.waited}  # a histogram gone: reset hash
    for q, counts in obs.waited.items():
        if not counts or counts[0] <= 0:
            continue
        if q not in before:
            if q not in sums:
                scale = min(float(counts[0]), WAIT_MEMORY_TASKS) / counts[0]
                sums[q] = tuple(c * scale for c in counts)
            continue
        deltas = [c - b for c, b in zip(counts, before[q], strict=False)]
        if len(deltas) != len(counts) or any(d < 0 for d in deltas):
            sums.pop(q, None)
            continue
        keep = math.exp(-deltas[0] / WAIT_MEMORY_TASKS)
        old = sums.get(q, (0.0,) * len(counts))
        sums[q] = tuple(o * keep + d for o, d in zip(old, deltas, strict=True))
    return tuple(sums.items())
