"""The running tasks of this worker process, by id (`RUNNING`): what a cancel or a progress
report reaches. Plain state and locks, no I/O: `taskqueue.worker.lifecycle` hears the cancels
and writes the reports; the executors `start` and `end` each task (a dict insert and delete on
the task path, nothing else); `handlers.TaskContext` hands a task's `Control` to its handler.

A cancel that arrives just before its task registers is kept `EARLY_SECONDS` and applied at
`start` (the executor then does not run the handler). `CancelsSeen` is what a worker that pops
with BRPOP/BZPOPMIN (AtMostOnce, `plan.fetch_mode`) knows of its TaskQueue's cancels zset: such
a worker skips fetch.lua (which drops cancelled tasks itself) and asks Redis (ZSCORE) about a
task it took only while `pending` is set, so nothing is asked per task while nobody cancels.
The progress record (`wire.lifecycle.Progress`) is imported by the first report: a worker whose
handlers report none does not load the records of a task's life (start-up time).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by the first progress report (its records are start-up time)
    from taskqueue.wire import lifecycle

log = logging.getLogger(__name__)

EARLY_SECONDS = 60.0
"""How long a cancel heard for a task not running here is kept (it may be starting now)."""
EARLY_MAX = 10_000
_event_lock = threading.Lock()


class Control:
    """What the worker can do to one running task: cancel it, read its progress. One is made
    per task: only the id is set on the instance, the rest starts from the class's defaults
    and is set on the few tasks that are cancelled, report progress or run as a coroutine."""

    cancelled_flag = False
    coroutine: Any = None
    """The asyncio task running a coroutine handler (set and cleared on its loop by the
    executor): a cancel cancels it on the loop while it is set."""
    coroutine_cancelled = False
    """Set on the loop when a cancel reached `coroutine`."""
    progress: lifecycle.Progress | None = None
    reported = False
    _event: threading.Event | None = None
    _callbacks: tuple[Callable[[], None], ...] = ()

    def __init__(self, task_id: str) -> None:
        self.id = task_id

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
        """Call `callback` when the task is cancelled (now, if it is already); never for a task
        without an id (`NO_ID`)."""
        if not self.id:
            return
        with _event_lock:
            if not self.cancelled_flag:
                self._callbacks = (*self._callbacks, callback)
                return
        callback()

    def cancel(self) -> None:
        with _event_lock:
            if self.cancelled_flag:
                return
            self.cancelled_flag = True
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, ()
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a process already gone, a loop already closed
                log.debug("cancel callback of task %s failed", self.id, exc_info=True)
        coroutine = self.coroutine
        if coroutine is not None:
            try:
                coroutine.get_loop().call_soon_threadsafe(self._cancel_coroutine)
            except RuntimeError:  # the loop is closed: the worker is gone
                log.debug("cancel of task %s: its loop is closed", self.id)

    def _cancel_coroutine(self) -> None:
        """On the coroutine's loop: cancel it if the handler still runs."""
        coroutine = self.coroutine
        if coroutine is not None:
            self.coroutine_cancelled = True
            coroutine.cancel()

    def report(self, fraction: float | None, message: str) -> None:
        from taskqueue.wire import lifecycle

        self.progress = lifecycle.Progress(fraction=lifecycle.progress_fraction(fraction),
                                           message=str(message)[:500], at=time.time())
        self.reported = True
        RUNNING.changed(self.id)


NO_ID = Control("")
"""The control of every task without an id (a raw payload): no cancel can name it, so it is
never registered, keeps no callback, and the progress it is told is not shown (nothing to show
it under). One for all: no object per task."""


class CancelsSeen:
    """Whether the worker's TaskQueue may hold a cancel (one per worker, `state.WorkerState`;
    kept by the lifecycle thread of a blocking-pop worker only)."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending = True
        """The cancels zset may hold a cancel not yet expired: set by the lifecycle thread when
        it hears one, and read again every `lifecycle.WATCH_SECONDS`; True until the first
        read. A single attribute store, read without a lock. While it is False, blocking-pop
        executors do not ask about their tasks."""


class Running:
    """The running tasks of this process, by id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, Control] = {}
        self._early: dict[str, float] = {}
        self._changed: set[str] = set()
        self._ended: set[str] = set()

    def start(self, task_id: str) -> Control:
        if not task_id:
            return NO_ID
        control = Control(task_id)
        self._tasks[task_id] = control  # one dict store: atomic, no lock on the task path
        if self._early:
            with self._lock:
                early = self._early.pop(task_id, None)
            if early is not None:
                control.cancel()
        return control

    def end(self, control: Control) -> None:
        tasks = self._tasks
        if not control.reported:  # as `start`: one dict delete, no lock on the task path
            if tasks.get(control.id) is control:
                tasks.pop(control.id, None)
            return
        with self._lock:
            if tasks.get(control.id) is control:
                del tasks[control.id]
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

    def any_progress(self) -> bool:
        """Whether a running task has reported progress."""
        with self._lock:
            return any(c.progress is not None for c in self._tasks.values())

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._tasks)


RUNNING = Running()
"""The running tasks of this process (one registry: the executors start and end them)."""
