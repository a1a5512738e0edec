"""Every Prometheus metric this project exports, worker and operator, named in one place.

Two registries: `WORKER` (labelled by queue) is served by `taskqueue-worker`, `OPERATOR`
(labelled by namespace and TaskQueue) by `taskqueue-operator`; each process serves its own
(plus the process and Python collectors), so neither exports the other's metrics. The Grafana
dashboard in the chart queries these names, and a test checks that it names nothing else.

The worker's per-task figures (tasks started and succeeded, handler time, pickup latency, tasks
running) are plain numbers each consume slot keeps for itself (`SlotTally`), summed by the
`WORKER_TASKS` collector only when /metrics is scraped: a task costs a few integer additions, not
the five locked prometheus_client updates it took before (a tenth of a no-op task's CPU at
concurrency 8).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

WORKER = CollectorRegistry(auto_describe=True)
OPERATOR = CollectorRegistry(auto_describe=True)
for _registry in (WORKER, OPERATOR):
    for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        _registry.register(_collector)

_TQ = ("namespace", "taskqueue")
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900)

# -- worker (registry WORKER) ------------------------------------------------------------------
_W = WORKER
TASKS_FAILED = Counter("taskqueue_worker_tasks_failed", "Task attempts that failed.", ["queue"],
                       registry=_W)
TASKS_RETRIED = Counter("taskqueue_worker_tasks_retried", "Failed tasks scheduled for retry.",
                        ["queue"], registry=_W)
TASKS_DEAD_LETTERED = Counter("taskqueue_worker_tasks_dead_lettered",
                              "Tasks moved to the dead-letter list.", ["queue"], registry=_W)
TASKS_DUPLICATE = Counter("taskqueue_worker_tasks_duplicate",
                          "Redeliveries of an id already done, acked without running "
                          "(spec.worker.idempotency).", ["queue"], registry=_W)
TASKS_DEFERRED = Counter("taskqueue_worker_tasks_deferred",
                         "Deliveries deferred because the same id was running elsewhere.",
                         ["queue"], registry=_W)


class Buckets:
    """One histogram in plain numbers: the count per bucket (not cumulative; the last one is
    +Inf) and the sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bound >= value: le
        self.total += value


class QueueTally:
    """One queue's task figures in one slot."""

    __slots__ = ("duration", "pickup", "started", "succeeded")

    def __init__(self) -> None:
        self.started = 0
        self.succeeded = 0
        self.duration = Buckets(_DURATION_BUCKETS)
        self.pickup = Buckets(_LATENCY_BUCKETS)


class SlotTally:
    """The task figures of one consume slot. Only the slot writes them (its thread, or its
    coroutine), one task at a time, so no lock is taken; a scrape reads them as they are."""

    __slots__ = ("queues", "running")

    def __init__(self) -> None:
        self.queues: dict[str, QueueTally] = {}
        self.running = 0

    def queue(self, name: str) -> QueueTally:
        tally = self.queues.get(name)
        if tally is None:
            tally = self.queues[name] = QueueTally()
        return tally


class WorkerTasks:
    """The collector of the per-task worker metrics: the sum of every slot's `SlotTally`."""

    def __init__(self) -> None:
        self._slots: list[SlotTally] = []
        self._lock = threading.Lock()

    def slot(self) -> SlotTally:
        """A new slot's tally, counted from now on for the life of the process."""
        tally = SlotTally()
        with self._lock:
            self._slots.append(tally)
        return tally

    def describe(self) -> Iterator[Metric]:
        return self._families({}, running=0)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            slots = list(self._slots)
        by_queue: dict[str, list[QueueTally]] = {}
        for slot in slots:
            for name, tally in list(slot.queues.items()):
                by_queue.setdefault(name, []).append(tally)
        return self._families(by_queue, running=sum(slot.running for slot in slots))

    @staticmethod
    def _families(by_queue: dict[str, list[QueueTally]], *, running: int) -> Iterator[Metric]:
        started = CounterMetricFamily("taskqueue_worker_tasks_started",
                                      "Tasks handed to the handler.", labels=["queue"])
        succeeded = CounterMetricFamily("taskqueue_worker_tasks_succeeded",
                                        "Tasks acked after success.", labels=["queue"])
        duration = HistogramMetricFamily("taskqueue_worker_task_duration_seconds",
                                         "Handler run time.", labels=["queue"])
        pickup = HistogramMetricFamily("taskqueue_worker_pickup_latency_seconds",
                                       "Time from enqueue (envelope time) to pickup.",
                                       labels=["queue"])
        for name, tallies in sorted(by_queue.items()):
            started.add_metric([name], sum(t.started for t in tallies))
            succeeded.add_metric([name], sum(t.succeeded for t in tallies))
            for family, parts in ((duration, [t.duration for t in tallies]),
                                  (pickup, [t.pickup for t in tallies])):
                buckets, total = cumulative(parts)
                family.add_metric([name], buckets, total)
        yield from (started, succeeded, duration, pickup)
        yield GaugeMetricFamily("taskqueue_worker_in_flight", "Tasks this worker holds.",
                                value=running)


def cumulative(parts: list[Buckets]) -> tuple[list[tuple[str, float]], float]:
    """Prometheus's cumulative `le` buckets (and the sum) of several `Buckets` alike."""
    bounds = parts[0].bounds
    counts = [sum(p.counts[i] for p in parts) for i in range(len(bounds) + 1)]
    buckets, seen = [], 0
    for bound, count in zip([*map(floatToGoString, bounds), "+Inf"], counts, strict=True):
        seen += count
        buckets.append((bound, float(seen)))
    return buckets, sum(p.total for p in parts)


WORKER_TASKS = WorkerTasks()
_W.register(WORKER_TASKS)

# -- operator (registry OPERATOR) --------------------------------------------------------------
_O = OPERATOR
BACKLOG = Gauge("taskqueue_backlog", "Queued tasks per queue.", [*_TQ, "queue"], registry=_O)
IN_FLIGHT = Gauge("taskqueue_in_flight", "Tasks held in processing lists.", _TQ, registry=_O)
DELAYED = Gauge("taskqueue_delayed", "Delayed tasks: retries waiting and scheduled tasks.", _TQ,
                registry=_O)
DEAD_LETTER = Gauge("taskqueue_dead_letter", "Tasks in the dead-letter list.", _TQ, registry=_O)
DESIRED_REPLICAS = Gauge("taskqueue_desired_replicas", "Replicas the policy decided.", _TQ,
                         registry=_O)
REPLICAS = Gauge("taskqueue_replicas", "Replicas of the worker Deployment.", _TQ, registry=_O)
THROUGHPUT_PER_REPLICA = Gauge("taskqueue_throughput_per_replica",
                               "Completed tasks per second per replica.", _TQ, registry=_O)
OLDEST_TASK_AGE = Gauge("taskqueue_oldest_task_age_seconds", "Age of the oldest queued task.",
                        _TQ, registry=_O)
POLL_DURATION = Histogram("taskqueue_poll_duration_seconds", "One poll: Redis read to decision.",
                          _TQ, buckets=_LATENCY_BUCKETS, registry=_O)
REDIS_ERRORS = Counter("taskqueue_redis_errors", "Polls that could not read Redis.", _TQ,
                       registry=_O)
SCALE_EVENTS = Counter("taskqueue_scale_events", "Replica changes.", [*_TQ, "direction"],
                       registry=_O)


def serve(registry: CollectorRegistry, *, port: int, addr: str = "0.0.0.0") -> None:
    """Serve `registry` on /metrics on `port` from a background thread."""
    start_http_server(port, addr=addr, registry=registry)
