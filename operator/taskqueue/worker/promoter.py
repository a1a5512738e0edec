"""Promotion of the delayed zset (scheduled tasks and retries): one thread per worker, the only
caller that promotes (`store.Store.promote`; the fetches that take tasks never do).

The thread reads the earliest due time (`ZRANGE <prefix>:delayed 0 0 WITHSCORES`), sleeps until
then (at most `POLL_SECONDS`, so an entry scheduled a moment ahead is still seen), and runs
fetch.lua with COUNT 0 (promote only). The promotion writes the queue key, so the tracking push
wakes idle slots at once, and a blocking pop returns. Every worker runs one; the script is
atomic, so only one of them moves a given entry. The thread is a `periodic.Periodic`: any Redis
error (an error from inside fetch.lua included) is logged and retried with backoff, at most
`RETRY_CAP_SECONDS` apart, and the runner watches it. A fault of promotion (an ACL refusal, a
delayed key of another type) therefore delays only scheduled tasks, never the fetches.
"""

from __future__ import annotations

import threading

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
    """Seconds to sleep before the next promotion check. Pure."""
    if next_due_ms is None:
        return poll
    return max(0.0, min(poll, (next_due_ms - now) / 1000))


class Promoter:
    """The promotion thread of one worker process; it ends when the worker stops."""

    def __init__(self, *, config: WorkerConfig, stopping: threading.Event) -> None:
        self.config = config
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, tracking=config.tracking)
        self.promotions = 0
        self.loop = Periodic(name="promoter", what="promotion", step=self.step, stop=stopping,
                             cap=RETRY_CAP_SECONDS, close=self.store.close)

    def step(self) -> float:
        """Promote what is due; the seconds to sleep before the next check."""
        due = self.store.next_due_ms()
        now = now_ms()
        if due is not None and due <= now:
            self.store.promote()
            self.promotions += 1
            return 0.0
        return sleep_for(due, now)
