"""The trace `taskqueue simulate --from-history` rebuilds from history points
(`taskqueue.simulate.replay`, pure): arrivals per queue per interval, service times with the
interval's mean and variance, the nearest interval's times where none ended, the backlog at the
window's start, the window `--since` asks for and what is wrong with it."""

from __future__ import annotations

import statistics

import pytest

from taskqueue.simulate import replay
from taskqueue.wire.history import HistoryPoint, QueuePoint

T0 = 1_800_000_000_000
"""A unix ms origin."""


def qp(arrived: int | None = 0, attempts: int = 0, mean: float = 0.0, var: float | None = 0.0,
       *, backlog: int = 0, p95: float | None = None) -> QueuePoint:
    """A queue's point: `attempts` ended of mean `mean` s and variance `var` s^2 (None: no
    squares reported)."""
    service = round(attempts * mean * 1000)
    squares = None if var is None else round(attempts * (var + mean * mean) * 1e6)
    return QueuePoint(backlog=backlog, arrived=arrived, attempts=attempts,
                      service_ms=service if attempts else 0,
                      service_sq_ms2=squares if attempts else (None if var is None else 0),
                      p95_wait_ms=None if p95 is None else round(p95 * 1000))


def point(i: int, *, dt: int = 10_000, replicas: int = 1, **queues: QueuePoint) -> HistoryPoint:
    """The point closing interval i (of `dt` ms) after T0."""
    return HistoryPoint(t=T0 + (i + 1) * dt, dt=dt, desired=replicas, replicas=replicas,
                        ready=replicas, inflight=0, workers=replicas, queues=dict(queues))


def window(*points: HistoryPoint, before: HistoryPoint | None = None) -> replay.Window:
    return replay.Window(tuple(points), before)


def per_queue(rebuilt: replay.Rebuilt, queue: str) -> list[float]:
    return [a.service for a in rebuilt.arrivals if a.queue == queue]


@pytest.mark.parametrize(("points", "expected"), [
    pytest.param([point(0, a=qp(3, 3, 1.0)), point(1, a=qp(5, 5, 1.0))],
                 {"a": [(0, 10, 3), (10, 20, 5)]}, id="one-queue"),
    pytest.param([point(0, a=qp(2, 2, 1.0), b=qp(4, 1, 2.0)), point(1, a=qp(0), b=qp(1))],
                 {"a": [(0, 10, 2)], "b": [(0, 10, 4), (10, 20, 1)]}, id="two-queues"),
    pytest.param([point(0, a=qp(2, 2, 1.0)), point(5, a=qp(3, 3, 1.0))],
                 {"a": [(0, 10, 2), (50, 60, 3)]}, id="a-gap-is-kept"),
    pytest.param([point(0, dt=3_000, a=qp(4, 4, 1.0)), point(1, dt=3_000, a=qp(1, 1, 1.0))],
                 {"a": [(0, 3, 4), (3, 6, 1)]}, id="short-intervals"),
])
def test_arrivals_are_the_counts_in_their_intervals(
        points: list[HistoryPoint], expected: dict[str, list[tuple[float, float, int]]]) -> None:
    got = replay.rebuild(window(*points), queues=["a", "b"])
    for queue, spans in expected.items():
        times = [a.at for a in got.arrivals if a.queue == queue]
        assert len(times) == sum(n for _, _, n in spans) == got.tasks[queue]
        for lo, hi, n in spans:
            assert sum(lo <= t <= hi for t in times) == n
    assert [a.at for a in got.arrivals] == sorted(a.at for a in got.arrivals)
    assert got.start_ms == points[0].t - points[0].dt and got.end_ms == points[-1].t


@pytest.mark.parametrize(("mean", "var"), [
    pytest.param(2.0, 0.0, id="constant"),
    pytest.param(2.0, 4.0, id="exponential-like"),
    pytest.param(0.5, 2.25, id="heavy-cv3"),
    pytest.param(3.0, 0.36, id="narrow"),
])
def test_service_times_have_the_reported_mean_and_variance(mean: float, var: float) -> None:
    got = replay.rebuild(window(*(point(i, a=qp(500, 500, mean, var)) for i in range(40))),
                         queues=["a"])
    times = per_queue(got, "a")
    n = len(times)
    assert n == 20_000
    # within 4 standard errors of a gamma sample's mean and variance (shape k: the variance's
    # error grows with the excess kurtosis 6/k)
    shape = mean * mean / var if var else float("inf")
    assert statistics.fmean(times) == pytest.approx(mean, abs=4 * (var / n) ** 0.5 + 1e-9)
    assert statistics.pvariance(times) == pytest.approx(
        var, abs=4 * var * ((2 + 6 / shape) / n) ** 0.5 + 1e-9)
    assert got.service == {"a": pytest.approx(mean)}


@pytest.mark.parametrize(("reported", "expected"), [
    # (interval index, mean) of the intervals whose tasks ended; -> the mean of each interval
    pytest.param([(0, 1.0), (3, 4.0)], [1.0, 1.0, 4.0, 4.0, 4.0], id="nearest-later-on-a-tie"),
    pytest.param([(4, 5.0)], [5.0] * 5, id="only-a-later-one"),
    pytest.param([(0, 2.0)], [2.0] * 5, id="only-an-earlier-one"),
    pytest.param([(1, 1.0), (2, 3.0)], [1.0, 1.0, 3.0, 3.0, 3.0], id="own-interval-first"),
])
def test_an_interval_without_reported_times_takes_the_nearest(
        reported: list[tuple[int, float]], expected: list[float]) -> None:
    means = dict(reported)
    points = [point(i, a=qp(1, 1, means[i]) if i in means else qp(1)) for i in range(5)]
    got = replay.rebuild(window(*points), queues=["a"])
    assert [a.service for a in got.arrivals] == pytest.approx(expected)


def test_without_squares_the_spread_is_exponential_and_said() -> None:
    got = replay.rebuild(window(*(point(i, a=qp(1000, 1000, 2.0, None)) for i in range(10))),
                         queues=["a"])
    times = per_queue(got, "a")
    assert statistics.pvariance(times) == pytest.approx(4.0, rel=0.1)
    assert got.no_squares == ("a",)


def test_unknown_arrivals_take_the_attempts_and_are_counted() -> None:
    got = replay.rebuild(window(point(0, a=qp(None, 4, 1.0)), point(1, a=qp(2, 2, 1.0))),
                         queues=["a"])
    assert got.tasks == {"a": 6} and got.unknown_intervals == 1


def test_the_backlog_before_the_window_arrives_at_its_start() -> None:
    before = point(-1, a=qp(0, backlog=7), b=qp(0, backlog=2))
    got = replay.rebuild(window(point(0, a=qp(1, 1, 1.0), b=qp(0, 1, 3.0)), before=before),
                         queues=["a", "b"])
    assert got.tasks == {"a": 8, "b": 2}
    assert sum(a.at == 0.0 for a in got.arrivals) == 9
    assert per_queue(got, "b") == [3.0, 3.0]


def test_a_queue_whose_tasks_never_ended_is_named() -> None:
    with pytest.raises(replay.HistoryError, match=r"queue 'b': tasks arrived in the window but "
                       r"no worker reported a service time .* give a longer --since"):
        replay.rebuild(window(point(0, a=qp(1, 1, 1.0), b=qp(3))), queues=["a", "b"])


def test_a_queue_without_arrivals_needs_no_service_time_and_the_draw_is_seeded() -> None:
    points = [point(i, a=qp(20, 20, 1.0, 1.0), b=qp(0)) for i in range(3)]
    one = replay.rebuild(window(*points), queues=["a", "b"], seed=3)
    assert one == replay.rebuild(window(*points), queues=["a", "b"], seed=3)
    assert one != replay.rebuild(window(*points), queues=["a", "b"], seed=4)
    assert one.tasks == {"a": 60, "b": 0}


def test_recorded_is_pods_times_intervals_and_the_worst_interval_wait() -> None:
    got = replay.recorded(window(point(0, replicas=2, a=qp(p95=1.5)),
                                 point(1, replicas=4, a=qp(p95=0.5)),
                                 point(2, replicas=0, a=qp())), queues=["a", "b"])
    assert (got.worker_seconds, got.mean_replicas, got.max_replicas) == (60.0, 2.0, 4)
    assert got.worst_p95 == {"a": 1.5}


NOW = T0 + 3_600_000
HOUR = [point(i, dt=60_000) for i in range(60)]
"""An hour of points ending at NOW."""


@pytest.mark.parametrize(("points", "before", "since", "message"), [
    pytest.param([], None, None, r"no history yet for ns/tq: the operator writes a point every "
                 r"spec.history.intervalSeconds .* spec.history.retentionSeconds is not 0",
                 id="no-history"),
    pytest.param([], None, 600.0, r"no history yet for ns/tq", id="no-history-since"),
    pytest.param([], point(-100), 600.0, r"no history point of ns/tq in the last 10m \(the "
                 r"newest is 1h16m old: is the operator polling it\?\); give a longer --since",
                 id="none-in-the-window"),
    pytest.param(HOUR, None, 2 * 86400.0, r"--since 2d reaches back before the history kept "
                 r"for ns/tq, which starts 1h ago .* give --since 1h or less, or leave it out",
                 id="since-beyond-the-history"),
    pytest.param(HOUR[30:], None, 3600.0, r"--since 1h reaches back .* starts 30m ago .* "
                 r"give --since 30m or less", id="since-beyond-a-young-history"),
])
def test_a_window_that_cannot_be_replayed_says_why(
        points: list[HistoryPoint], before: HistoryPoint | None, since: float | None,
        message: str) -> None:
    with pytest.raises(replay.HistoryError, match=message):
        replay.select(points, before=before, now_ms=NOW, since_seconds=since, name="ns/tq")


@pytest.mark.parametrize(("points", "before", "since"), [
    pytest.param(HOUR, None, None, id="all"),
    pytest.param(HOUR, None, 3600.0, id="exactly-the-history"),
    pytest.param(HOUR[50:], HOUR[49], 600.0, id="a-point-before-the-window"),
])
def test_a_window_within_the_history_is_replayed(
        points: list[HistoryPoint], before: HistoryPoint | None, since: float | None) -> None:
    got = replay.select(points, before=before, now_ms=NOW, since_seconds=since, name="ns/tq")
    assert got.points == tuple(points) and got.before is before


def test_an_intervals_work_is_the_measured_one() -> None:
    # 7 tasks arrived, the workers measured a mean of 1.5 s: the 7 times sum to 10.5 s, spread
    got = replay.rebuild(window(point(0, a=qp(7, 4, 1.5, 2.0)), point(1, a=qp(3, 3, 0.5, 0.1))),
                         queues=["a"])
    first = [x.service for x in got.arrivals if x.at <= 10]
    second = [x.service for x in got.arrivals if x.at > 10]
    assert (sum(first), sum(second)) == (pytest.approx(10.5), pytest.approx(1.5))
    assert len(set(first)) == 7
