"""`spec.scaling` of a TaskQueue: the autoscaling bounds and targets (pydantic, part of the single
source of the CRD; re-exported by `taskqueue.models`, used by the policy). Pure data: no I/O.
"""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator, model_validator

from taskqueue.statusschema import SpecModel


class ScalingSpec(SpecModel):
    """Autoscaling bounds and targets."""

    minReplicas: int = Field(default=0, ge=0, description="Lowest replica count (0 allowed).")
    maxReplicas: int = Field(default=10, ge=1, description="Highest replica count.")
    targetBacklogPerReplica: int = Field(
        default=10, ge=1, description="Queued + in-flight tasks one replica should carry."
    )
    pollIntervalSeconds: float = Field(
        default=2.0, ge=1, description="Seconds between polls (each is one Redis round trip)."
    )
    scaleDownStabilizationSeconds: float = Field(
        default=15.0, ge=0, description="Scale down to the highest recommendation in this window "
        "(pods leave only once quiesced and drained, so the window can be short)."
    )
    maxScaleUpStep: int | None = Field(
        default=None, ge=1, description="Most replicas added per poll (minReplicas is reached "
        "at once)."
    )
    maxScaleDownStep: int | None = Field(
        default=None, ge=1, description="Most replicas removed per poll (an idle TaskQueue "
        "past its idleCooldownSeconds goes to zero at once)."
    )
    idleCooldownSeconds: float = Field(
        default=30.0, ge=0, description="Idle time (nothing queued or in flight) before zero."
    )
    targetDrainSeconds: float | None = Field(
        default=None,
        gt=0,
        description="Scale so the backlog drains in this time at the measured per-replica rate.",
    )
    targetWaitSeconds: dict[str, float] | None = Field(
        default=None,
        description="Queue key -> seconds: scale so the p95 wait of that queue stays under it "
        "(Erlang C with the measured arrival rate and service time; highest priority first).",
    )
    expectedServiceSeconds: dict[str, float] | None = Field(
        default=None,
        description="Queue key -> seconds a task of that queue is expected to run: "
        "targetWaitSeconds sizes with it until the workers have measured that queue's service "
        "time, so a new TaskQueue's first burst is sized for its wait target (without it, the "
        "length target sizes the fleet until then).",
    )
    fallbackReplicas: int | None = Field(
        default=None, ge=0, description="Replicas while Redis cannot be read (default: hold)."
    )
    paused: bool = Field(default=False, description="Hold the replica count; status still updates.")
    podStartupSeconds: float = Field(
        default=30.0,
        ge=0,
        description="Expected worker pod start-up time: scheduled tasks due within the next "
        "poll plus this count as demand, so workers are up when they fall due.",
    )

    @field_validator("targetWaitSeconds", "expectedServiceSeconds")
    @classmethod
    def _positive_seconds(cls, seconds: dict[str, float] | None,
                          info: ValidationInfo) -> dict[str, float] | None:
        for key, value in (seconds or {}).items():
            if not value > 0:
                raise ValueError(
                    f"{info.field_name}[{key!r}] is {value}; use a number of seconds > 0"
                )
        return seconds

    @model_validator(mode="after")
    def _bounds(self) -> ScalingSpec:
        if self.minReplicas > self.maxReplicas:
            raise ValueError(
                f"minReplicas ({self.minReplicas}) must be <= maxReplicas "
                f"({self.maxReplicas})"
            )
        return self
