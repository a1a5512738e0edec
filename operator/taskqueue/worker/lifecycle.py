"""The worker's side of a task's life: cancels reaching running tasks, and progress reports.

`RUNNING` registers each running task that has an id (`start`/`end`, a dict insert and
delete on the task path; nothing else). A cancel (cancel.lua) is PUBLISHed on the TaskQueue's
cancel channel; the `Lifecycle` thread holds a subscribed connection, so a running task hears
of its cancel within a round trip: `Control.cancel` sets the event a sync handler sees
(`ctx.cancelled`), cancels an async handler's asyncio task, and signals a command's process
group (`handlers.run_command`). On every (re)subscription the thread reads the cancels zset,
so a cancel published while it was not subscribed still reaches a task that is running; one
that arrives just before its task registers is kept a minute (`EARLY_SECONDS`) and applied at
`start`. Queued and delayed tasks never reach a worker: fetch.lua drops them.

Progress (`ctx.progress`) is kept in memory and written by the same thread at most once per
`PROGRESS_EVERY_SECONDS` into the worker's `<prefix>:progress:<worker id>` hash (task id ->
`wire.lifecycle.Progress` JSON), which expires with the worker; a finished task's report is
deleted with the next write. No report, no write.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from taskqueue.wire import keys, lifecycle
from taskqueue.worker import resp
from taskqueue.worker.periodic import Periodic
from taskqueue.worker.resp import pack
from taskqueue.worker.store import Store, connect

log = logging.getLogger(__name__)

EARLY_SECONDS = 60.0
"""How long a cancel heard for a task not running here is kept (it may be starting now)."""
EARLY_MAX = 10_000
PROGRESS_EVERY_SECONDS = 1.0
"""The throttle of progress writes: at most one HSET per worker per this many seconds."""
READ_SECONDS = 0.25
"""How long the thread waits for a cancel before it looks at the progress reports again."""

_event_lock = threading.Lock()


class Control:
    """What the worker can do to one running task: cancel it, read its progress."""

    __slots__ = ("_callbacks", "_event", "cancelled_flag", "id", "progress", "reported")

    def __init__(self, task_id: str) -> None:
        self.id = task_id
        self.cancelled_flag = False
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[], None]] = []
        self.progress: lifecycle.Progress | None = None
        self.reported = False

    @property
    def event(self) -> threading.Event:
        """Set when the task is cancelled (made on first use: most handlers never look)."""
        with _event_lock:
            if self._event is None:
                self._event = threading.Event()
                if self.cancelled_flag:
                    self._event.set()
            return self._event

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the task is cancelled (now, if it is already)."""
        with _event_lock:
            if not self.cancelled_flag:
                self._callbacks.append(callback)
                return
        callback()

    def cancel(self) -> None:
        with _event_lock:
            if self.cancelled_flag:
                return
            self.cancelled_flag = True
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a process already gone, a loop already closed
                log.debug("cancel callback of task %s failed", self.id, exc_info=True)

    def report(self, fraction: float | None, message: str) -> None:
        self.progress = lifecycle.Progress(fraction=lifecycle.progress_fraction(fraction),
                                           message=str(message)[:500], at=time.time())
        self.reported = True
        RUNNING.changed(self.id)


class Running:
    """The running tasks of this process, by id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, Control] = {}
        self._early: dict[str, float] = {}
        self._changed: set[str] = set()
        self._ended: set[str] = set()

    def start(self, task_id: str) -> Control:
        control = Control(task_id)
        if not task_id:
            return control
        with self._lock:
            self._tasks[task_id] = control
            early = self._early.pop(task_id, None) if self._early else None
        if early is not None:
            control.cancel()
        return control

    def end(self, control: Control) -> None:
        if not control.id:
            return
        with self._lock:
            if self._tasks.get(control.id) is control:
                del self._tasks[control.id]
            if control.reported:
                self._changed.discard(control.id)
                self._ended.add(control.id)

    def cancel(self, task_id: str, *, early: bool = True) -> bool:
        """Cancel `task_id` if it runs here (True); else keep it for EARLY_SECONDS when
        `early`, in case it is starting now."""
        with self._lock:
            control = self._tasks.get(task_id)
            if control is None and early:
                now = time.monotonic()
                if len(self._early) >= EARLY_MAX:
                    self._early = {k: t for k, t in self._early.items()
                                   if now - t < EARLY_SECONDS}
                self._early[task_id] = now
        if control is None:
            return False
        control.cancel()
        return True

    def changed(self, task_id: str) -> None:
        with self._lock:
            if task_id in self._tasks:
                self._changed.add(task_id)

    def progress_changes(self) -> tuple[dict[str, str], list[str]]:
        """The reports to write (task id -> JSON) and the finished tasks' to delete."""
        with self._lock:
            changed, self._changed = self._changed, set()
            ended, self._ended = list(self._ended), set()
            reports = {tid: c.progress.encode() for tid in changed
                       if (c := self._tasks.get(tid)) is not None and c.progress is not None}
        return reports, ended

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._tasks)


RUNNING = Running()
"""The running tasks of this process (one registry: the executors start and end them)."""


class Lifecycle:
    """The thread that hears cancels (pub/sub) and writes progress reports."""

    def __init__(self, *, url: str, schema: keys.KeySchema, worker_id: str,
                 heartbeat_seconds: float, running: Running = RUNNING) -> None:
        self._url = url
        self._schema = schema
        self._running = running
        self._progress_key = schema.progress(worker_id)
        self._progress_ttl_ms = int(max(10.0, 3 * heartbeat_seconds) * 1000)
        self._store = Store(url=url, schema=schema, worker_id=worker_id)
        self._sub: resp.Connection | None = None
        self._next_write = 0.0
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
        return 0.0

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
            if self._running.cancel(tid):
                log.info("task %s cancelled: stopping it", tid, extra={"task_id": tid})

    def _write_progress(self) -> None:
        now = time.monotonic()
        if now < self._next_write:
            return
        reports, ended = self._running.progress_changes()
        if not reports and not ended:
            return
        self._next_write = now + PROGRESS_EVERY_SECONDS
        if ended:
            self._store.call("HDEL", self._progress_key, *ended)
        if reports:
            self._store.call("HSET", self._progress_key,
                             *[x for pair in reports.items() for x in pair])
            self._store.call("PEXPIRE", self._progress_key, self._progress_ttl_ms)

    def _drop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            sub.close()

    def _close(self) -> None:
        self._drop()
        self._store.close()
