"""One refresh of a TaskQueue shared by every viewer: a small cache keyed by TaskQueue.

A refresh is one `queueops.observe` call and one pipelined read of the history and decision log
(`reads.streams`, from the last history entry already held), the flow-control hashes and the
schedules' firing record. Viewers asking within `ttl`
seconds get the same snapshot; viewers asking while a refresh runs wait for it (one flight per
TaskQueue). The history points of the last hour stay in memory, so a refresh reads only the new
ones. Errors are part of the snapshot: a page shows them, it never fails on them.

The tasks the workers hold (and their progress) are a second shared read, per page of the
workers table (`Workers`, `read_workers`): one pipeline per shown page per interval whoever
looks, read only while someone looks at that page. The queues page's next pending and delayed
tasks are a third (`Listed`, `read_lists`): one pipeline per TaskQueue per interval whoever looks,
read only while someone looks at its queues page.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import redis

from taskqueue.api import redact
from taskqueue.console import reads
from taskqueue.redisio import queueops
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import flow, history, keys

if TYPE_CHECKING:
    import redis.asyncio as aioredis

WINDOW_SECONDS = 3600.0
"""How far back the charts reach."""


@dataclass
class Snapshot:
    """What a refresh read of one TaskQueue."""

    at: float
    observation: QueueObservation | None = None
    error: str = ""
    """Why Redis could not be read (no secret: redacted)."""
    points: list[tuple[str, history.HistoryPoint]] = field(default_factory=list)
    decisions: list[tuple[str, history.DecisionEntry]] = field(default_factory=list)
    malformed: int = 0
    flows: tuple[flow.QueueFlow, ...] = ()
    """Each queue's flow control (limits, pauses, held counts) as Redis holds it."""
    flow_error: str = ""
    fired: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per schedule name, its firing record (`reads.SCHEDULE_FIELDS`)."""
    fired_error: str = ""


@dataclass
class Workers:
    """What one read of a page of workers found: the tasks they hold and their progress."""

    at: float
    held: reads.Held = field(default_factory=reads.Held)
    error: str = ""
    """Why Redis could not be read (redacted)."""


@dataclass
class Listed:
    """What one read of a TaskQueue's queues page found: the next tasks of each queue (in the
    schema's order) and the delayed entries due first."""

    at: float
    pending: list[list[reads.Pending]] = field(default_factory=list)
    delayed: list[reads.Pending] = field(default_factory=list)
    error: str = ""
    """Why Redis could not be read (redacted)."""


async def read_lists(client: aioredis.Redis, schema: keys.KeySchema, *, now: float) -> Listed:
    """The next `reads.PENDING_SHOWN` tasks of each queue and of the delayed set, errors kept."""
    try:
        pending = [await reads.pending(client, q) for q in schema.queues]
        return Listed(at=now, pending=pending, delayed=await reads.delayed(client, schema))
    except (redis.RedisError, OSError) as exc:
        return Listed(at=now, error=redact.scrub(str(exc)) or type(exc).__name__)


async def read_workers(client: aioredis.Redis, schema: keys.KeySchema, worker_ids: Sequence[str], *,
               now: float) -> Workers:
    """The held tasks and progress reports of `worker_ids` (one page), errors kept."""
    try:
        return Workers(at=now, held=await reads.held(client, schema, worker_ids))
    except (redis.RedisError, OSError) as exc:
        return Workers(at=now, error=redact.scrub(str(exc)) or type(exc).__name__)


async def refresh(client: aioredis.Redis, schema: keys.KeySchema, previous: Snapshot | None,
                  *, now: float, schedules: Sequence[str] = ()) -> Snapshot:
    """A new snapshot: one observe call, one pipeline of the streams after `previous`'s points,
    the flow hashes and the firing record of `schedules` (names)."""
    since_ms = int((now - WINDOW_SECONDS) * 1000)
    kept = [p for p in (previous.points if previous else []) if p[1].t >= since_ms]
    after = kept[-1][0] if kept else ""
    try:
        observation = await queueops.observe(client, schema)
        got = await reads.streams(client, schema, after=after, since_ms=since_ms,
                                  schedules=schedules)
    except (redis.RedisError, OSError) as exc:
        return Snapshot(at=now, error=redact.scrub(str(exc)) or type(exc).__name__,
                        points=kept, decisions=previous.decisions if previous else [])
    return Snapshot(at=now, observation=observation, points=kept + got.points,
                    decisions=got.decisions, malformed=got.malformed, flows=got.flows,
                    flow_error=redact.scrub(got.flow_error), fired=got.fired,
                    fired_error=redact.scrub(got.fired_error))


class Timed(Protocol):
    @property
    def at(self) -> float: ...


T = TypeVar("T", bound=Timed)


class Shared(Generic[T]):
    """The newest read per key (a TaskQueue, or a page of its workers), at most one refresh in
    flight each."""

    def __init__(self, *, ttl: float, clock: Callable[[], float] = time.time) -> None:
        self.ttl = ttl
        self._clock = clock
        self._snapshots: dict[str, T] = {}
        self._flights: dict[str, asyncio.Task[T]] = {}
        self.refreshes = 0
        """Refreshes run (the benchmark and the tests read it)."""

    async def get(self, key: str, load: Callable[[T | None], Awaitable[T]]) -> T:
        """The snapshot of `key`, refreshed through `load(previous)` when older than the TTL."""
        held = self._snapshots.get(key)
        if held is not None and self._clock() - held.at < self.ttl:
            return held
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._load(key, load, held))
            self._flights[key] = flight
        return await asyncio.shield(flight)

    def forget(self, key: str) -> None:
        """Drop the snapshot of `key`: the next viewer reads Redis (after an action)."""
        self._snapshots.pop(key, None)

    async def _load(self, key: str, load: Callable[[T | None], Awaitable[T]],
                    held: T | None) -> T:
        try:
            self.refreshes += 1
            snapshot = await load(held)
            self._snapshots[key] = snapshot
            return snapshot
        finally:
            self._flights.pop(key, None)
