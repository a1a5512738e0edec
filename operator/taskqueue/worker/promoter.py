"""On-time promotion of the delayed zset (scheduled tasks and retries): one thread per worker.

The consume slots promote due entries as a side effect of their fetch (busy slots every 50 ms,
idle slots every sweep second), which alone would start a scheduled task up to a second late.
This thread reads the earliest due time (`ZRANGE <prefix>:delayed 0 0 WITHSCORES`), sleeps
until then (at most `POLL_SECONDS`, so an entry scheduled a moment ahead is still seen), and
runs fetch.lua with COUNT 0 (promote only). The promotion writes the queue key, so the
tracking push wakes idle slots at once. Every worker runs one; the script is atomic, so only
one of them moves a given entry.
"""

from __future__ import annotations

import logging
import random
import threading

from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.store import CONNECTION_ERRORS, Store, now_ms

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
"""Longest sleep between two reads of the earliest due time (bounds the lateness of an entry
scheduled less than this far ahead)."""


def sleep_for(next_due_ms: float | None, now: int, *, poll: float = POLL_SECONDS) -> float:
    """Seconds to sleep before the next promotion check. Pure."""
    if next_due_ms is None:
        return poll
    return max(0.0, min(poll, (next_due_ms - now) / 1000))


class Promoter:
    """The promotion thread of one worker process."""

    def __init__(self, *, config: WorkerConfig, stopping: threading.Event) -> None:
        self.config = config
        self.stopping = stopping
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id)
        self.promotions = 0
        self.thread = threading.Thread(target=self.run, name="promoter", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def run(self) -> None:
        delay = 0.05
        while not self.stopping.is_set():
            try:
                wait = self.step()
                delay = 0.05
            except CONNECTION_ERRORS as exc:
                log.warning("promoter: Redis unavailable (%s)", exc)
                wait = delay * random.uniform(0.5, 1.0)
                delay = min(delay * 2, 5.0)
            if wait > 0:
                self.stopping.wait(wait)
        self.store.close()

    def step(self) -> float:
        """Promote what is due; the seconds to sleep before the next check."""
        head = self.store.call("ZRANGE", self.config.schema.delayed, 0, 0, "WITHSCORES")
        now = now_ms()
        if head and float(head[1]) <= now:
            self.store.fetch(acks=(), count=0, hold=False)
            self.promotions += 1
            return 0.0
        return sleep_for(float(head[1]) if head else None, now)
