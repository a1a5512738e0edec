"""A trace rebuilt from a TaskQueue's own history (`taskqueue.wire.history`), for
`taskqueue simulate --from-history`. Pure: the points in, the arrivals out, seeded.

The history keeps counts and sums per queue per interval, not single tasks, so the trace is a
draw that matches them: a point covering (t - dt, t] with `arrived` n for a queue gives n tasks
at uniform random times in that interval (a Poisson process given its count), and each task a
service time drawn from a gamma distribution with the mean and variance the workers reported in
that interval (`service_ms` / `attempts`, and `service_sq_ms2` for the second moment): a gamma
matches any mean and variance, a constant time (variance 0) included. The times of an interval
are then scaled to sum to its count times the measured mean (`work`), so the work per interval
is the measured one. An interval without
reported attempts takes the nearest interval that has them (a later one first: the tasks that
arrive in a quiet interval end in a later one). Without squares (a worker that does not report
them) the variance is the mean squared, as for exponential times. The tasks queued when the
window starts (the backlog of the point before it) arrive at its start.

So a replay is as faithful as the interval (`spec.history.intervalSeconds`, 10 s by default): a
batch pushed at once is spread over the interval it landed in. The time between points is kept,
a gap in the history (the operator stopped) included: no arrival is invented for it.

`select` cuts the window `--since` asks for and names what is wrong with it (no history, a
window reaching back before the oldest point); `recorded` sums what the real fleet cost.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from taskqueue.simulate.trace import Arrival
from taskqueue.wire.history import HistoryPoint, QueuePoint


class HistoryError(ValueError):
    """A history that cannot be replayed; the message names why and the fix."""


@dataclass(frozen=True)
class Window:
    """The points a replay covers, oldest first, and the point before them (if kept)."""

    points: tuple[HistoryPoint, ...]
    before: HistoryPoint | None = None


@dataclass(frozen=True)
class Moments:
    """One queue's service times over one interval (seconds)."""

    mean: float
    variance: float
    squares: bool = True
    """False: the variance is assumed (mean squared), no square was reported."""


@dataclass(frozen=True)
class Rebuilt:
    """The trace of a window and what went into it."""

    arrivals: list[Arrival]
    start_ms: int
    """The window's start (unix ms): time 0 of the trace."""
    end_ms: int
    tasks: dict[str, int] = field(default_factory=dict)
    """Per queue: the tasks in the trace (the backlog at the start included)."""
    service: dict[str, float] = field(default_factory=dict)
    """Per queue: the mean service seconds the workers reported over the window."""
    unknown_intervals: int = 0
    """Points whose arrivals were unknown (a reset stats hash): their attempts stand in."""
    no_squares: tuple[str, ...] = ()
    """Queues whose variance was assumed (no squares reported)."""

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000


@dataclass(frozen=True)
class Recorded:
    """What the real fleet did over the window, by the history's points."""

    worker_seconds: float
    """Pods at each point's end times its interval, summed."""
    mean_replicas: float
    max_replicas: int
    worst_p95: dict[str, float]
    """Per queue: the highest p95 wait of one interval (seconds), where the workers measured."""


def select(points: Sequence[HistoryPoint], *, before: HistoryPoint | None, now_ms: int,
           since_seconds: float | None, name: str) -> Window:
    """The window of `points` (oldest first, those at or after the window's start) that
    `since_seconds` before `now_ms` asks for (None: all of them); `before` is the newest point
    older than that start (None when none is kept). HistoryError when there is nothing to
    replay, or the window reaches back before the oldest point kept."""
    if not points:
        if before is not None and since_seconds is not None:
            raise HistoryError(
                f"no history point of {name} in the last {_span(since_seconds)} (the newest is "
                f"{_span((now_ms - before.t) / 1000)} old: is the operator polling it?); "
                "give a longer --since")
        raise HistoryError(
            f"no history yet for {name}: the operator writes a point every "
            "spec.history.intervalSeconds while it polls the TaskQueue; wait for a few, or "
            "check that spec.history.retentionSeconds is not 0")
    if since_seconds is not None and before is None:
        oldest = points[0].t - points[0].dt
        slack = 2 * max(p.dt for p in points)  # the window's edge falls inside an interval
        if now_ms - since_seconds * 1000 < oldest - slack:
            raise HistoryError(
                f"--since {_span(since_seconds)} reaches back before the history kept for "
                f"{name}, which starts {_span((now_ms - oldest) / 1000)} ago "
                "(spec.history.retentionSeconds caps it); give --since "
                f"{_span(max(1.0, (now_ms - oldest) / 1000), floor=True)} or less, or leave "
                "it out to replay all of it")
    return Window(tuple(points), before)


def rebuild(window: Window, *, queues: Sequence[str], seed: int = 1) -> Rebuilt:
    """The trace of `window` for the queues `queues` (the manifest's, in priority order):
    arrivals from 0 at the window's start. HistoryError naming a queue whose tasks arrived
    but whose service time no worker reported in the window."""
    rng = random.Random(seed)
    points = window.points
    start = points[0].t - points[0].dt
    moments = {q: _moments(points, q) for q in queues}
    arrivals: list[Arrival] = []
    tasks = dict.fromkeys(queues, 0)
    unknown = 0
    for i, p in enumerate(points):
        lo, hi = (p.t - p.dt - start) / 1000, (p.t - start) / 1000
        unknown += any(p.queues.get(q, QueuePoint()).arrived is None for q in queues)
        for q in queues:
            got = p.queues.get(q, QueuePoint())
            n = got.arrived if got.arrived is not None else got.attempts or 0
            if n <= 0:
                continue
            m = _nearest(moments[q], i, q)
            times = sorted(lo + rng.random() * (hi - lo) for _ in range(n))
            arrivals += [Arrival(at, q, s) for at, s in zip(times, work(rng, m, n), strict=True)]
            tasks[q] += n
    first = window.before.queues if window.before is not None else {}
    for q in queues:
        queued = first.get(q, QueuePoint()).backlog or 0
        if queued > 0:
            m = _nearest(moments[q], 0, q)
            arrivals += [Arrival(0.0, q, draw(rng, m)) for _ in range(queued)]
            tasks[q] += queued
    arrivals.sort(key=lambda a: a.at)
    return Rebuilt(arrivals=arrivals, start_ms=start, end_ms=points[-1].t, tasks=tasks,
                   service=_means(points, queues), unknown_intervals=unknown,
                   no_squares=tuple(q for q in queues
                                    if any(not m.squares for _, m in moments[q])))


def work(rng: random.Random, m: Moments, n: int) -> list[float]:
    """`n` service times drawn with `draw`, scaled so they sum to `n` x `m.mean`: an interval's
    work is what the workers measured, not a second draw around it (independent draws would add
    the spread of a sum of n times to the one the measured sums already have, and a replay of
    steady traffic would come out burstier than the traffic was)."""
    times = [draw(rng, m) for _ in range(n)]
    total = sum(times)
    if total <= 0:
        return times
    scale = n * m.mean / total
    return [t * scale for t in times]


def draw(rng: random.Random, m: Moments) -> float:
    """A service time of mean `m.mean` and variance `m.variance` (gamma; constant when the
    variance is nil)."""
    if m.mean <= 0:
        return 0.0
    if m.variance <= 1e-9 * m.mean * m.mean:
        return m.mean
    shape = m.mean * m.mean / m.variance
    return rng.gammavariate(shape, m.variance / m.mean)


def moments(q: QueuePoint) -> Moments | None:
    """The service-time moments of one queue's interval (None: no attempt reported)."""
    if not q.attempts or q.service_ms is None:
        return None
    mean = q.service_ms / q.attempts / 1000
    if q.service_sq_ms2 is None:
        return Moments(mean, mean * mean, squares=False)
    second = q.service_sq_ms2 / q.attempts / 1e6
    n = q.attempts
    # the spread about the sample's own mean is (n - 1) / n of the times' variance (Bessel)
    return Moments(mean, max(0.0, second - mean * mean) * (n / (n - 1) if n > 1 else 1.0))


def recorded(window: Window, *, queues: Sequence[str]) -> Recorded:
    """The real fleet's cost and worst interval waits over `window`."""
    points = window.points
    seconds = sum(p.replicas * p.dt for p in points) / 1000
    span = (points[-1].t - points[0].t + points[0].dt) / 1000
    worst: dict[str, float] = {}
    for p in points:
        for q in queues:
            wait = p.queues.get(q, QueuePoint()).p95_wait_ms
            if wait is not None:
                worst[q] = max(worst.get(q, 0.0), wait / 1000)
    return Recorded(worker_seconds=seconds, mean_replicas=seconds / span if span > 0 else 0.0,
                    max_replicas=max(p.replicas for p in points), worst_p95=worst)


def _moments(points: Sequence[HistoryPoint], queue: str) -> list[tuple[int, Moments]]:
    """(index, moments) of the points where `queue`'s workers reported attempts."""
    out = []
    for i, p in enumerate(points):
        m = moments(p.queues.get(queue, QueuePoint()))
        if m is not None:
            out.append((i, m))
    return out


def _nearest(known: list[tuple[int, Moments]], i: int, queue: str) -> Moments:
    """The moments of point `i`, else of the nearest point with some (a later one on a tie)."""
    if not known:
        raise HistoryError(
            f"queue {queue!r}: tasks arrived in the window but no worker reported a service "
            "time for it (none completed); give a longer --since, or replay a window in which "
            "its tasks ran")
    at = bisect.bisect_left([k for k, _ in known], i)
    later = known[at] if at < len(known) else None
    earlier = known[at - 1] if at > 0 else None
    if later is None or (earlier is not None and i - earlier[0] < later[0] - i):
        assert earlier is not None
        return earlier[1]
    return later[1]


def _means(points: Sequence[HistoryPoint], queues: Sequence[str]) -> dict[str, float]:
    out = {}
    for q in queues:
        got = [(g.attempts, g.service_ms) for p in points
               if (g := p.queues.get(q, QueuePoint())).attempts and g.service_ms is not None]
        attempts = sum(a or 0 for a, _ in got)
        if attempts:
            out[q] = sum(ms or 0 for _, ms in got) / attempts / 1000
    return out


def _span(seconds: float, *, floor: bool = False) -> str:
    """`seconds` as `90s`, `15m`, `1h16m`, `2d` (the two largest units); with `floor`, the
    largest unit alone, rounded down (a --since that fits)."""
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    if floor:
        unit, size = next((u, n) for u, n in units if seconds >= n or n == 1)
        return f"{math.floor(seconds / size)}{unit}"
    left, parts = round(seconds), list[str]()
    for unit, size in units:
        if left >= size and len(parts) < 2:
            parts.append(f"{left // size}{unit}")
            left %= size
        elif parts:
            break
    return "".join(parts) or "0s"
