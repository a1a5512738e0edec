"""Promotion of the delayed zset (scheduled tasks and retries): one thread per worker, the only
caller that promotes (`store.Store.promote`; the fetches that take tasks never do).

The thread reads the earliest due time (`ZRANGE <prefix>:delayed 0 0 WITHSCORES`), sleeps until
then (at most `POLL_SECONDS`, so an entry scheduled a moment ahead is still seen), and runs
fetch.lua with COUNT 0 (promote only). A sleep that ends at the head's due time is followed by
the promotion at once, without reading the head again: between a task's due time and its
handler the path is one timed wake-up and one round trip, then the fetch. After a promotion
the thread wakes the worker's idle fetcher itself (`on_promoted`: `Wakeup.bump`), one thread
hop sooner than the tracking push, which the promotion's write of the queue key also sends (it
wakes the other workers, and a blocking pop returns). Every worker runs one; the script is
atomic, so only one of them moves a given entry. The thread is a `periodic.Periodic`: any Redis
error (an error from inside fetch.lua included) is logged and retried with backoff, at most
`RETRY_CAP_SECONDS` apart, and the runner watches it. A fault of promotion (an ACL refusal, a
delayed key of another type) therefore delays only scheduled tasks, never the fetches.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.periodic import Periodic
from taskqueue.worker.store import Store, now_ms

POLL_SECONDS = 0.25
"""Longest sleep between two reads of the earliest due time (bounds the lateness of an entry
scheduled less than this far ahead)."""
RETRY_CAP_SECONDS = 1.0
"""Longest wait between two tries while Redis fails: a scheduled task is at most about this
late once Redis serves again (a try is one ZRANGE)."""


def sleep_for(next_due_ms: float | None, now: int, *, poll: float = POLL_SECONDS) -> float:
    """Seconds to sleep before the next promotion check: until the due time's whole ms (the
    promotion moves what is due at Redis's ms), at most `poll`. Pure."""
    if next_due_ms is None:
        return poll
    return max(0.0, min(poll, (math.ceil(next_due_ms) - now) / 1000))


class Promoter:
    """The promotion thread of one worker process; it ends when the worker stops."""

    def __init__(self, *, config: WorkerConfig, stopping: threading.Event,
                 on_promoted: Callable[[], None] | None = None) -> None:
        self.config = config
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, tracking=config.tracking)
        self.on_promoted = on_promoted
        """Called after each promotion of a due head (the worker's idle fetcher wakes)."""
        self.promotions = 0
        self.head_reads = 0
        """ZRANGEs of the head so far (a sleep that ends at its due time reads none)."""
        self.awaited: int | None = None
        """The head's due time (whole ms) the current sleep ends at; None: a `POLL_SECONDS`
        sleep, or none."""
        self.loop = Periodic(name="promoter", what="promotion", step=self.step, stop=stopping,
                             cap=RETRY_CAP_SECONDS, close=self.store.close)

    def step(self) -> float:
        """Promote what is due; the seconds to sleep before the next check."""
        awaited, self.awaited = self.awaited, None
        now = now_ms()
        if awaited is not None:
            if awaited > now:  # woke before the due time: sleep the rest
                self.awaited = awaited
                return (awaited - now) / 1000
            return self._promote()
        due = self.store.next_due_ms()
        self.head_reads += 1
        now = now_ms()
        if due is not None and due <= now:
            return self._promote()
        wait = sleep_for(due, now)
        if due is not None and wait < POLL_SECONDS:
            self.awaited = math.ceil(due)
        return wait

    def _promote(self) -> float:
        self.store.promote()
        self.promotions += 1
        if self.on_promoted is not None:
            self.on_promoted()
        return 0.0
