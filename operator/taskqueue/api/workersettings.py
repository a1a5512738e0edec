"""The worker's settings, compiled from a validated TaskQueue spec into plain JSON.

The operator validates a TaskQueue with the pydantic models; a worker pod then needs only a
few dozen plain values of it. `declare(spec)` writes them (the `TASKQUEUE_WORKER_SETTINGS` env
of a worker pod, beside the manifest), and `read(text)` gives them back as `Declared` without
pydantic or the models, which are most of a worker's start-up time otherwise. The models stay
the single source of the schema: this is derived from a validated spec, by this one module, and
the worker builds its config through `read` on every path (a manifest given with `-f` is
validated, declared and read back).

`FORMAT` names the layout. A worker that finds another format (an operator of another
version) gets `StaleSettingsError` and validates the manifest instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskqueue.wire.keys import KeySchema, QueueRef

if TYPE_CHECKING:
    from taskqueue.api.models import Delivery, TaskQueueSpec

ENV = "TASKQUEUE_WORKER_SETTINGS"
FORMAT = "taskqueue.dev/worker-settings/v1"


class StaleSettingsError(ValueError):
    """Settings of another format (or not settings at all): validate the manifest instead."""


@dataclass(frozen=True)
class SentinelRef:
    """spec.redis.sentinel as `dsn.dsn_for` reads it."""

    masterName: str  # noqa: N815 (the manifest's field names: dsn.Sentinel)
    addresses: list[str]


@dataclass(frozen=True)
class TLSRef:
    """spec.redis.tls as `dsn.with_tls_dir` reads it."""

    caKey: str  # noqa: N815 (the manifest's field names: dsn.TLS)
    certKey: str | None  # noqa: N815
    keyKey: str | None  # noqa: N815


@dataclass(frozen=True, kw_only=True)
class Declared:
    """What a validated TaskQueue spec declares for its workers (no flag or env applied yet)."""

    redis_url: str | None
    redis_mode: str
    sentinel: SentinelRef | None
    tls: TLSRef | None
    tls_dir: str
    """Where the worker pod mounts the spec.redis.tls Secret."""
    wait_replicas: int
    schema: KeySchema
    handler: str | None
    command: tuple[str, ...] | None
    delivery: Delivery
    concurrency: int
    prefetch: int
    max_attempts: int
    backoff_seconds: float
    max_backoff_seconds: float
    task_timeout: float | None
    heartbeat_seconds: float
    grace_seconds: float
    metrics_port: int | None
    idempotency_window: float | None
    tracking: bool
    tracing: str | None
    """spec.worker.tracing.producerSpan ("parent" | "link"); None: tracing off."""


def declare(spec: TaskQueueSpec, *, tls_dir: str) -> dict[str, Any]:
    """The worker settings of a validated spec, as JSON-ready data (`tls_dir`: where worker
    pods mount the spec.redis.tls Secret). Pure."""
    r, w = spec.redis, spec.worker
    schema = KeySchema.from_spec(spec)
    return {
        "format": FORMAT,
        "redis": {
            "url": r.url, "mode": r.mode, "waitForReplicas": r.waitForReplicas, "tlsDir": tls_dir,
            "sentinel": None if r.sentinel is None else {
                "masterName": r.sentinel.masterName, "addresses": list(r.sentinel.addresses)},
            "tls": None if r.tls is None else {
                "caKey": r.tls.caKey, "certKey": r.tls.certKey, "keyKey": r.tls.keyKey},
        },
        "keys": {
            "prefix": schema.prefix, "deadLetter": schema.dead_letter,
            "deadLetterMaxLength": schema.dead_letter_max_length,
            "queues": [{"key": q.key, "type": q.type, "starvationLimit": q.starvation_limit}
                       for q in schema.queues],
        },
        "worker": {
            "handler": w.handler, "command": w.command, "delivery": spec.delivery,
            "concurrency": w.concurrency, "prefetch": w.prefetch,
            "maxAttempts": spec.retry.maxAttempts, "backoffSeconds": spec.retry.backoffSeconds,
            "maxBackoffSeconds": spec.retry.maxBackoffSeconds,
            "taskTimeoutSeconds": w.taskTimeoutSeconds, "heartbeatSeconds": w.heartbeatSeconds,
            "terminationGracePeriodSeconds": w.terminationGracePeriodSeconds,
            "metricsPort": w.metricsPort,
            "idempotencyWindowSeconds": w.idempotency.windowSeconds if w.idempotency else None,
            "tracking": w.tracking,
            "tracing": w.tracing.producerSpan if w.tracing else None,
        },
    }


def dumps(spec: TaskQueueSpec, *, tls_dir: str) -> str:
    """`declare(spec)` as compact JSON (the value of `ENV`)."""
    return json.dumps(declare(spec, tls_dir=tls_dir), sort_keys=True, separators=(",", ":"))


def read(data: str | dict[str, Any]) -> Declared:
    """`Declared` from `declare`'s output (or its JSON); StaleSettingsError for anything else."""
    try:
        d = json.loads(data) if isinstance(data, str) else data
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise StaleSettingsError(f"not {FORMAT}")
        return _read(d["redis"], d["keys"], d["worker"])
    except (ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, StaleSettingsError):
            raise
        raise StaleSettingsError(f"unreadable {ENV} ({type(exc).__name__}: {exc})") from exc


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _producer_span(value: Any) -> str | None:
    if value is None or value in ("parent", "link"):
        return value  # type: ignore[no-any-return]
    raise StaleSettingsError(f"unknown tracing.producerSpan {value!r}")


def _delivery(value: Any) -> Delivery:
    if value == "AtLeastOnce" or value == "AtMostOnce":
        return value  # type: ignore[no-any-return]
    raise StaleSettingsError(f"unknown delivery {value!r}")


def _read(r: dict[str, Any], k: dict[str, Any], w: dict[str, Any]) -> Declared:
    sentinel, tls = r["sentinel"], r["tls"]
    return Declared(
        redis_url=r["url"], redis_mode=str(r["mode"]), wait_replicas=int(r["waitForReplicas"]),
        sentinel=None if sentinel is None else SentinelRef(
            masterName=str(sentinel["masterName"]), addresses=list(sentinel["addresses"])),
        tls=None if tls is None else TLSRef(
            caKey=str(tls["caKey"]), certKey=tls["certKey"], keyKey=tls["keyKey"]),
        tls_dir=str(r["tlsDir"]),
        schema=KeySchema(
            prefix=str(k["prefix"]), dead_letter=str(k["deadLetter"]),
            dead_letter_max_length=int(k["deadLetterMaxLength"]),
            queues=tuple(QueueRef(key=str(q["key"]), type=q["type"],
                                  starvation_limit=q["starvationLimit"]) for q in k["queues"])),
        handler=w["handler"],
        command=None if w["command"] is None else tuple(w["command"]),
        delivery=_delivery(w["delivery"]), concurrency=int(w["concurrency"]),
        prefetch=int(w["prefetch"]), max_attempts=int(w["maxAttempts"]),
        backoff_seconds=float(w["backoffSeconds"]),
        max_backoff_seconds=float(w["maxBackoffSeconds"]),
        task_timeout=_optional_float(w["taskTimeoutSeconds"]),
        heartbeat_seconds=float(w["heartbeatSeconds"]),
        grace_seconds=float(w["terminationGracePeriodSeconds"]),
        metrics_port=None if w["metricsPort"] is None else int(w["metricsPort"]),
        idempotency_window=_optional_float(w["idempotencyWindowSeconds"]),
        tracking=bool(w.get("tracking", False)),
        tracing=_producer_span(w.get("tracing")),
    )
