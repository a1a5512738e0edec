"""The worker's metrics as plain numbers: what each consume slot counts for itself.

A slot (its thread, or its coroutine and the failure call it awaits) is the only writer of its
`SlotTally`, one task at a time, so the task path takes no lock and imports no Prometheus
client: a task costs a few integer additions and one `bisect` per histogram.
`taskqueue.telemetry.metrics` sums every slot's tally (`WORKER.slots()`) when /metrics is scraped,
under the metric names it owns; a worker that serves no metrics never imports prometheus_client.
Pure data, no I/O.
"""

from __future__ import annotations

import threading
from bisect import bisect_left

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
"""Upper bounds (seconds) of the latency histograms: pickup latency, poll duration."""
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)
"""Upper bounds (seconds) of the poll-lag histogram (one for the operator, no labels)."""
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900)
"""Upper bounds (seconds) of the handler-time histogram."""


class Buckets:
    """One histogram: the count per bucket (not cumulative; the last one is +Inf) and the sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bound >= value: le
        self.total += value


class QueueTally:
    """One queue's task figures in one slot."""

    __slots__ = ("cancelled", "dead_lettered", "deferred", "duplicate", "duration", "failed",
                 "pickup", "retried", "started", "succeeded")

    def __init__(self) -> None:
        self.started = 0
        """Tasks handed to the handler (every attempt)."""
        self.succeeded = 0
        self.failed = 0
        """Attempts that failed."""
        self.retried = 0
        """Failed tasks scheduled for retry."""
        self.dead_lettered = 0
        self.duplicate = 0
        """Redeliveries of an id already done, acked without running (idempotency)."""
        self.deferred = 0
        """Deliveries deferred while the same id ran elsewhere (idempotency)."""
        self.cancelled = 0
        """Running tasks stopped by a cancel (never retried)."""
        self.duration = Buckets(DURATION_BUCKETS)
        """Handler time."""
        self.pickup = Buckets(LATENCY_BUCKETS)
        """Enqueue (envelope time) to first pickup."""


class SlotTally:
    """The task figures of one consume slot; a scrape reads them as they are."""

    __slots__ = ("queues", "running")

    def __init__(self) -> None:
        self.queues: dict[str, QueueTally] = {}
        self.running = 0
        """Tasks the slot's handler runs now (0 or 1)."""

    def queue(self, name: str) -> QueueTally:
        tally = self.queues.get(name)
        if tally is None:
            tally = self.queues[name] = QueueTally()
        return tally


class Tallies:
    """Every slot's tally in this process."""

    def __init__(self) -> None:
        self._slots: list[SlotTally] = []
        self._lock = threading.Lock()

    def slot(self) -> SlotTally:
        """A new slot's tally, counted from now on for the life of the process."""
        tally = SlotTally()
        with self._lock:
            self._slots.append(tally)
        return tally

    def slots(self) -> list[SlotTally]:
        with self._lock:
            return list(self._slots)


WORKER = Tallies()
"""The worker process's tallies (summed by `taskqueue.telemetry.metrics` when scraped)."""


class RateLimitTally:
    """The fetches of this process a rate limit held back, and the waits fetch.lua named for
    them (the ms until the limited queue may give its next task). Written by whichever thread
    fetched, under a lock; only a held-back fetch writes, so an unlimited worker pays nothing."""

    def __init__(self) -> None:
        self.waits = 0
        self.wait_seconds = 0.0
        self._lock = threading.Lock()

    def waited(self, ms: int) -> None:
        with self._lock:
            self.waits += 1
            self.wait_seconds += ms / 1000

    def read(self) -> tuple[int, float]:
        with self._lock:
            return self.waits, self.wait_seconds


RATE_LIMIT = RateLimitTally()
"""The worker process's rate-limit waits (`worker.store.Store` adds to it)."""
