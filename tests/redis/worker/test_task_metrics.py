"""The worker's per-task metrics: what each slot tallies is what /metrics shows, summed over the
slots, whatever the concurrency and handler kind (`taskqueue.telemetry.metrics.WORKER_TASKS`).

Counters are process-wide, so each test uses a queue of its own and reads only its label.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
import redis
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from taskqueue import client
from taskqueue.telemetry import metrics, tally
from taskqueue.wire import flow
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, wait_done


def samples(queue: str | None) -> dict[str, float]:
    """The worker registry's samples with label queue=`queue` (None: the unlabelled ones), by
    name plus `le` for buckets."""
    text = generate_latest(metrics.WORKER).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("queue") != queue or not s.name.startswith("taskqueue_worker_"):
                continue
            le = s.labels.get("le")
            out[s.name + (f"{{le={le}}}" if le else "")] = s.value
    return out


def samples_once(queue: str, name: str, value: float) -> dict[str, float]:
    """`samples(queue)` once the sample `name` has reached `value`."""
    def reached() -> dict[str, float] | None:
        got = samples(queue)
        return got if got.get(name) == value else None

    return wait_for(f"{name} = {value}", reached)


def fresh_queue() -> str:
    """A queue key no other test has counted (the counters are process-wide)."""
    return f"metrics-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("concurrency", [pytest.param(1, id="one-slot"),
                                         pytest.param(4, id="four-slots")])
@pytest.mark.parametrize("handler", [
    pytest.param("tests.helpers.handlers:fail_first", id="thread-slots"),
    pytest.param("tests.helpers.handlers:fail_first_async", id="coroutine-slots"),
])
def test_counts_and_histograms_add_up_over_slots(
        make_worker: MakeWorker, redis_sync: redis.Redis, handler: str,
        concurrency: int) -> None:
    queue = fresh_queue()
    for _ in range(30):
        client.enqueue_sync(redis_sync, queue, "1")  # succeeds at once
    for _ in range(5):
        client.enqueue_sync(redis_sync, queue, "2")  # fails once, then succeeds
    redis_sync.lpush(queue, "1")  # a raw payload: no envelope, so no pickup time
    make_worker(handler=handler, queues=[{"key": queue}], worker={"concurrency": concurrency},
                retry={"backoffSeconds": 0.01})
    wait_done(redis_sync, 36)
    m = samples_once(queue, "taskqueue_worker_task_duration_seconds_count", 41)

    assert m["taskqueue_worker_tasks_started_total"] == 41  # 36 first attempts + 5 retries
    assert m["taskqueue_worker_tasks_succeeded_total"] == 36
    assert m["taskqueue_worker_tasks_failed_total"] == 5
    assert m["taskqueue_worker_tasks_retried_total"] == 5
    assert m["taskqueue_worker_tasks_dead_lettered_total"] == 0
    assert m["taskqueue_worker_pickup_latency_seconds_count"] == 35  # enveloped, first attempt
    assert m["taskqueue_worker_task_duration_seconds_bucket{le=+Inf}"] == 41
    assert 0 < m["taskqueue_worker_task_duration_seconds_sum"] < 41
    buckets = [v for k, v in m.items() if k.startswith("taskqueue_worker_task_duration_seconds_b")]
    assert buckets == sorted(buckets)  # cumulative
    assert samples(None)["taskqueue_worker_in_flight"] == 0


def test_a_task_out_of_attempts_counts_as_failed_and_dead_lettered(
        make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    queue = fresh_queue()
    client.enqueue_sync(redis_sync, queue, "x")
    make_worker(handler="tests.helpers.handlers:explode", queues=[{"key": queue}],
                retry={"maxAttempts": 2, "backoffSeconds": 0.01, "deadLetterKey": "dlq"})
    wait_for("the task dead-lettered", lambda: redis_sync.llen("dlq") == 1)
    m = samples_once(queue, "taskqueue_worker_tasks_dead_lettered_total", 1)
    assert (m["taskqueue_worker_tasks_started_total"], m["taskqueue_worker_tasks_failed_total"],
            m["taskqueue_worker_tasks_retried_total"],
            m["taskqueue_worker_tasks_succeeded_total"]) == (2, 2, 1, 0)


def test_in_flight_counts_the_tasks_running_now(make_worker: MakeWorker,
                                                redis_sync: redis.Redis) -> None:
    queue = fresh_queue()
    for i in range(3):
        redis_sync.lpush(queue, f"t{i}:1.5")
    make_worker(handler="tests.helpers.handlers:sleep_then_record", queues=[{"key": queue}],
                worker={"concurrency": 3})
    samples_once(queue, "taskqueue_worker_tasks_started_total", 3)
    assert samples(None)["taskqueue_worker_in_flight"] == 3
    wait_done(redis_sync, 3)
    wait_for("none running", lambda: samples(None)["taskqueue_worker_in_flight"] == 0)


@pytest.mark.parametrize(("value", "le"), [
    pytest.param(0.0004, "0.0005", id="below-the-first-bound"),
    pytest.param(0.0005, "0.0005", id="on-a-bound-is-in-it"),
    pytest.param(0.00051, "0.001", id="just-above-a-bound"),
    pytest.param(7.0, "+Inf", id="above-the-last-bound"),
])
def test_a_value_lands_in_the_first_bucket_whose_bound_it_does_not_exceed(
        value: float, le: str) -> None:
    counts = tally.Buckets((0.0005, 0.001, 5.0))
    counts.observe(value)
    buckets, total = metrics.cumulative([counts])
    assert dict(buckets)[le] == 1
    assert sum(1 for _, count in buckets if count == 0) == [b for b, _ in buckets].index(le)
    assert total == value


def test_a_worker_that_serves_no_metrics_does_not_import_prometheus_client() -> None:
    code = ("import sys, taskqueue.worker.command, taskqueue.worker.runner; "
            "print('prometheus_client' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_rate_limit_waits_are_counted(make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    """A queue limited to 5 tasks/s (burst 1): the worker's fetches are held back and it waits,
    so /metrics counts the waits and their seconds (each at most one period, 0.2 s). Without a
    limit nothing is counted."""
    def read() -> tuple[float, float]:
        m = samples(None)
        return (m["taskqueue_worker_rate_limit_waits_total"],
                m["taskqueue_worker_rate_limit_wait_seconds_total"])

    free = fresh_queue()
    for _ in range(6):
        client.enqueue_sync(redis_sync, free, "1")
    before = read()
    make_worker(queues=[{"key": free}], worker={"concurrency": 4}, worker_id="free")
    wait_done(redis_sync, 6)
    assert read() == before

    queue = fresh_queue()
    worker = make_worker(queues=[{"key": queue}], worker={"concurrency": 4}, start=False)
    redis_sync.hset(worker.config.schema.flow, flow.RATE + queue, flow.rate_text(5, 1.0, 1))
    for _ in range(6):
        client.enqueue_sync(redis_sync, queue, "1")
    worker.start()
    wait_done(redis_sync, 12)
    waits, seconds = read()
    assert waits - before[0] >= 1
    assert 0 < seconds - before[1] <= 0.201 * (waits - before[0])
