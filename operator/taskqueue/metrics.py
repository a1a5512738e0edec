"""Every Prometheus metric this project exports, worker and operator, named in one place.

Two registries: `WORKER` (labelled by queue) is served by `taskqueue-worker`, `OPERATOR`
(labelled by namespace and TaskQueue) by `taskqueue-operator`; each process serves its own
(plus the process and Python collectors), so neither exports the other's metrics. The Grafana
dashboard in the chart queries these names, and a test checks that it names nothing else.
"""

from __future__ import annotations

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
TASKS_STARTED = Counter("taskqueue_worker_tasks_started", "Tasks handed to the handler.",
                        ["queue"], registry=_W)
TASKS_SUCCEEDED = Counter("taskqueue_worker_tasks_succeeded", "Tasks acked after success.",
                          ["queue"], registry=_W)
TASKS_FAILED = Counter("taskqueue_worker_tasks_failed", "Task attempts that failed.", ["queue"],
                       registry=_W)
TASKS_RETRIED = Counter("taskqueue_worker_tasks_retried", "Failed tasks scheduled for retry.",
                        ["queue"], registry=_W)
TASKS_DEAD_LETTERED = Counter("taskqueue_worker_tasks_dead_lettered",
                              "Tasks moved to the dead-letter list.", ["queue"], registry=_W)
TASK_DURATION = Histogram("taskqueue_worker_task_duration_seconds", "Handler run time.",
                          ["queue"], buckets=_DURATION_BUCKETS, registry=_W)
PICKUP_LATENCY = Histogram("taskqueue_worker_pickup_latency_seconds",
                           "Time from enqueue (envelope time) to pickup.", ["queue"],
                           buckets=_LATENCY_BUCKETS, registry=_W)
WORKER_IN_FLIGHT = Gauge("taskqueue_worker_in_flight", "Tasks this worker holds.", registry=_W)

# -- operator (registry OPERATOR) --------------------------------------------------------------
_O = OPERATOR
BACKLOG = Gauge("taskqueue_backlog", "Queued tasks per queue.", [*_TQ, "queue"], registry=_O)
IN_FLIGHT = Gauge("taskqueue_in_flight", "Tasks held in processing lists.", _TQ, registry=_O)
DELAYED = Gauge("taskqueue_delayed", "Tasks waiting for a retry.", _TQ, registry=_O)
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
