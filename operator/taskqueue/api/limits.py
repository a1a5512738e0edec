"""The upper bounds of the numbers in a TaskQueue spec and what each protects, and `Bounds`, the
range check of the producer's and the CLI's numeric options. Pure.

Every number the models accept is finite and within what the code can use, so a value that
passes validation (and the CRD's `maximum`, generated from the models) cannot break a worker
or the operator later: Python's waits take at most `threading.TIMEOUT_MAX` seconds (~292 years;
larger raises OverflowError), Redis expiries (PX) and scores are milliseconds that must stay
exact as the doubles Lua computes with (below 2^53), and replica counts are Kubernetes int32.
The bounds are far below those limits and above any sensible setting; docs/worker.md and
docs/operator.md list them per field. Below the models (the worker reads them without pydantic).
"""

from __future__ import annotations

import math

MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY
YEAR = 365 * DAY

MAX_DURATION_SECONDS = WEEK
"""A task's timeout, the grace period, a retry's backoff, a scaling window or wait target."""
MAX_WINDOW_SECONDS = YEAR
"""How long an idempotency window remembers a completed task id (a PX of 3.2e10 ms)."""
MAX_POLL_SECONDS = HOUR
"""The operator's poll interval and the expected pod start-up time."""
MAX_STABILIZATION_SECONDS = DAY
"""The scale-down stabilization window (the policy keeps one recommendation per poll in it)."""
MAX_REPLICAS = 10_000
"""Replica counts of the worker Deployment (minReplicas, maxReplicas, steps, fallback)."""
MAX_COUNT = 1_000_000
"""Task counts: the backlog one replica carries, a queue's starvation limit."""
MAX_HISTORY_RETENTION_SECONDS = WEEK
"""How far back a TaskQueue's history in Redis reaches."""
MAX_HISTORY_ENTRIES = 100_000
"""Entries of the history stream (retention / interval) and of the decision log: at most about
9 MB of history for a TaskQueue of one queue, 190 MB for 32 queues, and 18 MB of decision log
(docs/operator.md, "History and decision log")."""


def describe_seconds(seconds: float) -> str:
    """`604800` -> "7 days", `3600` -> "1 hour", `300` -> "5 minutes" (for range messages)."""
    for size, unit in ((DAY, "day"), (HOUR, "hour"), (MINUTE, "minute")):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds:g} seconds"


class Bounds:
    """The values a numeric option accepts: a finite number from `low` (excluded when
    `above`) to `high`, a whole number when `whole`; `says` is the range as errors give it.
    A plain class: the worker imports this module, and a dataclass costs start-up time."""

    __slots__ = ("above", "high", "low", "says", "whole")

    def __init__(self, low: float, high: float, says: str, *, whole: bool = False,
                 above: bool = False) -> None:
        self.low = low
        self.high = high
        self.says = says
        self.whole = whole
        self.above = above

    def accepts(self, number: float) -> bool:
        try:
            value = float(number)
        except OverflowError:  # an int too large for a float
            return False
        return (math.isfinite(value) and self.low <= value <= self.high
                and not (self.above and value == self.low)
                and (not self.whole or value == int(value)))

    def check(self, name: str, value: object) -> float:
        """`value` as a number; ValueError naming `name` and the range when it is not one of
        the accepted values."""
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if isinstance(value, bool) or not self.accepts(number):
            raise ValueError(f"{name}={value!r}: give {self.says}")
        return number
