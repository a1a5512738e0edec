"""Consume slots for a coroutine handler: tasks on the process's one event loop, no thread per
slot.

With `handler: "pkg.mod:fn"` an `async def`, a worker whose plan says "coroutines"
(`plan.plan_for`: the dispatcher fetches, no idempotency window) runs `concurrency` `AsyncSlot`s
instead of thread slots: each delivery becomes an asyncio task on the shared loop
(`handlers.shared_loop()`), and when it has run its entries the slot posts its acks back to the
dispatcher from the loop.
`concurrency: 100` is 100 coroutines on one thread. Both ways cross between the dispatcher's
thread and the loop's in batches (`Bridge`): the deliveries of one fetch wake the loop once, and
the slots that finish in one loop iteration wake the dispatcher once, so a task costs a fraction
of a thread wake-up, not two. When the last coroutines running finish, the loop makes that
fetch itself instead of waking the dispatcher (`Dispatcher.finished_many`): one round
trip on the loop while none of our coroutines runs (a failed call is waited out there too;
dry queues are left to the dispatcher thread). Every other Redis call a task may need (fail.lua
after a failure, the give-back on drain, the final ack after the dispatcher closed) runs in a
worker thread (`asyncio.to_thread`), so a running coroutine never waits for Redis.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from taskqueue.worker import handlers, lastcalls
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.dispatch import Dispatcher
from taskqueue.worker.execute import Executor
from taskqueue.worker.ledger import Ledger
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import Store

log = logging.getLogger(__name__)


class Bridge:
    """Carries deliveries (dispatcher thread -> loop) and posts (loop -> dispatcher) for all
    the async slots of a worker, each way in batches: one `call_soon_threadsafe` for whatever
    the dispatcher handed out before the loop took it, and one `Dispatcher.finished_many` for
    the slots that finished in one loop iteration."""

    def __init__(self, *, dispatcher: Dispatcher,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.dispatcher = dispatcher
        self.loop = loop or handlers.shared_loop()
        self._lock = threading.Lock()
        self._inbound: list[tuple[AsyncSlot, list[str] | None]] = []
        self._posts: list[AsyncSlot] = []
        """Slots that finished and wait for this iteration's post (touched on the loop only)."""
        self.fetching = False
        """The loop is in the worker's own fetch (a slow Redis holds it, not a handler: the
        watchdog does not count it)."""

    def deliver(self, slot: AsyncSlot, entries: list[str] | None) -> None:
        """From the dispatcher thread; the loop is woken only by the first of a batch."""
        with self._lock:
            self._inbound.append((slot, entries))
            first = len(self._inbound) == 1
        if first:
            self.loop.call_soon_threadsafe(self._take_inbound)

    def _take_inbound(self) -> None:
        with self._lock:
            batch, self._inbound = self._inbound, []
        for slot, entries in batch:
            slot.begin(entries)

    def post(self, slot: AsyncSlot) -> None:
        """On the loop: `slot` ran its entries and wants more (its acks go with it)."""
        self._posts.append(slot)
        if len(self._posts) == 1:
            self.loop.call_soon(self._flush_posts)

    def _flush_posts(self) -> None:
        slots, self._posts = self._posts, []
        acks = [a for slot in slots for a in slot.ledger.acks]
        # when these were the last coroutines running, the loop makes the fetch itself (one
        # round trip; no coroutine of ours is running to be held up) instead of waking the
        # dispatcher; its deliveries reach the slots on the next iteration
        self.fetching = True
        try:
            taken = self.dispatcher.finished_many(slots, acks)
        finally:
            self.fetching = False
        if taken:
            for slot in slots:
                slot.ledger.acks = []
            return
        for slot in slots:  # the dispatcher has closed: each acks on its own connection
            slot.finish_alone()


class AsyncSlot:
    """One slot of a coroutine handler; `ended` is set once it has stopped for good."""

    def __init__(self, *, config: WorkerConfig, held: bool, handler: handlers.AsyncHandler,
                 state: WorkerState, bridge: Bridge, index: int) -> None:
        self.config = config
        self.handler = handler
        self.state = state
        self.bridge = bridge
        self.held = held
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, wait_replicas=config.wait_replicas,
                           tracking=config.tracking)
        self.executor = Executor(config=config, handler=handler, store=self.store,
                                 stopping=state.stopping, name=f"slot-{index}")
        self.name = f"slot-{index}"
        self.want = 1
        self.ledger = Ledger(held=held, state=state, done_marks=config.tracking)
        self.ended = threading.Event()
        self.crashed = False
        self._loop = bridge.loop
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop.call_soon_threadsafe(self.bridge.post, self)

    def deliver(self, entries: list[str] | None) -> None:
        """From the dispatcher thread: entries to run, or None when the worker stops."""
        self.bridge.deliver(self, entries)

    # -- on the loop ------------------------------------------------------------------------
    def begin(self, entries: list[str] | None) -> None:
        if entries is None:
            self._end()
            return
        self._task = self._loop.create_task(self._work(entries), name=self.name)

    async def _work(self, entries: list[str]) -> None:
        ledger = self.ledger
        try:
            for entry in ledger.entries(entries):
                ok = await self.executor.run_async(entry, held=self.held, handler=self.handler,
                                                   current=self._task)
                ledger.ran(entry, ack=ok)
            if ledger.unrun:
                await asyncio.to_thread(self._give_back, ledger.take_unrun())
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
        self.bridge.post(self)

    def abandon(self) -> None:
        """From any thread, once the grace period is over: cancel the coroutine still running
        (its task is given back by the worker, not failed). In a process the exit would end it;
        an embedding application's loop would otherwise run it on, beside its redelivery."""
        self.executor.abandoned.set()
        self._loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def finish_alone(self) -> None:
        """The dispatcher has closed before taking this slot's post: ack, then end."""
        self._task = self._loop.create_task(self._finish(), name=self.name)

    async def _finish(self) -> None:
        """The dispatcher has closed: ack on our own connection, then end."""
        await asyncio.to_thread(self._flush_acks)
        self._end()

    def _end(self) -> None:
        self.ended.set()

    # -- in a worker thread -----------------------------------------------------------------
    def _give_back(self, entries: list[str]) -> None:
        lastcalls.give_back(self.store, self.state, entries, name=self.name)

    def _flush_acks(self) -> None:
        self.ledger.acks = lastcalls.flush_acks(self.store, self.state, self.ledger.acks,
                                                name=self.name, held=self.ledger.held)
