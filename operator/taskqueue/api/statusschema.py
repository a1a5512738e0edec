"""The status of a TaskQueue (`taskqueue.dev/v1alpha1`), as the operator writes it, and the base of
every API model. Pydantic, the single source of the CRD's status schema (with `taskqueue.api.models`
for the rest); the values are built by `taskqueue.controller.status`. Pure data: no I/O.
"""

from __future__ import annotations

import typing
from typing import Any, Literal

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from taskqueue.api.limits import describe_seconds


class ApiModel(BaseModel):
    """Base of the API models: unknown fields rejected, immutable, camelCase names as written."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


_RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal",
                           "finite_number"})


class SpecModel(ApiModel):
    """Base of the spec models: strict, like the API server's schema (`"4"` is not an integer).
    A number out of its field's bounds fails with one message that states the range."""

    model_config = ConfigDict(strict=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        """A field given as null is a field not given, as the API server prunes it before it
        validates (no field of the CRD is nullable); an unknown field stays one, null or not."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k not in cls.model_fields}
        return data

    @field_validator("*", mode="wrap")
    @classmethod
    def _range_stated(cls, value: Any, handler: ValidatorFunctionWrapHandler,
                      info: ValidationInfo) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            name = info.field_name
            problem = None if name is None else out_of_range(exc, cls.model_fields[name],
                                                             name=name)
            if problem is None:
                raise
            raise ValueError(problem) from None


def out_of_range(error: ValidationError, field: FieldInfo, *, name: str) -> str | None:
    """The message of a number outside the bounds of `field` (named `name`): `inf is out of
    range; use a number of seconds from 0 to 604800 (7 days)`, with `name['key']: ` before it
    for an entry of a mapping; None for any other error."""
    problems = error.errors()
    if not problems or not all(_is_range(p["type"], p["input"]) for p in problems):
        return None
    first = problems[0]
    bounded = _bounds_of(field.annotation, field.metadata)
    if bounded is None:
        return None
    kind, metadata = bounded
    where = "".join(f"for {part!r}, " for part in first["loc"])
    phrase = allowed(kind, metadata, seconds=name.endswith("Seconds"))
    return f"{where}{_shown(first['input'])} is out of range; use {phrase}"


def _is_range(kind: str, value: Any) -> bool:
    """A bound's error, or an integer too large for a float field."""
    return kind in _RANGE_ERRORS or (kind == "float_type" and type(value) is int)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 24 else f"a number of {len(text)} digits"


def _bounds_of(annotation: Any, metadata: list[Any]) -> tuple[type, list[Any]] | None:
    """(int or float, the bounds) of a number field, or of the numbers inside a mapping or an
    optional field (`dict[str, Annotated[float, Field(gt=0)]] | None`)."""
    if annotation in (int, float) and metadata:
        return annotation, metadata
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        found = [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
        return _bounds_of(inner, found + metadata)
    for arg in typing.get_args(annotation):
        bounded = _bounds_of(arg, metadata)
        if bounded is not None:
            return bounded
    return None


def allowed(kind: type, metadata: list[Any], *, seconds: bool) -> str:
    """The range of a number field as a phrase: `a whole number from 1 to 1024`."""
    noun = ("a whole number" if kind is int else "a number") + (" of seconds" if seconds else "")
    low = next((m for m in metadata if isinstance(m, annotated_types.Ge | annotated_types.Gt)),
               None)
    high: Any = next((m.le for m in metadata if isinstance(m, annotated_types.Le)), None)
    span = f" ({describe_seconds(high)})" if seconds and high is not None and high >= 60 else ""
    if isinstance(low, annotated_types.Gt):
        return f"{noun} > {low.gt} and <= {high}{span}"
    start = low.ge if low is not None else None
    return f"{noun} from {start} to {high}{span}"


class Condition(ApiModel):
    """A status condition, as Kubernetes conventions define it."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None


class QueueFlowStatus(ApiModel):
    """One queue's flow control as Redis holds it (docs/worker.md "Flow control")."""

    paused: bool = Field(default=False, description="Workers take nothing from the queue.")
    pausedBy: list[str] | None = Field(
        default=None, description="Who paused it: spec (spec.queues[].paused) and/or "
        "'taskqueue pause at <unix seconds> by <who>'.")
    rateLimit: str | None = Field(default=None, description="'<tasks>/<perSeconds>s burst <n>'.")
    maxInFlight: int | None = Field(default=None, description="The in-flight limit.")
    inFlight: int | None = Field(
        default=None, description="The queue's tasks held by workers (queues with maxInFlight).")


class ScheduleStatus(ApiModel):
    """One schedule's firing, as recorded in Redis (the same for every operator replica)."""

    lastSlotTime: str | None = Field(default=None, description="The last slot fired.")
    lastTaskId: str | None = Field(default=None, description="The task id of that slot.")
    nextSlotTime: str | None = Field(default=None, description="The next slot (unset: "
                                     "suspended, or no slot in 50 years).")
    missed: int = Field(default=0, description="Slots not fired: older than catchUpSeconds "
                        "when the operator came back.")
    skipped: int = Field(default=0, description="Slots skipped by overlap Skip.")
    suspended: bool = Field(default=False, description="spec.schedules[].suspend is set.")


class TaskQueueStatus(ApiModel):
    """status of a TaskQueue, written by the operator."""

    # The counts are read from Redis: absent while it cannot be read (unknown is not empty).
    backlog: dict[str, int] | None = Field(default=None, description="Queued tasks per queue.")
    totalBacklog: int | None = Field(default=None, description="Queued tasks in all queues.")
    inFlight: int | None = Field(default=None, description="Tasks held in processing lists.")
    delayed: int | None = Field(
        default=None, description="Tasks in the delayed set: retries waiting and scheduled tasks."
    )
    dueSoon: int | None = Field(
        default=None,
        description="Delayed tasks due within the next poll plus podStartupSeconds (demand).",
    )
    nextDueTime: str | None = Field(default=None, description="When the next delayed task is due.")
    deadLetter: int | None = Field(default=None, description="Tasks in the dead-letter list.")
    oldestTaskAgeSeconds: float | None = Field(default=None, description="Oldest task's age.")
    waitSeconds: dict[str, float] | None = Field(
        default=None, description="Per queue: how long its oldest task has waited."
    )
    waitP95Seconds: dict[str, float] | None = Field(
        default=None,
        description="Per queue: the p95 wait of its recent tasks (the last ~600), measured by the "
                    "workers (tasks with an enqueue time only).",
    )
    arrivalRate: dict[str, float] | None = Field(
        default=None, description="Per queue: measured tasks/s entering it."
    )
    serviceSeconds: float | None = Field(
        default=None, description="Measured mean seconds a task is held by a worker."
    )
    throughputPerReplica: float | None = Field(default=None, description="Tasks/s per replica.")
    workers: int | None = Field(default=None, description="Workers with a live heartbeat.")
    desiredReplicas: int | None = Field(default=None, description="Last decided replica count.")
    replicas: int | None = Field(default=None, description="Replicas of the worker Deployment.")
    lastScaleTime: str | None = Field(default=None, description="Time of the last scale change.")
    lastActiveTime: str | None = Field(default=None, description="Last time work was seen.")
    reason: str | None = Field(default=None, description="Why the last decision was taken.")
    pausedQueues: list[str] | None = Field(
        default=None, description="Queues workers take nothing from (spec.queues[].paused or "
        "`taskqueue pause`).")
    flow: dict[str, QueueFlowStatus] | None = Field(
        default=None, description="Per queue with a limit or a pause: its flow control.")
    observedGeneration: int | None = Field(default=None, description="Generation last acted on.")
    shard: str | None = Field(
        default=None, description="With a sharded operator (--sharding): the identity of the "
        "replica that polls this TaskQueue (its shard Lease's holderIdentity).")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, RedisReachable, Scaling, KeyTypes, and the poll's own writes to Redis: "
        "FlowControlWritten (spec.queues' limits and pauses), SchedulesFired (spec.schedules); "
        "False with the refusal and its fix.")
    schedules: dict[str, ScheduleStatus] | None = Field(
        default=None, description="Per schedule (by name): its last and next slot, counts.")
    nextScheduleTime: str | None = Field(
        default=None, description="The earliest next slot of all schedules.")
