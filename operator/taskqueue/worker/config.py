"""Worker settings: what a TaskQueue spec declares (`taskqueue.api.workersettings`) plus the
environment and command-line overrides.

Imports neither pydantic nor redis-py: a worker pod reads the declared settings the operator
compiled (`from_declared`), and only a manifest given some other way is validated first
(`from_spec`, which goes through the same declared form).
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from taskqueue.api import redact, workersettings
from taskqueue.api.workersettings import Declared
from taskqueue.redisio import dsn
from taskqueue.wire import keys

if TYPE_CHECKING:
    from taskqueue.api.models import Delivery, TaskQueueSpec


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """Everything one worker process needs to run; immutable."""

    redis_url: str
    """Redis URL (spec.redis.url, or --redis-url / TASKQUEUE_REDIS_URL)."""
    schema: keys.KeySchema
    """Key names of the TaskQueue."""
    worker_id: str
    """Name of this worker's processing list and heartbeat entry."""
    handler: str | None = None
    """Python handler 'package.module:function'."""
    command: tuple[str, ...] | None = None
    """Command run per task with the payload on stdin."""
    delivery: Delivery = "AtLeastOnce"
    """AtLeastOnce (processing list, ack) or AtMostOnce (BRPOP)."""
    concurrency: int = 1
    """Tasks at a time."""
    prefetch: int = 1
    """Tasks taken per round trip while backlogged (all held in the processing list)."""
    max_attempts: int = 3
    """Attempts before the dead-letter list."""
    backoff_seconds: float = 1.0
    """First retry delay, doubled per attempt, with jitter."""
    max_backoff_seconds: float = 300.0
    """Cap of one retry delay."""
    task_timeout: float | None = None
    """A task running longer fails."""
    heartbeat_seconds: float = 5.0
    """Heartbeat period; the worker is dead after three missed beats."""
    grace_seconds: float = 30.0
    """Time to finish tasks in hand after SIGTERM."""
    sweep_seconds: float = 1.0
    """Idle re-check period (delayed retries, missed wake-ups)."""
    metrics_port: int | None = None
    """Serve Prometheus metrics on this port."""
    idempotency_window: float | None = None
    """Idempotent consumption: seconds a completed id is remembered (None: off)."""
    tracking: bool = False
    tracing: str | None = None
    """spec.worker.tracing.producerSpan ("parent" | "link"): a CONSUMER span per attempt
    (`worker.tracing`, the otel extra); None: off."""
    """spec.worker.tracking: keep the task index the scripts write (`wire.lifecycle`)."""
    wait_replicas: int = 0
    """Durable mode (spec.redis.waitForReplicas): WAIT for this many replicas after a fetch."""


def default_worker_id() -> str:
    """TASKQUEUE_WORKER_ID, else `<hostname>-<pid>-<random>`."""
    return os.environ.get("TASKQUEUE_WORKER_ID") or (
        f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
    )


def from_spec(spec: TaskQueueSpec, *, redis_url: str | None = None,
              worker_id: str | None = None) -> WorkerConfig:
    """The settings a validated TaskQueue spec declares (`from_declared`)."""
    from taskqueue.api import (
        models,  # pydantic: only when a manifest, not the operator, is the source
    )

    declared = workersettings.read(workersettings.declare(spec, tls_dir=models.REDIS_TLS_DIR))
    return from_declared(declared, redis_url=redis_url, worker_id=worker_id)


def from_declared(d: Declared, *, redis_url: str | None = None,
                  worker_id: str | None = None) -> WorkerConfig:
    """The settings a TaskQueue declares; `redis_url` (else $TASKQUEUE_REDIS_URL) overrides
    spec.redis.url. Raises ValueError naming the setting when the Redis URL is missing or
    malformed."""
    env_url = os.environ.get("TASKQUEUE_REDIS_URL")
    url, field = ((redis_url, "--redis-url") if redis_url else
                  (env_url, "TASKQUEUE_REDIS_URL") if env_url else
                  (d.redis_url, "spec.redis.url"))
    if not url:
        raise ValueError(
            "no Redis URL: spec.redis uses urlSecretRef, so set TASKQUEUE_REDIS_URL or --redis-url"
        )
    problem = redact.check(url, field=field)
    if problem:
        raise ValueError(problem)
    url = dsn.dsn_for(url, d.redis_mode, sentinel=d.sentinel)
    url = dsn.with_sentinel_password(url, os.environ.get("TASKQUEUE_REDIS_SENTINEL_PASSWORD"))
    url = dsn.with_tls_dir(url, d.tls, os.environ.get("TASKQUEUE_REDIS_TLS_DIR", d.tls_dir))
    # the DSN of the topology spec.redis names (mode cluster: only database 0), checked as the
    # worker's connection will parse it
    problem = redact.check(url, field=field) or d.schema.collision() or (
        d.schema.cluster_problem() if dsn.is_cluster_dsn(url) else None)
    if problem:
        raise ValueError(problem)
    return WorkerConfig(
        redis_url=url,
        schema=d.schema,
        worker_id=worker_id or default_worker_id(),
        handler=d.handler,
        command=d.command,
        delivery=d.delivery,
        concurrency=d.concurrency,
        prefetch=d.prefetch,
        max_attempts=d.max_attempts,
        backoff_seconds=d.backoff_seconds,
        max_backoff_seconds=d.max_backoff_seconds,
        task_timeout=d.task_timeout,
        heartbeat_seconds=d.heartbeat_seconds,
        grace_seconds=d.grace_seconds,
        metrics_port=d.metrics_port,
        idempotency_window=d.idempotency_window,
        tracking=d.tracking,
        tracing=d.tracing,
        wait_replicas=d.wait_replicas,
    )
