"""Running one task: unwrap the entry, call the handler, and on failure retry or dead-letter.

`Executor.run` returns True when the task succeeded (the caller acks it with its next fetch)
and False when the attempt failed and was handed to fail.lua (retry in the delayed zset with
backoff, or the dead-letter list once `max_attempts` attempts are spent). An element that
starts like an envelope but breaks its rules (`keys.unwrap` names the problem) is not run: it
goes to the dead-letter list at once, byte for byte, with the problem as its error.

A handler that forks without exec and returns in the child would bring the worker's code back
to life in that child, on copies of the parent's Redis connections: a child process that comes
back from a handler ends at once (`os._exit`), before the worker touches Redis.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from taskqueue.telemetry import tally
from taskqueue.wire import keys
from taskqueue.worker import backoff, servicetime
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.handlers import AsyncHandler, Handler, TaskContext
from taskqueue.worker.logs import task_extra
from taskqueue.worker.running import NO_ID, RUNNING, CancelsSeen, Control
from taskqueue.worker.store import REDIS_ERRORS, Store, now_ms

log = logging.getLogger("taskqueue.worker.task")

FORKED_CHILD_EXIT = 70
"""Exit status of a child process that came back from a handler (EX_SOFTWARE)."""
_forked = False
"""True in a child process forked after this module was imported."""


def _in_child() -> None:
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_in_child)


def leave_forked_child(name: str) -> None:
    """End this process at once: it is a child a handler forked and did not exec or end."""
    log.error("%s: the handler forked and returned in the child process %d without exec or "
              "os._exit; the child exits with status %d before it could use the worker's "
              "Redis connections", name or threading.current_thread().name, os.getpid(),
              FORKED_CHILD_EXIT)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(FORKED_CHILD_EXIT)


def _settle(control: Control, current: Any) -> bool:
    """On the loop, once a coroutine handler has returned or raised: end the window in which a
    cancel reaches its asyncio task (`running.Control.coroutine`) and say whether one did,
    taking back the asyncio cancellation so the slot's later awaits are not hit."""
    control.coroutine = None
    if control.coroutine_cancelled:
        while current.cancelling():
            current.uncancel()
        return True
    return False


@dataclass
class Executor:
    """Runs tasks for one consume slot (uses that slot's `Store`)."""

    config: WorkerConfig
    handler: Handler
    store: Store
    stopping: threading.Event
    name: str = ""
    """The slot's name in log lines (default: the running thread's)."""
    rng: random.Random = field(default_factory=random.Random)
    abandoned: threading.Event = field(default_factory=threading.Event)
    """Set when the grace period is over and a coroutine still running is cancelled: its
    CancelledError is then not a failure of the task (the worker gives the task back)."""
    check_cancels: bool = False
    """Tasks come from a blocking pop, not fetch.lua: drop a cancelled one here, unrun."""
    cancels: CancelsSeen = field(default_factory=CancelsSeen)
    """Whether the cancels zset may hold a cancel (`check_cancels` asks only then)."""
    counts: tally.SlotTally = field(default_factory=tally.WORKER.slot)
    """This slot's metrics (plain numbers, summed when /metrics is scraped)."""
    service: servicetime.SlotTotals = field(init=False)
    """This slot's share of the worker's service-time totals."""

    def __post_init__(self) -> None:
        self.service = servicetime.of(self.config.worker_id).slot()

    def run(self, raw_entry: str, *, held: bool) -> bool:
        entry, task = self._read(raw_entry)
        if task.problem:
            self._refuse(raw_entry, entry, task, held=held)
            return False
        if (self.check_cancels and task.id and self.cancels.pending
                and self._cancel_recorded(task)):
            self._cancelled(raw_entry, TaskContext(id=task.id, queue=entry.queue,
                                                   attempt=task.attempts + 1), held=held)
            return False
        ctx, m = self._begin(entry, task)
        started = self.service.begin(ctx)
        try:
            if not ctx.control.cancelled_flag:  # a cancel heard before the task started
                self.handler(task.payload, ctx)
        except BaseException as exc:
            if _forked:
                leave_forked_child(self.name)
            if ctx.control.cancelled_flag:
                self._cancelled(raw_entry, ctx, held=held)
            else:
                self._failed(raw_entry, entry, task, ctx, exc, held=held)
            return False
        finally:
            self._end(m, entry.queue, started, ctx)
        if _forked:
            leave_forked_child(self.name)
        if ctx.control.cancelled_flag:
            self._cancelled(raw_entry, ctx, held=held)
            return False
        self._succeeded(m, ctx)
        return True

    async def run_async(self, raw_entry: str, *, held: bool, handler: AsyncHandler,
                        current: Any = None) -> bool:
        """`run` for a coroutine handler, awaited on the event loop; the failure path (fail.lua
        with retries) runs in a worker thread so the loop never waits for Redis. `current`: the
        asyncio task this runs in, when the caller knows it (else looked up)."""
        import asyncio  # loaded already: the loop runs (not imported by synchronous workers)

        entry, task = self._read(raw_entry)
        if task.problem:
            await asyncio.to_thread(self._refuse, raw_entry, entry, task, held=held)
            return False
        ctx, m = self._begin(entry, task)
        started = self.service.begin(ctx)
        current = (current or asyncio.current_task()) if task.id else None  # no id: no cancel
        ctx.control.coroutine = current  # a cancel from now on cancels it (on the loop)
        cancelled_before = ctx.control.cancelled_flag  # a cancel heard before the task started
        try:
            if not cancelled_before:
                await handler.run(task.payload, ctx)
        except BaseException as exc:
            if _forked:
                leave_forked_child(self.name)
            if isinstance(exc, asyncio.CancelledError) and self.abandoned.is_set():
                raise  # the grace period is over: the worker gives the task back
            if current is not None and _settle(ctx.control, current):
                await asyncio.to_thread(self._cancelled, raw_entry, ctx, held=held)
                return False
            await asyncio.to_thread(self._failed, raw_entry, entry, task, ctx, exc, held=held)
            return False
        finally:
            self._end(m, entry.queue, started, ctx)
        if _forked:
            leave_forked_child(self.name)
        if (current is not None and _settle(ctx.control, current)) or cancelled_before:
            await asyncio.to_thread(self._cancelled, raw_entry, ctx, held=held)
            return False
        self._succeeded(m, ctx)
        return True

    @staticmethod
    def _read(raw_entry: str) -> tuple[keys.Entry, keys.Task]:
        entry = keys.Entry.decode(raw_entry)  # fetch.lua built it: always an entry
        return entry, keys.unwrap(entry.element)  # a raw payload: as it is, attempt 1, no id

    def _begin(self, entry: keys.Entry, task: keys.Task,
               ) -> tuple[TaskContext, tally.QueueTally]:
        m = self.counts.queue(entry.queue)
        # a task without an id (a raw payload) cannot be cancelled: not registered
        ctx = TaskContext(id=task.id, queue=entry.queue, attempt=task.attempts + 1,
                          enqueued_at=task.enqueued_at, traceparent=task.traceparent,
                          control=RUNNING.start(task.id) if task.id else NO_ID)
        if task.enqueued_at and not task.attempts:
            waited = max(0.0, time.time() - task.enqueued_at)
            m.pickup.observe(waited)
            self.service.waited(entry.queue, waited)  # the operator's late share
        m.started += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("task started", extra=self._extra(ctx))
        self.counts.running += 1
        return ctx, m

    def _end(self, m: tally.QueueTally, queue: str, started: float, ctx: TaskContext) -> None:
        if ctx.id:
            RUNNING.end(ctx.control)
        self.counts.running -= 1
        self.service.end(ctx)
        elapsed = time.perf_counter() - started
        m.duration.observe(elapsed)
        self.service.add(queue, elapsed)  # the operator's wait model

    def _succeeded(self, m: tally.QueueTally, ctx: TaskContext) -> None:
        m.succeeded += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("task succeeded", extra=self._extra(ctx))

    def _extra(self, ctx: TaskContext) -> dict[str, object]:
        return task_extra(task_id=ctx.id, queue=ctx.queue, attempt=ctx.attempt,
                          worker_id=self.config.worker_id)

    def _failed(self, raw_entry: str, entry: keys.Entry, task: keys.Task, ctx: TaskContext,
                exc: BaseException, *, held: bool) -> None:
        error = backoff.describe(exc)
        q = self.counts.queue(entry.queue)
        q.failed += 1
        dead = ctx.attempt >= self.config.max_attempts
        if dead:
            value = keys.dead_letter_record(entry=entry, task=task, attempts=ctx.attempt,
                                            error=error, failed_at=now_ms() / 1000)
            due = 0
        else:
            element = keys.rewrap(task, attempts=ctx.attempt)
            value = keys.Entry(entry.queue, entry.score, element).encode()
            due = now_ms() + int(1000 * backoff.delay(
                attempts=ctx.attempt, base=self.config.backoff_seconds,
                cap=self.config.max_backoff_seconds, rng=self.rng))
        extra = {**self._extra(ctx), "error": error}
        if not self._apply_fail(raw_entry, dead=dead, value=value, due=due, held=held):
            log.warning("task failed; left for recovery: %s", error, extra=extra)
            return
        if dead:
            q.dead_lettered += 1
            log.error("task failed for good, dead-lettered to %s: %s",
                      self.config.schema.dead_letter, error, extra=extra)
        else:
            q.retried += 1
            log.warning("task failed, retry in %.2fs: %s", max(0, due - now_ms()) / 1000,
                        error, extra=extra)

    def _cancel_recorded(self, task: keys.Task) -> bool:
        """Whether the cancels zset holds `task` (ZSCORE; a Redis error: not known, so run)."""
        try:
            return self.store.call("ZSCORE", self.config.schema.cancels, task.id) is not None
        except REDIS_ERRORS as exc:
            log.warning("could not look for a cancel of task %s (%s); running it", task.id,
                        backoff.describe(exc), extra={"task_id": task.id})
            return False

    def _cancelled(self, raw_entry: str, ctx: TaskContext, *, held: bool) -> None:
        """A cancelled task stopped (or finished anyway): cancelled.lua, never retried."""
        extra = self._extra(ctx)
        self.counts.queue(ctx.queue).cancelled += 1
        try:
            applied = backoff.retry(
                lambda: self.store.cancelled(entry=raw_entry, held=held, task_id=ctx.id),
                what=f"{self.name or threading.current_thread().name}: recording a cancelled "
                     "task (cancelled.lua)",
                log=log, wait=self.stopping.wait, retry_on=REDIS_ERRORS)
        except backoff.GaveUpError:
            applied = False
        if applied:
            log.info("task cancelled", extra=extra)
        else:
            log.warning("cancelled task left for recovery (no longer held or the worker "
                        "stopped)", extra=extra)

    def _refuse(self, raw_entry: str, entry: keys.Entry, task: keys.Task, *,
                held: bool) -> None:
        """Dead-letter an element that cannot be run (`task.problem`), unrun, attempts 0."""
        value = keys.dead_letter_record(entry=entry, task=task, attempts=0, error=task.problem,
                                        failed_at=now_ms() / 1000)
        extra = {**task_extra(task_id="", queue=entry.queue, attempt=0,
                              worker_id=self.config.worker_id), "error": task.problem}
        if not self._apply_fail(raw_entry, dead=True, value=value, due=0, held=held):
            log.warning("unreadable task left for recovery: %s", task.problem, extra=extra)
            return
        self.counts.queue(entry.queue).dead_lettered += 1
        log.error("unreadable task dead-lettered to %s unrun: %s",
                  self.config.schema.dead_letter, task.problem, extra=extra)

    def _apply_fail(self, raw_entry: str, *, dead: bool, value: str, due: int,
                    held: bool) -> bool:
        """fail.lua, retried with backoff through any Redis error (connection loss, OOM, BUSY,
        READONLY...); False when the worker stops first (the task is left for recovery)."""
        try:
            return backoff.retry(
                lambda: self.store.fail(entry=raw_entry, held=held, dead=dead, value=value,
                                        due_ms=due),
                what=f"{self.name or threading.current_thread().name}: recording a failed "
                     "task (fail.lua)",
                log=log, wait=self.stopping.wait, retry_on=REDIS_ERRORS)
        except backoff.GaveUpError:
            return False
