"""Idempotent consumption (`spec.worker.idempotency`): a task whose id completed within the
window is acked without running, and one id never runs twice at the same time.

Per task, around the handler (each step one atomic script; keys from `KeySchema`):
- `claim.lua` before: done marker present -> ack unrun (counted as a duplicate); entry no longer
  held (a recovery requeued it) -> skip; another owner's running lease -> defer the entry to the
  delayed zset until the lease ends; else take the lease `<prefix>:running:<id>` (owner
  `<worker id>#<slot>`, expiry 3 heartbeats).
- `complete.lua` after success: done marker `<prefix>:done:<id>` (expiry = window), lease
  dropped and entry acked, all at once. The marker means *done*, never *started*: a crash in
  the handler leaves no marker, so the retry runs.
- `lease.lua` after a failure: the lease is dropped (the retry need not wait for it).
The `LeaseKeeper` thread refreshes the leases of running tasks every heartbeat, so a long task
keeps its lease while its worker lives, and a dead worker's lease ends with its heartbeat.

The id is the envelope's (a producer's business id or the generated one), else the sha1 of a
raw payload (`keys.task_identity`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from taskqueue.telemetry import tally
from taskqueue.wire import keys
from taskqueue.worker import backoff, lastcalls
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.periodic import Periodic
from taskqueue.worker.store import REDIS_ERRORS, Store, expect, now_ms

log = logging.getLogger(__name__)

Verdict = Literal["run", "done", "gone", "deferred"]
MAX_DEFER_MS = 1000
"""A deferred second delivery comes back after the lease ends, at most this much later."""


def entry_identity(entry: keys.Entry) -> str:
    """The idempotency id of a processing entry. Pure."""
    return keys.task_identity(keys.unwrap(entry.element))


def lease_ms(config: WorkerConfig) -> int:
    """How long a running lease lives without a refresh: three heartbeats, like the worker."""
    return int(3000 * config.heartbeat_seconds)


@dataclass
class Leases:
    """The running leases this process holds: running key -> owner, shared by the slots."""

    _held: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, key: str, owner: str) -> None:
        with self._lock:
            self._held[key] = owner

    def remove(self, key: str) -> None:
        with self._lock:
            self._held.pop(key, None)

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self._held)


class Guard:
    """The idempotency steps of one consume slot (over that slot's `Store`)."""

    def __init__(self, *, config: WorkerConfig, store: Store, leases: Leases, slot: int,
                 held: bool, stopping: threading.Event, counts: tally.SlotTally) -> None:
        assert config.idempotency_window is not None
        self.config = config
        self.store = store
        self.leases = leases
        self.owner = f"{config.worker_id}#{slot}"
        self.held = "1" if held else "0"
        self.window_ms = int(config.idempotency_window * 1000)
        self.stopping = stopping
        self.counts = counts
        """The slot's metrics (duplicates and deferrals)."""

    def claim(self, raw_entry: str) -> Verdict | None:
        """What to do with `raw_entry` (claim.lua, retried through Redis errors); None when
        the worker stops before Redis answered."""
        entry = keys.Entry.decode(raw_entry)
        tid, queue = entry_identity(entry), entry.queue
        s = self.config.schema
        verdict: Verdict | None = self._retry("claim.lua", lambda: self.store.script(
            "claim", [self.store.processing, s.done(tid), s.running(tid), s.delayed, s.stats,
                      s.flow_state],
            [raw_entry, self.owner, lease_ms(self.config), self.held, now_ms(), MAX_DEFER_MS]))
        if verdict == "run":
            self.leases.add(s.running(tid), self.owner)
        elif verdict == "done":
            self.counts.queue(queue).duplicate += 1
            log.info("task %s already done: acked without running", tid,
                     extra={"task_id": tid, "queue": queue})
        elif verdict == "deferred":
            self.counts.queue(queue).deferred += 1
            log.info("task %s is running elsewhere: deferred", tid,
                     extra={"task_id": tid, "queue": queue})
        return verdict

    def complete(self, raw_entry: str) -> bool:
        """Mark done + drop the lease + ack (retried through Redis errors)."""
        tid = entry_identity(keys.Entry.decode(raw_entry))
        s = self.config.schema
        acked = self._retry("complete.lua", lambda: self.store.script(
            "complete", [self.store.processing, s.done(tid), s.running(tid), s.stats,
                         s.flow_state],
            [raw_entry, self.owner, self.window_ms, now_ms(), self.held]))
        self.leases.remove(s.running(tid))
        if acked is None:
            log.error("task %s finished but could not be marked done; it may run again", tid,
                      extra={"task_id": tid})
        return bool(acked)

    def release(self, raw_entry: str) -> None:
        """Drop our lease after a failed attempt."""
        key = self.config.schema.running(entry_identity(keys.Entry.decode(raw_entry)))
        self._retry("lease.lua", lambda: self.store.script("lease", [key], ["0", self.owner]))
        self.leases.remove(key)

    def _retry(self, what: str, call: Callable[[], Any]) -> Any:
        """call() until Redis takes it (any Redis error is retried with backoff); None after
        `lastcalls.DRAIN_ATTEMPTS` failures once the worker stops."""
        tries = 0

        def wait(seconds: float) -> bool:
            nonlocal tries
            tries += 1
            if self.stopping.is_set() and tries >= lastcalls.DRAIN_ATTEMPTS:
                return True
            time.sleep(seconds)
            return False

        try:
            return backoff.retry(call, what=f"{self.owner}: {what}", log=log, wait=wait,
                                 retry_on=REDIS_ERRORS)
        except backoff.GaveUpError:
            return None


class LeaseKeeper:
    """Refreshes this process's running leases every heartbeat, from its own thread (a
    `periodic.Periodic`: Redis errors are retried with backoff of at most one heartbeat, well
    within the three a lease lives)."""

    def __init__(self, *, config: WorkerConfig, leases: Leases) -> None:
        self.config = config
        self.leases = leases
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id)
        period = config.heartbeat_seconds
        self.loop = Periodic(name="leases", what="lease refresh", step=self._step,
                             stop=threading.Event(), first_wait=period,
                             cap=min(backoff.CAP_SECONDS, period))

    def stop(self) -> None:
        self.loop.halt()
        self.store.close()

    def refresh(self) -> int:
        held = self.leases.snapshot()
        if not held:
            return 0
        reply = self.store.script("lease", list(held), [lease_ms(self.config), *held.values()])
        return expect(reply, int, what="lease.lua")

    def _step(self) -> float:
        self.refresh()
        return self.config.heartbeat_seconds
