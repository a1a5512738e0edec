"""`spec.scaling` of a TaskQueue: the autoscaling bounds and targets (pydantic, part of the single
source of the CRD; re-exported by `taskqueue.api.models`, used by the policy). Pure data: no I/O.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from taskqueue.api import limits
from taskqueue.api.statusschema import SpecModel

PositiveSeconds = Annotated[float, Field(gt=0, le=limits.MAX_DURATION_SECONDS)]
"""A per-queue number of seconds (targetWaitSeconds, expectedServiceSeconds)."""


class ScalingSpec(SpecModel):
    """Autoscaling bounds and targets."""

    minReplicas: int = Field(default=0, ge=0, le=limits.MAX_REPLICAS,
                             description="Lowest replica count (0 allowed).")
    maxReplicas: int = Field(default=10, ge=1, le=limits.MAX_REPLICAS,
                             description="Highest replica count.")
    targetBacklogPerReplica: int = Field(
        default=10, ge=1, le=limits.MAX_COUNT,
        description="Queued + in-flight tasks one replica should carry.",
    )
    pollIntervalSeconds: float = Field(
        default=2.0, ge=1, le=limits.MAX_POLL_SECONDS,
        description="Seconds between polls (each is one Redis round trip).",
    )
    scaleDownStabilizationSeconds: float = Field(
        default=15.0, ge=0, le=limits.MAX_STABILIZATION_SECONDS,
        description="Scale down to the highest recommendation in this window "
        "(pods leave only once quiesced and drained, so the window can be short)."
    )
    maxScaleUpStep: int | None = Field(
        default=None, ge=1, le=limits.MAX_REPLICAS,
        description="Most replicas added per poll (minReplicas is reached at once).",
    )
    maxScaleDownStep: int | None = Field(
        default=None, ge=1, le=limits.MAX_REPLICAS,
        description="Most replicas removed per poll (an idle TaskQueue past its "
        "idleCooldownSeconds goes to zero at once).",
    )
    idleCooldownSeconds: float = Field(
        default=30.0, ge=0, le=limits.MAX_DURATION_SECONDS,
        description="Idle time (nothing queued, in flight or completed) before zero.",
    )
    targetDrainSeconds: float | None = Field(
        default=None,
        gt=0,
        le=limits.MAX_DURATION_SECONDS,
        description="Scale so the backlog drains in this time at the measured per-replica rate.",
    )
    targetWaitSeconds: dict[str, PositiveSeconds] | None = Field(
        default=None,
        description="Queue key -> seconds: scale so the p95 wait of that queue stays under it "
        "(Erlang C with the measured arrival rate and service time; highest priority first).",
    )
    expectedServiceSeconds: dict[str, PositiveSeconds] | None = Field(
        default=None,
        description="Queue key -> seconds a task of that queue is expected to run: "
        "targetWaitSeconds sizes with it until the workers have measured that queue's service "
        "time, so a new TaskQueue's first burst is sized for its wait target (without it, the "
        "length target sizes the fleet until then).",
    )
    holdThroughLullsSeconds: float = Field(
        default=0.0, ge=0, le=limits.MAX_DURATION_SECONDS,
        description="For arrivals in batches (targetWaitSeconds): idle seconds per pod worth "
        "paying to keep the next batch's pods through the lulls between batches. They are held "
        "while the measured time between batches is under one poll + podStartupSeconds (what "
        "re-activating them costs) + this; otherwise the fleet follows the rate between "
        "batches and each batch is started when it lands (a poll and a pod start-up later). "
        "Held pods stay for up to idleCooldownSeconds + this of idle time. 0: hold only when "
        "that is cheaper than re-activating, never past idleCooldownSeconds.",
    )
    forecastBatches: bool = Field(
        default=True,
        description="For arrivals in batches (targetWaitSeconds) that are not held through "
        "the lulls and recur at a stable period (the last three a stable gap apart): start the "
        "fleet the next batch needs one pod start-up and one poll before it is expected, so it "
        "waits less than a re-activation (a poll + a pod start-up). A batch that does not come "
        "costs that fleet a start-up, a poll and at most idleCooldownSeconds. false: every such "
        "batch is started when it lands.",
    )
    fallbackReplicas: int | None = Field(
        default=None, ge=0, le=limits.MAX_REPLICAS,
        description="Replicas while Redis cannot be read (default: hold).",
    )
    paused: bool = Field(default=False, description="Hold the replica count; status still updates.")
    podStartupSeconds: float = Field(
        default=30.0,
        ge=0,
        le=limits.MAX_POLL_SECONDS,
        description="Expected worker pod start-up time: scheduled tasks due within the next "
        "poll plus this count as demand, so workers are up when they fall due. Bursts and "
        "lulls are sized with the start-up measured (a scale-up from zero to its first "
        "worker) where that is shorter.",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ScalingSpec:
        if self.minReplicas > self.maxReplicas:
            raise ValueError(
                f"minReplicas ({self.minReplicas}) must be <= maxReplicas "
                f"({self.maxReplicas})"
            )
        return self
