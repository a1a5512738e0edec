"""Every Prometheus metric this project exports, worker and operator, named in one place.

Two registries: `WORKER` (labelled by queue) is served by `taskqueue-worker`, `OPERATOR`
(labelled by namespace and TaskQueue) by `taskqueue-operator`; each process serves its own
(plus the process and Python collectors), so neither exports the other's metrics. The Grafana
dashboard in the chart queries these names, and a test checks that it names nothing else.

The worker's metrics are plain numbers each consume slot keeps for itself
(`taskqueue.telemetry.tally`), summed by the `WORKER_TASKS` collector only when /metrics is scraped:
a task costs a few integer additions, not the five locked prometheus_client updates it took before
(a tenth of a no-op task's CPU at concurrency 8), and a worker imports this module only when it
serves metrics.
"""

from __future__ import annotations

import contextlib
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

from taskqueue.telemetry import tally
from taskqueue.telemetry.tally import LAG_BUCKETS, LATENCY_BUCKETS, Buckets, QueueTally

WORKER = CollectorRegistry(auto_describe=True)
OPERATOR = CollectorRegistry(auto_describe=True)
for _registry in (WORKER, OPERATOR):
    for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        _registry.register(_collector)

_TQ = ("namespace", "taskqueue")

# -- worker (registry WORKER): every slot's `tally.SlotTally`, summed when scraped ------------
_W = WORKER
_WORKER_COUNTERS = (
    ("started", "taskqueue_worker_tasks_started", "Tasks handed to the handler."),
    ("succeeded", "taskqueue_worker_tasks_succeeded", "Tasks acked after success."),
    ("failed", "taskqueue_worker_tasks_failed", "Task attempts that failed."),
    ("retried", "taskqueue_worker_tasks_retried", "Failed tasks scheduled for retry."),
    ("dead_lettered", "taskqueue_worker_tasks_dead_lettered",
     "Tasks moved to the dead-letter list."),
    ("duplicate", "taskqueue_worker_tasks_duplicate",
     "Redeliveries of an id already done, acked without running (spec.worker.idempotency)."),
    ("deferred", "taskqueue_worker_tasks_deferred",
     "Deliveries deferred because the same id was running elsewhere."),
    ("cancelled", "taskqueue_worker_tasks_cancelled",
     "Running tasks stopped by a cancel (taskqueue cancel); never retried."),
)
"""QueueTally attribute, metric family name, help."""


class WorkerTasks:
    """The collector of the worker metrics: the sum of every slot's tally in `source`."""

    def __init__(self, source: tally.Tallies) -> None:
        self._source = source

    def describe(self) -> Iterator[Metric]:
        return self._families({}, running=0)

    def collect(self) -> Iterator[Metric]:
        slots = self._source.slots()
        by_queue: dict[str, list[QueueTally]] = {}
        for slot in slots:
            for name, queue_tally in list(slot.queues.items()):
                by_queue.setdefault(name, []).append(queue_tally)
        return self._families(by_queue, running=sum(slot.running for slot in slots))

    @staticmethod
    def _families(by_queue: dict[str, list[QueueTally]], *, running: int) -> Iterator[Metric]:
        queues = sorted(by_queue.items())
        for attr, name, doc in _WORKER_COUNTERS:
            counter = CounterMetricFamily(name, doc, labels=["queue"])
            for queue, tallies in queues:
                counter.add_metric([queue], sum(getattr(t, attr) for t in tallies))
            yield counter
        duration = HistogramMetricFamily("taskqueue_worker_task_duration_seconds",
                                         "Handler run time.", labels=["queue"])
        pickup = HistogramMetricFamily("taskqueue_worker_pickup_latency_seconds",
                                       "Time from enqueue (envelope time) to pickup.",
                                       labels=["queue"])
        for queue, tallies in queues:
            for family, parts in ((duration, [t.duration for t in tallies]),
                                  (pickup, [t.pickup for t in tallies])):
                buckets, total = cumulative(parts)
                family.add_metric([queue], buckets, total)
        yield from (duration, pickup)
        yield GaugeMetricFamily("taskqueue_worker_in_flight", "Tasks this worker holds.",
                                value=running)
        waits, wait_seconds = tally.RATE_LIMIT.read()
        yield CounterMetricFamily("taskqueue_worker_rate_limit_waits",
                                  "Fetches a queue's rateLimit held back (the worker then waited "
                                  "for the limit's next start).", value=waits)
        yield CounterMetricFamily("taskqueue_worker_rate_limit_wait_seconds",
                                  "The waits fetch.lua named for those fetches, summed.",
                                  value=wait_seconds)


def cumulative(parts: list[Buckets]) -> tuple[list[tuple[str, float]], float]:
    """Prometheus's cumulative `le` buckets (and the sum) of several `Buckets` alike."""
    bounds = parts[0].bounds
    counts = [sum(p.counts[i] for p in parts) for i in range(len(bounds) + 1)]
    buckets, seen = [], 0
    for bound, count in zip([*map(floatToGoString, bounds), "+Inf"], counts, strict=True):
        seen += count
        buckets.append((bound, float(seen)))
    return buckets, sum(p.total for p in parts)


WORKER_TASKS = WorkerTasks(tally.WORKER)
_W.register(WORKER_TASKS)

# -- operator (registry OPERATOR) --------------------------------------------------------------
_O = OPERATOR
BACKLOG = Gauge("taskqueue_backlog", "Queued tasks per queue.", [*_TQ, "queue"], registry=_O)
IN_FLIGHT = Gauge("taskqueue_in_flight", "Tasks held in processing lists.", _TQ, registry=_O)
DELAYED = Gauge("taskqueue_delayed", "Delayed tasks: retries waiting and scheduled tasks.", _TQ,
                registry=_O)
DEAD_LETTER = Gauge("taskqueue_dead_letter", "Tasks in the dead-letter list.", _TQ, registry=_O)
DEAD_LETTER_TRIMMED = Gauge(
    "taskqueue_dead_letter_trimmed",
    "Dead-letter records dropped to keep the list at spec.retry.deadLetterMaxLength (the running "
    "total of the stats hash: it only rises, until the hash is deleted).", _TQ, registry=_O)
DESIRED_REPLICAS = Gauge("taskqueue_desired_replicas", "Replicas the policy decided.", _TQ,
                         registry=_O)
REPLICAS = Gauge("taskqueue_replicas", "Replicas of the worker Deployment.", _TQ, registry=_O)
THROUGHPUT_PER_REPLICA = Gauge("taskqueue_throughput_per_replica",
                               "Completed tasks per second per replica.", _TQ, registry=_O)
QUEUE_PAUSED = Gauge("taskqueue_queue_paused",
                     "1 while workers take nothing from the queue (spec or taskqueue pause).",
                     [*_TQ, "queue"], registry=_O)
QUEUE_IN_FLIGHT = Gauge("taskqueue_queue_in_flight",
                        "The queue's tasks held by workers (queues with maxInFlight).",
                        [*_TQ, "queue"], registry=_O)
QUEUE_IN_FLIGHT_LIMIT = Gauge("taskqueue_queue_in_flight_limit", "The queue's maxInFlight.",
                              [*_TQ, "queue"], registry=_O)
QUEUE_RATE_LIMIT = Gauge("taskqueue_queue_rate_limit",
                         "The queue's rateLimit in task starts per second.", [*_TQ, "queue"],
                         registry=_O)
QUEUE_LIMITED = Gauge(
    "taskqueue_queue_limited",
    "Tasks the queue's rate limit, in-flight limit or pause held back from fetches that could "
    "have taken them (the running total of the stats hash: a task waiting through several "
    "fetches counts in each; use increase()).", [*_TQ, "queue"], registry=_O)
OLDEST_TASK_AGE = Gauge("taskqueue_oldest_task_age_seconds", "Age of the oldest queued task.",
                        _TQ, registry=_O)
POLL_DURATION = Histogram("taskqueue_poll_duration_seconds", "One poll: Redis read to decision.",
                          _TQ, buckets=LATENCY_BUCKETS, registry=_O)
POLL_LAG = Histogram("taskqueue_poll_lag_seconds",
                     "How late a poll started after it was due (the previous poll's start plus "
                     "the interval): the operator falling behind its TaskQueues.",
                     buckets=LAG_BUCKETS, registry=_O)
REDIS_ERRORS = Counter("taskqueue_redis_errors", "Polls that could not read Redis.", _TQ,
                       registry=_O)
SCALE_EVENTS = Counter("taskqueue_scale_events", "Replica changes.", [*_TQ, "direction"],
                       registry=_O)
TASKQUEUE_GAUGES = (BACKLOG, IN_FLIGHT, DELAYED, DEAD_LETTER, DEAD_LETTER_TRIMMED,
                    DESIRED_REPLICAS, REPLICAS, THROUGHPUT_PER_REPLICA, QUEUE_PAUSED,
                    QUEUE_IN_FLIGHT, QUEUE_IN_FLIGHT_LIMIT, QUEUE_RATE_LIMIT, QUEUE_LIMITED,
                    OLDEST_TASK_AGE)
"""The gauges labelled by TaskQueue: one replica reports each TaskQueue's, so a Prometheus sum
over replicas does not count a TaskQueue twice."""


_QUEUES_SEEN: dict[tuple[str, str], set[str]] = {}
"""Per TaskQueue, the queues `queue_gauge` set a series for: what `forget_taskqueue` removes
without scanning every series of every gauge."""


def queue_gauge(gauge: Gauge, namespace: str, name: str, queue: str) -> Gauge:
    """The series of one queue of TaskQueue `namespace/name` in a per-queue gauge of
    TASKQUEUE_GAUGES (every such series is set through here, so `forget_taskqueue` finds it)."""
    _QUEUES_SEEN.setdefault((namespace, name), set()).add(queue)
    return gauge.labels(namespace, name, queue)


def forget_taskqueue(namespace: str, name: str) -> None:
    """Drop the gauge series of TaskQueue `namespace/name` (deleted, or another replica of a
    sharded operator reports it now); its counters and histograms stay (they only stop rising).
    Costs the TaskQueue's own series, not a scan of all (a replica fenced for a moment releases
    every TaskQueue it held at once)."""
    queues = _QUEUES_SEEN.pop((namespace, name), set())
    for gauge in TASKQUEUE_GAUGES:
        per_queue = "queue" in gauge._labelnames
        for values in ([(namespace, name, q) for q in queues] if per_queue
                       else [(namespace, name)]):
            with contextlib.suppress(KeyError):
                gauge.remove(*values)


OWNED_TASKQUEUES = Gauge("taskqueue_owned_taskqueues",
                         "TaskQueues this operator replica acts on (its share when sharded).",
                         ["replica"], registry=_O)
KUBE_REQUESTS = Counter("taskqueue_kube_requests",
                        "Requests of the polls, the reaper and Events to the API server, by "
                        "client call (e.g. read_namespaced_deployment); kopf's watches and "
                        "Lease renewals not included.", ["call"], registry=_O)
SHARD_REPLICAS = Gauge("taskqueue_shard_replicas",
                       "Live operator replicas this replica sees (sharded operators only).",
                       ["replica"], registry=_O)


def serve(registry: CollectorRegistry, *, port: int, addr: str = "0.0.0.0") -> None:
    """Serve `registry` on /metrics on `port` from a background thread."""
    start_http_server(port, addr=addr, registry=registry)
