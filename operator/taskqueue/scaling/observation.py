"""What one poll of Redis saw for a TaskQueue: plain data, shared by the policy and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkerObservation:
    """One registered worker: its heartbeat deadline and the tasks it holds."""

    worker_id: str
    deadline_ms: int
    in_flight: int
    started_ms: tuple[int, ...] = ()
    """When the tasks it runs started (Redis's clock, unix ms), oldest first, as of its last
    heartbeat: at most `keys.STARTED_REPORTED` of them (empty: idle, or a worker that does not
    report them)."""

    def held(self, *, now: float, longer_than: float) -> int:
        """Tasks it has run for more than `longer_than` seconds at `now` (at most `in_flight`)."""
        cut = (now - longer_than) * 1000
        return min(self.in_flight, sum(1 for t in self.started_ms if t < cut))

    def alive(self, *, now: float) -> bool:
        return self.deadline_ms >= now * 1000


@dataclass(frozen=True)
class WrongType:
    """A key of the TaskQueue that holds another type than the one the project gives it."""

    key: str
    held: str
    expected: str

    def describe(self) -> str:
        """`key 'h' holds a hash, not a list`."""
        return f"key {self.key!r} holds a {self.held}, not a {self.expected}"


@dataclass(frozen=True)
class QueueObservation:
    """Counts read in one round trip; `at` is the wall-clock time of the read (unix seconds)."""

    at: float
    backlog: dict[str, int]
    delayed: int = 0
    dead_letter: int = 0
    completed_total: int = 0
    failed_total: int = 0
    workers: tuple[WorkerObservation, ...] = ()
    oldest_enqueued_at: dict[str, float] = field(default_factory=dict)
    due_soon: int = 0
    """Delayed tasks (scheduled or retries) due within the horizon the caller asked for."""
    next_due_at: float | None = None
    """Unix time the earliest delayed task is due."""
    duplicates_total: int = 0
    """Redeliveries skipped by idempotent consumption (stats hash `duplicates`)."""
    cancelled_total: int = 0
    """Tasks cancelled: dropped at fetch or stopped while running (stats hash `cancelled`)."""
    dead_letter_trimmed_total: int = 0
    """Dead-letter records dropped to keep the list at spec.retry.deadLetterMaxLength (stats
    hash `keys.DEAD_TRIMMED_FIELD`)."""
    taken: dict[str, int] = field(default_factory=dict)
    """Tasks ever taken from each queue by fetch.lua (empty when the counters are unknown)."""
    limited: dict[str, int] = field(default_factory=dict)
    """Per queue, the running total of tasks its limits or pause held back from fetches
    (stats `limited:`; queues never held back are left out)."""
    service: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Per queue: seconds workers spent running its tasks and the attempts they ran (stats
    `service_ms:`/`served:`, added by workers with each heartbeat; absent when never written)."""
    service_sq: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Per queue: the sum of the squared attempt times (seconds^2) and the attempts it counts
    (stats `service_sq_ms2:`/`served_sq:`), for the variance of the service time."""
    waited: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Per queue: the tasks whose wait workers measured, then how many of them waited longer
    than each edge of `keys.WAIT_EDGES_SECONDS` (stats `waited:`/`waited_over:`, added with each
    heartbeat; absent when never written)."""
    quiesced: frozenset[str] = frozenset()
    """Worker ids the operator has quiesced (they take no task)."""
    wrong_types: tuple[WrongType, ...] = ()
    """Keys of this TaskQueue that hold another type than theirs, read as empty (observe.lua
    reports them instead of failing the whole read)."""

    def oldest_age(self, queue: str) -> float | None:
        """Seconds the oldest task of `queue` has waited (None: empty or unknown)."""
        t = self.oldest_enqueued_at.get(queue)
        return None if t is None else max(0.0, self.at - t)

    @property
    def queued(self) -> int:
        return sum(self.backlog.values())

    @property
    def in_flight(self) -> int:
        return sum(w.in_flight for w in self.workers)

    @property
    def busy_workers(self) -> int:
        return sum(1 for w in self.workers if w.in_flight > 0 and w.alive(now=self.at))

    @property
    def live_workers(self) -> int:
        return sum(1 for w in self.workers if w.alive(now=self.at))

    @property
    def oldest_task_age(self) -> float | None:
        if not self.oldest_enqueued_at:
            return None
        return max(0.0, self.at - min(self.oldest_enqueued_at.values()))
