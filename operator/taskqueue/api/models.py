"""The TaskQueue API (`taskqueue.dev/v1alpha1`): pydantic models, the single source of the schema.

The worker reads `TaskQueueSpec` from a manifest, the operator reads it from the cluster, and the
CRD in `crds/` is generated from these models (`taskqueue.api.crdgen`). Field names are the
manifest's camelCase names, so a manifest round-trips without aliases. Pure data: no I/O, no kopf,
no redis. The status schema is in `taskqueue.api.statusschema`, `ScalingSpec` in
`taskqueue.api.scalingspec` and `HistorySpec` in `taskqueue.api.historyspec` (re-exported here).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from taskqueue.api import limits, redisspec
from taskqueue.api.historyspec import HistorySpec as HistorySpec
from taskqueue.api.scalingspec import ScalingSpec as ScalingSpec
from taskqueue.api.schedulespec import MAX_SCHEDULES
from taskqueue.api.schedulespec import ScheduleSpec as ScheduleSpec
from taskqueue.api.statusschema import SpecModel as _Model
from taskqueue.api.statusschema import TaskQueueStatus
from taskqueue.wire import keyspace
from taskqueue.wire.hashtag import cluster_key_problem

GROUP = "taskqueue.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TaskQueue"
PLURAL = "taskqueues"
SINGULAR = "taskqueue"
SHORT_NAMES = ("tq",)

Delivery = Literal["AtLeastOnce", "AtMostOnce"]
QueueType = Literal["list", "zset"]

KubeObject = dict[str, Any]
"""A Kubernetes sub-object passed through verbatim (env var, resources, toleration...)."""

# spec.redis (taskqueue.api.redisspec), re-exported: the API is one module for its users
PASSWORD_IN_URL = redisspec.PASSWORD_IN_URL
REDIS_TLS_DIR = redisspec.REDIS_TLS_DIR
RedisMode = redisspec.RedisMode
RedisSpec = redisspec.RedisSpec
RedisTLSSpec = redisspec.RedisTLSSpec
SecretKeyRef = redisspec.SecretKeyRef
SentinelSpec = redisspec.SentinelSpec



class RateLimit(_Model):
    """At most `tasks` task starts per `perSeconds` for the whole fleet (a GCRA in Redis, kept
    by the fetch script: docs/worker.md "Flow control")."""

    tasks: int = Field(ge=1, le=limits.MAX_COUNT, description="Task starts allowed per period.")
    perSeconds: float = Field(
        default=1.0, gt=0, le=limits.MAX_DURATION_SECONDS, description="The period, in seconds.")
    burst: int | None = Field(
        default=None, ge=1, le=limits.MAX_COUNT,
        description="Tasks that may start at once after a quiet spell (default: tasks). Any "
        "perSeconds window holds at most tasks + burst - 1 starts.")

    @property
    def per_second(self) -> float:
        return self.tasks / self.perSeconds

    @property
    def bucket(self) -> int:
        return self.burst if self.burst is not None else self.tasks


class QueueSpec(_Model):
    """One queue in priority order (the first in spec.queues is served first)."""

    key: str = Field(pattern=keyspace.KEY_PATTERN,
                     description="Redis key of the queue (producers LPUSH).")
    starvationLimit: int | None = Field(
        default=None,
        ge=1,
        le=limits.MAX_COUNT,
        description=(
            "After this many consecutive tasks from this queue while a later queue has tasks, "
            "take one from the next non-empty later queue. Counted fleet-wide in Redis."
        ),
    )
    type: QueueType = Field(
        default="list", description="list (LPUSH/FIFO) or zset (lowest score first)."
    )
    rateLimit: RateLimit | None = Field(
        default=None, description="Fleet-wide limit of task starts from this queue.")
    maxInFlight: int | None = Field(
        default=None, ge=1, le=limits.MAX_COUNT,
        description="Fleet-wide limit of this queue's tasks held by workers at once.")
    paused: bool = Field(
        default=False,
        description="Workers take nothing from this queue (tasks in hand finish; nothing is "
        "lost). `taskqueue pause` pauses a queue for an incident beside this flag.")


class RetrySpec(_Model):
    """Retries with exponential backoff, then the dead-letter list."""

    maxAttempts: int = Field(default=3, ge=1, le=1000, description="Attempts before dead-letter.")
    backoffSeconds: float = Field(
        default=1.0, ge=0, le=limits.MAX_DURATION_SECONDS,
        description="First retry delay; doubles per attempt, with jitter.",
    )
    maxBackoffSeconds: float = Field(
        default=300.0, ge=0, le=limits.MAX_DURATION_SECONDS, description="Cap on one retry delay."
    )
    deadLetterKey: str | None = Field(
        default=None,
        pattern=keyspace.KEY_PATTERN,
        description="List that receives failed tasks; default '<first queue key>:dead'.",
    )
    deadLetterMaxLength: int = Field(
        default=10_000,  # Sidekiq's dead_max_jobs; about 2 MB of small records
        ge=1,
        le=10_000_000,
        description="Newest records the dead-letter list keeps; each push beyond it drops the "
        "oldest, counted in the stats hash (dead_trimmed).",
    )


class IdempotencySpec(_Model):
    """Idempotent consumption: a task id that completed within the window is not run again."""

    windowSeconds: float = Field(
        default=86400.0,
        ge=1,
        le=limits.MAX_WINDOW_SECONDS,
        description="How long a completed task id is remembered (a redelivery or a second "
        "enqueue of the id within it is acked without running).",
    )


class TracingSpec(_Model):
    """OpenTelemetry traces of the tasks (the `taskqueue-operator[otel]` extra in the image)."""

    producerSpan: Literal["parent", "link"] = Field(
        default="parent",
        description="How each attempt's CONSUMER span refers to the producer's span carried in "
        "the envelope (traceparent): as its parent (one trace from producer to handler) or as "
        "a link (a trace per attempt; for large fan-outs).",
    )


class WorkerSpec(_Model):
    """The worker pods: what runs each task and how the pods look."""

    image: str | None = Field(
        default=None, description="Worker image (built FROM the taskqueue worker image)."
    )
    handler: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$",
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
        default=None, gt=0, le=limits.MAX_DURATION_SECONDS,
        description="A task running longer fails (and is retried).",
    )
    heartbeatSeconds: float = Field(
        default=5.0, ge=0.1, le=300, description="Heartbeat period; dead after 3 missed beats."
    )
    metricsPort: int | None = Field(
        default=None, ge=1, le=65535, description="Serve Prometheus metrics on this port."
    )
    metricsAddress: str | None = Field(
        default=None, pattern=r"^[0-9A-Fa-f.:]{2,45}$",
        description="IP address the metrics listen on (default 0.0.0.0; 127.0.0.1 keeps them "
                    "to the pod, e.g. for a scraping sidecar).",
    )
    env: list[KubeObject] = Field(default_factory=list, description="Extra container env vars.")
    envFrom: list[KubeObject] = Field(default_factory=list, description="Container envFrom.")
    resources: KubeObject | None = Field(default=None, description="Container resources.")
    nodeSelector: dict[str, str] | None = Field(default=None, description="Pod nodeSelector.")
    tolerations: list[KubeObject] = Field(default_factory=list, description="Pod tolerations.")
    serviceAccountName: str | None = Field(default=None, description="Pod service account.")
    securityContext: KubeObject | None = Field(
        default=None,
        description="Container securityContext, merged key by key over the restricted default "
                    "(runAsNonRoot, allowPrivilegeEscalation false, capabilities drop ALL, "
                    "seccompProfile RuntimeDefault, readOnlyRootFilesystem).",
    )
    podSecurityContext: KubeObject | None = Field(
        default=None,
        description="Pod securityContext, merged key by key over the default "
                    "(runAsNonRoot, seccompProfile RuntimeDefault).",
    )
    terminationGracePeriodSeconds: int = Field(
        default=30, ge=0, le=limits.MAX_DURATION_SECONDS,
        description="Time a worker has to finish tasks in hand on SIGTERM.",
    )
    idempotency: IdempotencySpec | None = Field(
        default=None,
        description="Skip redeliveries of task ids completed within windowSeconds and never "
        "run one id twice at once (unset: off).",
    )
    tracing: TracingSpec | None = Field(
        default=None,
        description="Export a CONSUMER span per attempt over OTLP/HTTP, configured by the "
        "standard OTEL_* environment variables (unset: off; nothing of OpenTelemetry is "
        "imported).",
    )
    tracking: bool = Field(
        default=False,
        description="Keep a task index per task id (<prefix>:task:<id>, a small hash that "
        "expires a day after its last change) so `taskqueue status ID` can say where any "
        "task is: queued, delayed, running, done, dead or cancelled. Costs one HSET and "
        "PEXPIRE inside the scripts per move of a task (no round trip); off: status knows "
        "only cancels, running and done tasks of idempotent workers.",
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
        pattern=keyspace.KEY_PATTERN,
        description="Prefix of the bookkeeping keys (workers, processing, delayed); "
        "default: the first queue key.",
    )
    retry: RetrySpec = Field(default_factory=RetrySpec, description="Retries and dead letters.")
    worker: WorkerSpec = Field(default_factory=WorkerSpec, description="The worker pods.")
    scaleTargetRef: ScaleTargetRef | None = Field(
        default=None, description="Scale this existing Deployment instead of creating one."
    )
    scaling: ScalingSpec = Field(default_factory=ScalingSpec, description="Autoscaling.")
    history: HistorySpec = Field(
        default_factory=HistorySpec,
        description="The history and decision log the operator keeps in the TaskQueue's Redis.")
    schedules: list[ScheduleSpec] = Field(
        default_factory=list, max_length=MAX_SCHEDULES,
        description="Cron schedules: a task into one of the queues at every slot, fired once "
        "per slot by the operator.")

    @field_validator("queues")
    @classmethod
    def _unique_keys(cls, queues: list[QueueSpec]) -> list[QueueSpec]:
        keys = [q.key for q in queues]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"duplicate key(s) {dupes}; list each queue once")
        return queues

    @model_validator(mode="after")
    def _every_key_its_own(self) -> TaskQueueSpec:
        problem = keyspace.collision([q.key for q in self.queues], key_prefix=self.keyPrefix,
                                     dead_letter=self.retry.deadLetterKey)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _one_slot_on_cluster(self) -> TaskQueueSpec:
        if self.redis.is_cluster:
            problem = cluster_key_problem(
                [q.key for q in self.queues], key_prefix=self.key_prefix,
                dead_letter=self.dead_letter_key)
            if problem:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _per_queue_seconds_name_queues(self) -> TaskQueueSpec:
        keys = {q.key for q in self.queues}
        for name in ("targetWaitSeconds", "expectedServiceSeconds"):
            unknown = sorted(set(getattr(self.scaling, name) or {}) - keys)
            if unknown:
                raise ValueError(
                    f"scaling.{name} names {unknown}, not in spec.queues; use the key "
                    f"of one of {sorted(keys)}"
                )
        return self

    @model_validator(mode="after")
    def _flow_needs_held_tasks(self) -> TaskQueueSpec:
        # a pause holds for AtMostOnce workers too (their blocking pops leave paused queues
        # out); the limits need the fetch script and held tasks
        if self.delivery == "AtMostOnce":
            for i, q in enumerate(self.queues):
                for name in ("rateLimit", "maxInFlight"):
                    if getattr(q, name):
                        raise ValueError(
                            f"spec.queues[{i}].{name} needs delivery AtLeastOnce (the fetch "
                            "script keeps flow limits over held tasks; AtMostOnce workers "
                            f"BRPOP): set delivery: AtLeastOnce or remove {name}")
        return self

    @model_validator(mode="after")
    def _schedules_named_once_into_queues(self) -> TaskQueueSpec:
        keys = {q.key for q in self.queues}
        seen: set[str] = set()
        for i, schedule in enumerate(self.schedules):
            if schedule.name in seen:
                raise ValueError(f"schedules[{i}].name {schedule.name!r} is used twice; give "
                                 "each schedule its own name")
            seen.add(schedule.name)
            if schedule.queue not in keys:
                raise ValueError(f"schedules[{i}].queue {schedule.queue!r} is not in "
                                 f"spec.queues; use the key of one of {sorted(keys)}")
        return self

    @property
    def dead_letter_key(self) -> str:
        return self.retry.deadLetterKey or keyspace.default_dead_letter(self.queues[0].key)

    @property
    def key_prefix(self) -> str:
        return self.keyPrefix or self.queues[0].key


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
