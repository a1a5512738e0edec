"""The TaskQueue API (`taskqueue.dev/v1alpha1`): pydantic models, the single source of the schema.

The worker reads `TaskQueueSpec` from a manifest, the operator reads it from the cluster, and the
CRD in `crds/` is generated from these models (`taskqueue.crdgen`). Field names are the manifest's
camelCase names, so a manifest round-trips without aliases. Pure data: no I/O, no kopf, no redis.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from taskqueue.hashtag import cluster_key_problem

GROUP = "taskqueue.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TaskQueue"
PLURAL = "taskqueues"
SINGULAR = "taskqueue"
SHORT_NAMES = ("tq",)

#: A Redis key usable as a queue: printable, no whitespace (the processing-entry header uses "\n").
KEY_PATTERN = r"^[^\s]{1,512}$"
_KEY_RE = re.compile(KEY_PATTERN)

Delivery = Literal["AtLeastOnce", "AtMostOnce"]
QueueType = Literal["list", "zset"]
RedisMode = Literal["standalone", "cluster"]

_ADDRESS_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:\d{1,5})?$")
_URL_SCHEMES = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://",
                "redis+sentinel://", "rediss+sentinel://")

KubeObject = dict[str, Any]
"""A Kubernetes sub-object passed through verbatim (env var, resources, toleration...)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SecretKeyRef(_Model):
    """A key in a Secret of the TaskQueue's namespace."""

    name: str = Field(min_length=1, description="Name of the Secret.")
    key: str = Field(min_length=1, description="Key inside the Secret whose value is the URL.")


class SentinelSpec(_Model):
    """Redis behind Sentinel: the sentinels name the master and follow its failovers."""

    masterName: str = Field(
        min_length=1, max_length=256, pattern=r"^[^\s/]+$",
        description="Name the sentinels monitor the master under (sentinel monitor <name> ...).",
    )
    addresses: list[str] = Field(
        min_length=1, max_length=16,
        description="Sentinel addresses as host:port (port default 26379).",
    )
    passwordSecretRef: SecretKeyRef | None = Field(
        default=None,
        description="Secret key holding the sentinels' own password (requirepass of the "
        "sentinels); the master's credentials stay in the URL.",
    )

    @field_validator("addresses")
    @classmethod
    def _host_ports(cls, addresses: list[str]) -> list[str]:
        for a in addresses:
            if not _ADDRESS_RE.match(a):
                raise ValueError(
                    f"sentinel address {a!r} is not host:port; e.g. sentinel-0.sentinel:26379")
        return addresses


REDIS_TLS_DIR = "/etc/taskqueue/redis-tls"
"""Where worker pods mount spec.redis.tls.secretName (TASKQUEUE_REDIS_TLS_DIR overrides)."""


class RedisTLSSpec(_Model):
    """TLS material in a Secret of the TaskQueue's namespace, mounted into the workers (the
    server is always verified against the CA; there is no switch to turn that off)."""

    secretName: str = Field(min_length=1, description="Secret holding the CA (and client cert).")
    caKey: str = Field(default="ca.crt", min_length=1, description="Key of the CA certificate.")
    certKey: str | None = Field(
        default=None, description="Key of a client certificate (mutual TLS), with keyKey.")
    keyKey: str | None = Field(default=None, description="Key of the client certificate's key.")

    @model_validator(mode="after")
    def _pair(self) -> RedisTLSSpec:
        if (self.certKey is None) != (self.keyKey is None):
            raise ValueError("spec.redis.tls: set both certKey and keyKey (a client certificate "
                             "and its key, e.g. tls.crt and tls.key) or neither")
        return self


class RedisSpec(_Model):
    """How to reach Redis: a URL, or a Secret that holds it (passwords never in the spec)."""

    url: str | None = Field(
        default=None,
        description="redis:// or rediss:// (TLS) URL without a password; use urlSecretRef for one.",
    )
    urlSecretRef: SecretKeyRef | None = Field(
        default=None, description="Secret key holding the full Redis URL (may carry a password)."
    )
    mode: RedisMode = Field(
        default="standalone",
        description="cluster: the URL names seed nodes of a Redis Cluster (as a "
        "redis+cluster:// URL does); every key of the TaskQueue must share one {hash tag}.",
    )

    sentinel: SentinelSpec | None = Field(
        default=None,
        description="Find the master through these sentinels; the URL then gives only the "
        "credentials, TLS and database (its host is not used), e.g. redis://:pw@master/0.",
    )

    waitForReplicas: int = Field(
        default=0, ge=0, le=5,
        description="Durable mode: after each fetch (the move into a processing list) the "
        "worker WAITs until this many replicas have it, so a failover cannot lose it; "
        "producers do the same with taskqueue.client's wait_replicas. Costs a round trip.",
    )
    tls: RedisTLSSpec | None = Field(
        default=None,
        description="CA and optional client certificate from a Secret, for a rediss:// URL.",
    )

    @model_validator(mode="after")
    def _one_topology(self) -> RedisSpec:
        if self.tls is not None and self.url is not None and not self.url.startswith("rediss"):
            raise ValueError(f"spec.redis.tls needs a TLS URL: use rediss:// instead of "
                             f"{self.url.split('://', 1)[0]}://")
        if self.sentinel is not None and self.mode == "cluster":
            raise ValueError("set spec.redis.mode cluster or spec.redis.sentinel, not both "
                             "(Redis Cluster fails over by itself)")
        return self

    @property
    def is_cluster(self) -> bool:
        """True for mode cluster or a redis+cluster:// / rediss+cluster:// URL."""
        return self.mode == "cluster" or (self.url or "").startswith(
            ("redis+cluster://", "rediss+cluster://"))

    @model_validator(mode="after")
    def _exactly_one(self) -> RedisSpec:
        if (self.url is None) == (self.urlSecretRef is None):
            raise ValueError(
                "set exactly one of url or urlSecretRef "
                "(e.g. url: redis://redis:6379/0)"
            )
        if self.url is not None:
            _check_redis_url(self.url)
        return self


def _check_redis_url(url: str) -> None:
    if not url.startswith(_URL_SCHEMES):
        raise ValueError(
            f"url {url!r} is not a Redis URL; use redis://host:6379/0, rediss:// for TLS, "
            "redis+cluster://host:7000 or redis+sentinel://host:26379/mymaster"
        )


class QueueSpec(_Model):
    """One queue in priority order (the first in spec.queues is served first)."""

    key: str = Field(pattern=KEY_PATTERN, description="Redis key of the queue (producers LPUSH).")
    starvationLimit: int | None = Field(
        default=None,
        ge=1,
        description=(
            "After this many consecutive tasks from this queue while a later queue has tasks, "
            "take one from the next non-empty later queue. Counted fleet-wide in Redis."
        ),
    )
    type: QueueType = Field(
        default="list", description="list (LPUSH/FIFO) or zset (lowest score first)."
    )


class RetrySpec(_Model):
    """Retries with exponential backoff, then the dead-letter list."""

    maxAttempts: int = Field(default=3, ge=1, le=1000, description="Attempts before dead-letter.")
    backoffSeconds: float = Field(
        default=1.0, ge=0, description="First retry delay; doubles per attempt, with jitter."
    )
    maxBackoffSeconds: float = Field(default=300.0, ge=0, description="Cap on one retry delay.")
    deadLetterKey: str | None = Field(
        default=None,
        pattern=KEY_PATTERN,
        description="List that receives failed tasks; default '<first queue key>:dead'.",
    )


class WorkerSpec(_Model):
    """The worker pods: what runs each task and how the pods look."""

    image: str | None = Field(
        default=None, description="Worker image (built FROM the taskqueue worker image)."
    )
    handler: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="Python handler as 'package.module:function', called with the payload.",
    )
    command: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Command run per task with the payload on stdin; non-zero exit fails it.",
    )
    concurrency: int = Field(default=1, ge=1, le=1024, description="Tasks at a time per worker.")
    prefetch: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="Tasks fetched per round trip when backlogged (all held in-flight).",
    )
    taskTimeoutSeconds: float | None = Field(
        default=None, gt=0, description="A task running longer fails (and is retried)."
    )
    heartbeatSeconds: float = Field(
        default=5.0, ge=0.1, le=300, description="Heartbeat period; dead after 3 missed beats."
    )
    metricsPort: int | None = Field(
        default=None, ge=1, le=65535, description="Serve Prometheus metrics on this port."
    )
    env: list[KubeObject] = Field(default_factory=list, description="Extra container env vars.")
    envFrom: list[KubeObject] = Field(default_factory=list, description="Container envFrom.")
    resources: KubeObject | None = Field(default=None, description="Container resources.")
    nodeSelector: dict[str, str] | None = Field(default=None, description="Pod nodeSelector.")
    tolerations: list[KubeObject] = Field(default_factory=list, description="Pod tolerations.")
    serviceAccountName: str | None = Field(default=None, description="Pod service account.")
    terminationGracePeriodSeconds: int = Field(
        default=30, ge=0, description="Time a worker has to finish tasks in hand on SIGTERM."
    )

    @model_validator(mode="after")
    def _handler_or_command(self) -> WorkerSpec:
        if self.handler is not None and self.command is not None:
            raise ValueError(
                "set handler or command, not both "
                "(handler: 'pkg.module:function', or command: ['./run.sh'])"
            )
        return self


class ScaleTargetRef(_Model):
    """An existing Deployment owned by the user: scaled, never adopted or deleted."""

    name: str = Field(min_length=1, description="Name of a Deployment in the same namespace.")


class ScalingSpec(_Model):
    """Autoscaling bounds and targets."""

    minReplicas: int = Field(default=0, ge=0, description="Lowest replica count (0 allowed).")
    maxReplicas: int = Field(default=10, ge=1, description="Highest replica count.")
    targetBacklogPerReplica: int = Field(
        default=10, ge=1, description="Queued + in-flight tasks one replica should carry."
    )
    pollIntervalSeconds: float = Field(default=5.0, ge=1, description="Seconds between polls.")
    scaleDownStabilizationSeconds: float = Field(
        default=60.0, ge=0, description="Scale down to the highest recommendation in this window."
    )
    maxScaleUpStep: int | None = Field(
        default=None, ge=1, description="Most replicas added per poll."
    )
    maxScaleDownStep: int | None = Field(
        default=None, ge=1, description="Most replicas removed per poll."
    )
    idleCooldownSeconds: float = Field(
        default=60.0, ge=0, description="Idle time (nothing queued or in flight) before zero."
    )
    targetDrainSeconds: float | None = Field(
        default=None,
        gt=0,
        description="Scale so the backlog drains in this time at the measured per-replica rate.",
    )
    fallbackReplicas: int | None = Field(
        default=None, ge=0, description="Replicas while Redis cannot be read (default: hold)."
    )
    paused: bool = Field(default=False, description="Hold the replica count; status still updates.")

    @model_validator(mode="after")
    def _bounds(self) -> ScalingSpec:
        if self.minReplicas > self.maxReplicas:
            raise ValueError(
                f"minReplicas ({self.minReplicas}) must be <= maxReplicas "
                f"({self.maxReplicas})"
            )
        return self


class TaskQueueSpec(_Model):
    """spec of a TaskQueue."""

    redis: RedisSpec = Field(description="Redis connection.")
    queues: list[QueueSpec] = Field(
        min_length=1, max_length=32, description="Queues in priority order (first = highest)."
    )
    delivery: Delivery = Field(
        default="AtLeastOnce",
        description="AtLeastOnce: atomic move to a processing list, ack on success. "
        "AtMostOnce: BRPOP, a crash loses the task in hand.",
    )
    keyPrefix: str | None = Field(
        default=None,
        pattern=KEY_PATTERN,
        description="Prefix of the bookkeeping keys (workers, processing, delayed); "
        "default: the first queue key.",
    )
    retry: RetrySpec = Field(default_factory=RetrySpec, description="Retries and dead letters.")
    worker: WorkerSpec = Field(default_factory=WorkerSpec, description="The worker pods.")
    scaleTargetRef: ScaleTargetRef | None = Field(
        default=None, description="Scale this existing Deployment instead of creating one."
    )
    scaling: ScalingSpec = Field(default_factory=ScalingSpec, description="Autoscaling.")

    @field_validator("queues")
    @classmethod
    def _unique_keys(cls, queues: list[QueueSpec]) -> list[QueueSpec]:
        keys = [q.key for q in queues]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"duplicate key(s) {dupes}; list each queue once")
        return queues

    @model_validator(mode="after")
    def _one_slot_on_cluster(self) -> TaskQueueSpec:
        if self.redis.is_cluster:
            problem = cluster_key_problem(
                [q.key for q in self.queues], key_prefix=self.key_prefix,
                dead_letter=self.dead_letter_key)
            if problem:
                raise ValueError(problem)
        return self

    @property
    def dead_letter_key(self) -> str:
        return self.retry.deadLetterKey or f"{self.queues[0].key}:dead"

    @property
    def key_prefix(self) -> str:
        return self.keyPrefix or self.queues[0].key


class Condition(_Model):
    """A status condition, as Kubernetes conventions define it."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None


class TaskQueueStatus(_Model):
    """status of a TaskQueue, written by the operator."""

    backlog: dict[str, int] = Field(default_factory=dict, description="Queued tasks per queue.")
    totalBacklog: int = Field(default=0, description="Queued tasks in all queues.")
    inFlight: int = Field(default=0, description="Tasks held in processing lists.")
    delayed: int = Field(default=0, description="Tasks waiting for a retry.")
    deadLetter: int = Field(default=0, description="Tasks in the dead-letter list.")
    oldestTaskAgeSeconds: float | None = Field(default=None, description="Oldest task's age.")
    throughputPerReplica: float | None = Field(default=None, description="Tasks/s per replica.")
    workers: int = Field(default=0, description="Workers with a live heartbeat.")
    desiredReplicas: int | None = Field(default=None, description="Last decided replica count.")
    replicas: int | None = Field(default=None, description="Replicas of the worker Deployment.")
    lastScaleTime: str | None = Field(default=None, description="Time of the last scale change.")
    lastActiveTime: str | None = Field(default=None, description="Last time work was seen.")
    reason: str | None = Field(default=None, description="Why the last decision was taken.")
    observedGeneration: int | None = Field(default=None, description="Generation last acted on.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready etc.")


class ObjectMeta(BaseModel):
    """The metadata fields the project reads; the rest passes through."""

    model_config = ConfigDict(extra="allow")

    name: str = "taskqueue"
    namespace: str | None = None


class TaskQueue(_Model):
    """A whole TaskQueue manifest."""

    apiVersion: Literal["taskqueue.dev/v1alpha1"] = "taskqueue.dev/v1alpha1"
    kind: Literal["TaskQueue"] = "TaskQueue"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TaskQueueSpec
    status: TaskQueueStatus | None = None


def is_valid_key(key: str) -> bool:
    """True when `key` can name a queue (no whitespace, 1..512 characters)."""
    return bool(_KEY_RE.match(key))
