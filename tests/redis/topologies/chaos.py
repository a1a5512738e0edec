"""Chaos under load: a producer pushes N tasks while W workers run them, a master is killed
mid-way, and the outcome is counted against a separate Redis that only records executions:
lost = acknowledged pushes never executed, duplicated = executed more than once.

Used by tests/redis/topologies/test_chaos.py (bounded) and bench/failover/failover.py (the table in
docs/benchmarks.md). Durable mode = spec.redis.waitForReplicas 1 for the workers and
`wait_replicas=1` for the producer.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from taskqueue import client
from taskqueue.api import manifest
from taskqueue.redisio import clients
from taskqueue.worker import config as cfg
from taskqueue.worker import handlers
from taskqueue.worker.runner import Worker

RECORD_ENV = "TASKQUEUE_CHAOS_RECORD_URL"
EXECUTED = "chaos:executed"
QUEUE = "{chaos}:jobs"
BATCH = 10
_record: list[redis.Redis] = []


def record(payload: str) -> None:
    """The workers' handler: note the execution on the recording server."""
    if not _record:
        _record.append(redis.Redis.from_url(os.environ[RECORD_ENV]))
    _record[0].rpush(EXECUTED, payload)


@dataclass(frozen=True)
class Outcome:
    acked: int
    executed: int
    lost: int
    duplicated: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.acked / self.seconds if self.seconds else 0.0


def _workers(url: str, n: int, durable: bool) -> list[Worker]:
    spec = manifest.parse({"kind": "TaskQueue", "spec": {
        "redis": {"url": url, "waitForReplicas": 1 if durable else 0},
        "queues": [{"key": QUEUE}],
        "worker": {"handler": f"{__name__}:record", "heartbeatSeconds": 0.5}}}).spec
    out = []
    for i in range(n):
        config = cfg.from_spec(spec, worker_id=f"chaos-{i}")
        worker = Worker(config, handler=handlers.load(handler=config.handler, command=None,
                                                       timeout=None))
        worker.start()
        out.append(worker)
    return out


def _produce(producer: redis.Redis, tasks: int, durable: bool, acked: list[str],
             stop: threading.Event) -> None:
    for start in range(0, tasks, BATCH):
        batch = [f"c{i}" for i in range(start, min(start + BATCH, tasks))]
        while not stop.is_set():
            try:
                client.enqueue_many_sync(producer, QUEUE, batch,
                                         wait_replicas=1 if durable else 0)
                acked.extend(batch)
                break
            except (redis.RedisError, OSError):
                time.sleep(0.2)  # not acknowledged: retried (may run twice, never counted lost)


def run(url: str, record_url: str, *, tasks: int = 3000, workers: int = 3,
        durable: bool = False, kill: Callable[[], object] | None = None,
        kill_after: int = 1000, settle_seconds: float = 8.0,
        timeout: float = 240.0) -> Outcome:
    """Push `tasks`, kill after `kill_after` acknowledged pushes, count the outcome."""
    os.environ[RECORD_ENV] = record_url
    recorder = redis.Redis.from_url(record_url, decode_responses=True)
    recorder.delete(EXECUTED)
    producer = clients.sync_client(clients.RedisSettings.from_dsn(url),
                                      socket_timeout=5, socket_connect_timeout=2)
    started = time.monotonic()
    running = _workers(url, workers, durable)
    acked: list[str] = []
    stop = threading.Event()
    thread = threading.Thread(target=_produce, args=(producer, tasks, durable, acked, stop),
                              daemon=True)
    thread.start()
    try:
        if kill is not None:
            while len(acked) < kill_after and thread.is_alive():
                time.sleep(0.01)
            kill()
        thread.join(timeout)
        # done when every acknowledged task ran, or nothing new ran for `settle_seconds`
        last, quiet_since = -1, time.monotonic()
        while time.monotonic() - started < timeout:
            done = set(recorder.lrange(EXECUTED, 0, -1))
            if set(acked) <= done:
                break
            n = recorder.llen(EXECUTED)
            if n != last:
                last, quiet_since = n, time.monotonic()
            elif time.monotonic() - quiet_since > settle_seconds:
                break
            time.sleep(0.2)
        seconds = time.monotonic() - started
    finally:
        stop.set()
        for w in running:
            w.stop()
        for w in running:
            w.join(grace=5)
    counts = collections.Counter(recorder.lrange(EXECUTED, 0, -1))
    return Outcome(acked=len(acked), executed=len(counts),
                   lost=len(set(acked) - set(counts)),
                   duplicated=sum(1 for c in counts.values() if c > 1), seconds=seconds)
