"""The worker's side of a task's life: cancels reaching running tasks, and progress reports.

`running.RUNNING` registers each running task that has an id. A cancel (cancel.lua) is
PUBLISHed on the TaskQueue's cancel channel; the `Lifecycle` thread holds a subscribed
connection, so a running task hears of its cancel within a round trip: `Control.cancel` sets
the event a sync handler sees (`ctx.cancelled`), cancels an async handler's asyncio task, and
signals a command's process group (`handlers.run_command`). On every (re)subscription the
thread reads the cancels zset, so a cancel published while it was not subscribed still reaches
a task that is running. Queued and delayed tasks never reach a worker: fetch.lua drops them (it
reads the zset only when it exists: one EXISTS with the flow keys); a cancel heard for a task
that is not running here yet (its fetch reply on its way back) is kept by `running.RUNNING` and
stops the task before its handler is called. A worker that pops with BRPOP/BZPOPMIN skips
fetch.lua and checks each task it took instead, only while the zset may hold a cancel
(`running.CancelsSeen.pending`): for such a worker (`watch`) this thread keeps that flag, set by a
cancel heard and read again every WATCH_SECONDS, so a TaskQueue nobody cancels in pays nothing
per task for cancels. A worker that fetches with fetch.lua reads nothing of the zset here after
it subscribed.

Progress (`ctx.progress`) is kept in memory and written by the same thread at most once per
`PROGRESS_EVERY_SECONDS` into the worker's `<prefix>:progress:<worker id>` hash (task id ->
`wire.lifecycle.Progress` JSON), which expires with the worker; a finished task's report is
deleted with the next write. No report, no write.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from taskqueue.wire import keys
from taskqueue.worker import resp
from taskqueue.worker.periodic import Periodic
from taskqueue.worker.resp import pack
from taskqueue.worker.running import RUNNING, CancelsSeen, Running
from taskqueue.worker.store import Store, connect

log = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 1.0
"""The throttle of progress writes: at most one HSET per worker per this many seconds."""
READ_SECONDS = 0.25
"""How long the thread waits for a cancel before it looks at the progress reports again."""
WATCH_SECONDS = 1.0
"""How often the thread looks whether the cancels zset holds a cancel (`CancelsSeen`)."""


class Lifecycle:
    """The thread that hears cancels (pub/sub) and writes progress reports."""

    def __init__(self, *, url: str, schema: keys.KeySchema, worker_id: str,
                 heartbeat_seconds: float, seen: CancelsSeen, watch: bool,
                 running: Running = RUNNING) -> None:
        self._url = url
        self._seen = seen
        self.watch = watch
        """Keep `seen.pending` (a blocking-pop worker's executors read it)."""
        self._next_look = 0.0
        self._schema = schema
        self._running = running
        self._progress_key = schema.progress(worker_id)
        self._progress_ttl_ms = int(max(10.0, 3 * heartbeat_seconds) * 1000)
        self._store = Store(url=url, schema=schema, worker_id=worker_id)
        self._sub: resp.Connection | None = None
        self._next_write = 0.0
        self._next_keep = 0.0
        self.loop = Periodic(name="lifecycle", what="cancel subscription / progress write",
                             step=self._step, stop=threading.Event(), close=self._close)

    def _step(self) -> float:
        sub = self._sub
        if sub is None:
            sub = self._subscribe()
        try:
            message = sub.read(timeout=READ_SECONDS)
        except TimeoutError:
            message = None
        except BaseException:
            self._drop()
            raise
        if message is not None:
            self._heard(message)
        self._write_progress()
        if self.watch:
            self._look_at_cancels()
        return 0.0

    def _look_at_cancels(self) -> None:
        """Every WATCH_SECONDS, whether the cancels zset holds a cancel not yet expired
        (`CancelsSeen.pending`); a cancel heard sets it at once (`_heard`)."""
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + WATCH_SECONDS
        some = self._store.call("ZRANGEBYSCORE", self._schema.cancels, int(time.time() * 1000),
                                "+inf", "LIMIT", 0, 1)
        self._seen.pending = bool(some)

    def _subscribe(self) -> resp.Connection:
        sub = connect(self._url, key=self._schema.cancels)
        try:
            sub.send(pack(["SUBSCRIBE", self._schema.cancel_channel]))
            sub.read()
        except BaseException:
            sub.close()
            raise
        self._sub = sub
        # cancels published while this thread was not subscribed
        now_ms = int(time.time() * 1000)
        for tid in self._store.call("ZRANGEBYSCORE", self._schema.cancels, now_ms, "+inf"):
            self._running.cancel(str(tid), early=False)
        return sub

    def _heard(self, message: Any) -> None:
        if isinstance(message, list) and len(message) == 3 and message[0] == "message":
            tid = str(message[2])
            self._seen.pending = True
            if self._running.cancel(tid):
                log.info("task %s cancelled: stopping it", tid, extra={"task_id": tid})

    def _write_progress(self) -> None:
        """Write the changed reports and delete the ended tasks' (at most once per
        PROGRESS_EVERY_SECONDS); while a running task has a report, keep the hash from
        expiring, so a report made once at the start stays visible until the task ends (the
        TTL only clears the reports of a worker that died)."""
        now = time.monotonic()
        if now < self._next_write:
            return
        reports, ended = self._running.progress_changes()
        keep = not reports and now >= self._next_keep and self._running.any_progress()
        if not reports and not ended and not keep:
            return
        self._next_write = now + PROGRESS_EVERY_SECONDS
        if ended:
            self._store.call("HDEL", self._progress_key, *ended)
        expire = ("PEXPIRE", self._progress_key, self._progress_ttl_ms)
        if reports:
            # with its TTL in one transaction: never seen, or left by a crash, without it
            self._store.transaction(
                ("HSET", self._progress_key, *[x for pair in reports.items() for x in pair]),
                expire)
        elif keep:
            self._store.call(*expire)
        if reports or keep:
            self._next_keep = now + self._progress_ttl_ms / 3000

    def _drop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            sub.close()

    def _close(self) -> None:
        self._drop()
        self._store.close()
