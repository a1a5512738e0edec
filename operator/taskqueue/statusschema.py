"""The status of a TaskQueue (`taskqueue.dev/v1alpha1`), as the operator writes it, and the base of
every API model. Pydantic, the single source of the CRD's status schema (with `taskqueue.models`
for the rest); the values are built by `taskqueue.status`. Pure data: no I/O.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ApiModel(BaseModel):
    """Base of the API models: unknown fields rejected, immutable, camelCase names as written."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SpecModel(ApiModel):
    """Base of the spec models: strict, like the API server's schema (`"4"` is not an integer)."""

    model_config = ConfigDict(strict=True)


class Condition(ApiModel):
    """A status condition, as Kubernetes conventions define it."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None


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
    observedGeneration: int | None = Field(default=None, description="Generation last acted on.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready etc.")
