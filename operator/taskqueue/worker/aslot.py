"""Consume slots for a coroutine handler: tasks on the process's one event loop, no thread per
slot.

With `handler: "pkg.mod:fn"` an `async def` (and no idempotency window), a worker in the
dispatcher modes ("held", "unheld") runs `concurrency` `AsyncSlot`s instead of thread slots:
the dispatcher delivers entries through `loop.call_soon_threadsafe`, each delivery becomes an
asyncio task on the shared loop (`handlers.shared_loop()`), and when it has run its entries the
slot posts its acks back to the dispatcher from the loop. `concurrency: 100` is 100 coroutines
on one thread. Redis calls a task may need besides the fetch (fail.lua after a failure, the
give-back on drain, the final ack after the dispatcher closed) run in a worker thread
(`asyncio.to_thread`), so the loop never blocks on Redis.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from taskqueue.worker import drain, handlers
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.dispatch import Dispatcher
from taskqueue.worker.execute import Executor
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import Store

log = logging.getLogger(__name__)


class AsyncSlot:
    """One slot of a coroutine handler; `ended` is set once it has stopped for good."""

    def __init__(self, *, config: WorkerConfig, handler: handlers.AsyncHandler,
                 state: WorkerState, dispatcher: Dispatcher, index: int) -> None:
        self.config = config
        self.handler = handler
        self.state = state
        self.dispatcher = dispatcher
        self.held = config.delivery == "AtLeastOnce"
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, wait_replicas=config.wait_replicas)
        self.executor = Executor(config=config, handler=handler, store=self.store,
                                 stopping=state.stopping, name=f"slot-{index}")
        self.name = f"slot-{index}"
        self.want = 1
        self.acks: list[str] = []
        self.ended = threading.Event()
        self.crashed = False
        self._loop = handlers.shared_loop()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop.call_soon_threadsafe(self._post)

    def deliver(self, entries: list[str] | None) -> None:
        """From the dispatcher thread: entries to run, or None when the worker stops."""
        self._loop.call_soon_threadsafe(self._begin, entries)

    # -- on the loop ------------------------------------------------------------------------
    def _begin(self, entries: list[str] | None) -> None:
        if entries is None:
            self._end()
            return
        self._task = self._loop.create_task(self._work(entries), name=self.name)

    async def _work(self, entries: list[str]) -> None:
        try:
            for i, entry in enumerate(entries):
                if self.state.stopping.is_set() and self.held:
                    await asyncio.to_thread(self._give_back, entries[i:])
                    break
                ok = await self.executor.run_async(entry, held=self.held, handler=self.handler)
                if not self.held:
                    continue
                if ok:
                    self.acks.append(entry)
                else:
                    self.state.unhold([entry])
        except asyncio.CancelledError:
            if not self.executor.abandoned.is_set():
                raise
            self.ended.set()  # abandoned at the end of the grace period: nothing to post
            return
        except BaseException:
            # a bug outside the handler: the slot stops, the worker exits with status 3 and
            # recovery requeues what it held (as a thread slot that dies)
            log.exception("%s: unexpected error; the slot stops and the worker exits", self.name)
            self.crashed = True
            self.ended.set()
            raise
        self._post()

    def abandon(self) -> None:
        """From any thread, once the grace period is over: cancel the coroutine still running
        (its task is given back by the worker, not failed). In a process the exit would end it;
        an embedding application's loop would otherwise run it on, beside its redelivery."""
        self.executor.abandoned.set()
        self._loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def _post(self) -> None:
        if self.dispatcher.finished(self, self.acks):
            self.acks = []
            return
        self._task = self._loop.create_task(self._finish(), name=self.name)

    async def _finish(self) -> None:
        """The dispatcher has closed: ack on our own connection, then end."""
        await asyncio.to_thread(self._flush_acks)
        self._end()

    def _end(self) -> None:
        self.ended.set()

    # -- in a worker thread -----------------------------------------------------------------
    def _give_back(self, entries: list[str]) -> None:
        drain.give_back(self.store, self.state, entries, name=self.name)

    def _flush_acks(self) -> None:
        self.acks = drain.flush_acks(self.store, self.state, self.acks, name=self.name)
