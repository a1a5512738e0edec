"""`spec.history` of a TaskQueue: how much history and decision log the operator keeps in the
TaskQueue's Redis (pydantic, part of the single source of the CRD; re-exported by
`taskqueue.api.models`). Pure data: no I/O.
"""

from __future__ import annotations

import math

from pydantic import Field, model_validator

from taskqueue.api import limits
from taskqueue.api.statusschema import SpecModel


class HistorySpec(SpecModel):
    """The history (one point per interval) and the decision log (one entry per change) the
    operator writes to the TaskQueue's Redis, for the console and `taskqueue simulate`."""

    retentionSeconds: float = Field(
        default=86400.0, ge=0, le=limits.MAX_HISTORY_RETENTION_SECONDS,
        description="How far back the history reaches (one point per intervalSeconds, about "
        "50 bytes per point and queue); 0 writes neither the history nor the decision log.",
    )
    intervalSeconds: float = Field(
        default=10.0, ge=1, le=limits.MAX_POLL_SECONDS,
        description="One history point per interval, written by the first poll after it ends.",
    )
    decisions: int = Field(
        default=1000, ge=1, le=limits.MAX_HISTORY_ENTRIES,
        description="Decision-log entries kept, the newest (about 180 bytes each).",
    )

    @model_validator(mode="after")
    def _points_bounded(self) -> HistorySpec:
        if self.points > limits.MAX_HISTORY_ENTRIES:
            raise ValueError(
                f"retentionSeconds / intervalSeconds is {self.points} history points, more than "
                f"{limits.MAX_HISTORY_ENTRIES}; shorten retentionSeconds or lengthen "
                "intervalSeconds")
        return self

    @property
    def enabled(self) -> bool:
        """Whether the history and the decision log are written."""
        return self.retentionSeconds > 0

    @property
    def points(self) -> int:
        """The history points retentionSeconds holds (the stream's MAXLEN)."""
        return math.ceil(self.retentionSeconds / self.intervalSeconds)
