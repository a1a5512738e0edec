"""Every Prometheus metric this project exports, worker and operator, named in one place.

Worker metrics are labelled by queue; operator metrics by namespace and TaskQueue. The Grafana
dashboard in the chart queries these names, and a test checks that it names nothing else.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

_TQ = ("namespace", "taskqueue")
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900)

# -- worker ------------------------------------------------------------------------------------
TASKS_STARTED = Counter("taskqueue_worker_tasks_started", "Tasks handed to the handler.",
                        ["queue"])
TASKS_SUCCEEDED = Counter("taskqueue_worker_tasks_succeeded", "Tasks acked after success.",
                          ["queue"])
TASKS_FAILED = Counter("taskqueue_worker_tasks_failed", "Task attempts that failed.", ["queue"])
TASKS_RETRIED = Counter("taskqueue_worker_tasks_retried", "Failed tasks scheduled for retry.",
                        ["queue"])
TASKS_DEAD_LETTERED = Counter("taskqueue_worker_tasks_dead_lettered",
                              "Tasks moved to the dead-letter list.", ["queue"])
TASK_DURATION = Histogram("taskqueue_worker_task_duration_seconds", "Handler run time.",
                          ["queue"], buckets=_DURATION_BUCKETS)
PICKUP_LATENCY = Histogram("taskqueue_worker_pickup_latency_seconds",
                           "Time from enqueue (envelope time) to pickup.", ["queue"],
                           buckets=_LATENCY_BUCKETS)
TASKS_DUPLICATE = Counter("taskqueue_worker_tasks_duplicate",
                          "Redeliveries of an id already done, acked without running "
                          "(spec.worker.idempotency).", ["queue"])
TASKS_DEFERRED = Counter("taskqueue_worker_tasks_deferred",
                         "Deliveries deferred because the same id was running elsewhere.",
                         ["queue"])
WORKER_IN_FLIGHT = Gauge("taskqueue_worker_in_flight", "Tasks this worker holds.")

# -- operator ----------------------------------------------------------------------------------
BACKLOG = Gauge("taskqueue_backlog", "Queued tasks per queue.", [*_TQ, "queue"])
IN_FLIGHT = Gauge("taskqueue_in_flight", "Tasks held in processing lists.", _TQ)
DELAYED = Gauge("taskqueue_delayed", "Delayed tasks: retries waiting and scheduled tasks.", _TQ)
DEAD_LETTER = Gauge("taskqueue_dead_letter", "Tasks in the dead-letter list.", _TQ)
DESIRED_REPLICAS = Gauge("taskqueue_desired_replicas", "Replicas the policy decided.", _TQ)
REPLICAS = Gauge("taskqueue_replicas", "Replicas of the worker Deployment.", _TQ)
THROUGHPUT_PER_REPLICA = Gauge("taskqueue_throughput_per_replica",
                               "Completed tasks per second per replica.", _TQ)
OLDEST_TASK_AGE = Gauge("taskqueue_oldest_task_age_seconds", "Age of the oldest queued task.", _TQ)
POLL_DURATION = Histogram("taskqueue_poll_duration_seconds", "One poll: Redis read to decision.",
                          _TQ, buckets=_LATENCY_BUCKETS)
REDIS_ERRORS = Counter("taskqueue_redis_errors", "Polls that could not read Redis.", _TQ)
SCALE_EVENTS = Counter("taskqueue_scale_events", "Replica changes.", [*_TQ, "direction"])


def serve(*, port: int, addr: str = "0.0.0.0") -> None:
    """Serve /metrics on `port` from a background thread."""
    start_http_server(port, addr=addr)
