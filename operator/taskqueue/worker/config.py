"""Worker settings: built from a TaskQueue spec (manifest or env) plus command-line overrides."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from taskqueue import connection, keys, models, redact
from taskqueue.models import Delivery, TaskQueueSpec


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
    wait_replicas: int = 0
    """Durable mode (spec.redis.waitForReplicas): WAIT for this many replicas after a fetch."""


def default_worker_id() -> str:
    """TASKQUEUE_WORKER_ID, else `<hostname>-<pid>-<random>`."""
    return os.environ.get("TASKQUEUE_WORKER_ID") or (
        f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
    )


def redis_url_problem(url: str) -> str | None:
    """What is wrong with a Redis URL (`redact.problem`), else what the DSN parser refuses (it
    shows the URL redacted); None when it is usable. Pure."""
    return redact.problem(url) or _settings_problem(url)


def _settings_problem(url: str) -> str | None:
    try:
        connection.RedisSettings.from_dsn(url)
    except ValueError as exc:  # SettingsError: the message shows the URL redacted
        return str(exc)
    return None


def from_spec(spec: TaskQueueSpec, *, redis_url: str | None = None,
              worker_id: str | None = None) -> WorkerConfig:
    """The settings a TaskQueue spec declares; `redis_url` overrides spec.redis. Raises
    ValueError naming the setting when the Redis URL is missing or malformed."""
    env_url = os.environ.get("TASKQUEUE_REDIS_URL")
    url, field = ((redis_url, "--redis-url") if redis_url else
                  (env_url, "TASKQUEUE_REDIS_URL") if env_url else
                  (spec.redis.url, "spec.redis.url"))
    if not url:
        raise ValueError(
            "no Redis URL: spec.redis uses urlSecretRef, so set TASKQUEUE_REDIS_URL or --redis-url"
        )
    problem = redis_url_problem(url)
    if problem:
        raise ValueError(f"{field}: {problem}")
    url = connection.dsn_for(url, spec.redis.mode, sentinel=spec.redis.sentinel)
    url = connection.with_sentinel_password(
        url, os.environ.get("TASKQUEUE_REDIS_SENTINEL_PASSWORD"))
    url = connection.with_tls_dir(url, spec.redis.tls, os.environ.get(
        "TASKQUEUE_REDIS_TLS_DIR", models.REDIS_TLS_DIR))
    schema = keys.KeySchema.from_spec(spec)
    problem = schema.cluster_problem() if connection.is_cluster_dsn(url) else None
    if problem:
        raise ValueError(problem)
    w = spec.worker
    return WorkerConfig(
        redis_url=url,
        schema=schema,
        worker_id=worker_id or default_worker_id(),
        handler=w.handler,
        command=tuple(w.command) if w.command else None,
        delivery=spec.delivery,
        concurrency=w.concurrency,
        prefetch=w.prefetch,
        max_attempts=spec.retry.maxAttempts,
        backoff_seconds=spec.retry.backoffSeconds,
        max_backoff_seconds=spec.retry.maxBackoffSeconds,
        task_timeout=w.taskTimeoutSeconds,
        heartbeat_seconds=w.heartbeatSeconds,
        grace_seconds=float(w.terminationGracePeriodSeconds),
        metrics_port=w.metricsPort,
        idempotency_window=w.idempotency.windowSeconds if w.idempotency else None,
        wait_replicas=spec.redis.waitForReplicas,
    )
