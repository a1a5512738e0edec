"""One worker process: registration, the consume slots, the dispatcher that fetches and acks
for them, the wake-up listener, the heartbeat, the promoter, the lease keeper, and the drain on
stop. Which of them run, and who fetches, is the worker's plan (`plan.plan_for`), decided once
here from the settings and the handler. Usable in-process (tests, benchmarks): `start()`,
`stop()`, `join()`; `run_until_signal()` is the process (with the watchdog, which may end it:
`watchdog.py`).

The parts only some plans use are imported by the plans that use them: the `flow` thread
(`flowwatch`, for the blocking pops), the watchdog (from the start for a watched event loop,
else once the drain begins), the coroutine slots (`aslot`). A worker pays the start-up of no
module it does not run.

Drain: stop taking tasks, let the tasks in hand finish within the grace period, give back the
prefetched ones and whatever could not finish (attempts unchanged), then leave the workers set
(only when nothing is held any more; otherwise the heartbeat expires and recovery requeues).

Every long-lived thread is watched (`threads`): one that ends while the worker is not stopping is
a bug, and the process drains and exits with `EXIT_THREAD_DIED`.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import signal
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING

from taskqueue.worker import backoff, handlers, resp, wrongtype
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.dispatch import Dispatcher
from taskqueue.worker.handlers import AsyncHandler, Handler
from taskqueue.worker.heartbeat import Heartbeat
from taskqueue.worker.idempotency import LeaseKeeper, Leases
from taskqueue.worker.lifecycle import Lifecycle
from taskqueue.worker.plan import plan_for
from taskqueue.worker.promoter import Promoter
from taskqueue.worker.slot import Slot
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import REDIS_ERRORS, Store
from taskqueue.worker.wakeup import Wakeup

if TYPE_CHECKING:  # imported by the plans that run them only (start-up time)
    from taskqueue.worker.aslot import AsyncSlot, Bridge
    from taskqueue.worker.flowwatch import FlowWatch
    from taskqueue.worker.watchdog import Watchdog

log = logging.getLogger(__name__)

EXIT_THREAD_DIED = 3
"""Exit status of a worker one of whose long-lived threads ended (a bug): restart it. Tasks a
dead slot held stay in the processing list; the heartbeat then expires and recovery requeues."""
ABANDON_WAIT_SECONDS = 1.0
"""After the grace period, how long the cancelled coroutines get to unwind (all together)
before their tasks are given back."""


class Worker:
    """The threads of one worker process."""

    def __init__(self, config: WorkerConfig, *, handler: Handler) -> None:
        self.config = config
        self.state = WorkerState()
        plan = self.plan = plan_for(config, coroutine_handler=isinstance(handler, AsyncHandler))
        self.wakeup = (Wakeup(url=config.redis_url, queue_keys=config.schema.wakeup_keys)
                       if plan.dispatched else None)
        self.heartbeat = Heartbeat(config=config)
        self.promoter = Promoter(config=config, stopping=self.state.stopping,
                                 on_promoted=self.wakeup.bump if self.wakeup else None)
        self.lifecycle = Lifecycle(url=config.redis_url, schema=config.schema,
                                   worker_id=config.worker_id,
                                   heartbeat_seconds=config.heartbeat_seconds,
                                   seen=self.state.cancels, watch=not plan.dispatched)
        """Hears cancels for the running tasks and writes their progress reports."""
        self.flow_watch: FlowWatch | None = None
        """Keeps `state.flow` fresh: the pauses the blocking pops leave out (their plans only:
        fetch.lua reads the flow hashes itself)."""
        if not plan.dispatched:
            from taskqueue.worker.flowwatch import FlowWatch

            self.flow_watch = FlowWatch(url=config.redis_url, schema=config.schema,
                                        worker_id=config.worker_id, seen=self.state.flow,
                                        stopping=self.state.stopping)
        leases = Leases() if plan.leases else None
        self.lease_keeper = (LeaseKeeper(config=config, leases=leases)
                             if leases is not None else None)
        self.dispatcher = (Dispatcher(config=config, state=self.state, wakeup=self.wakeup,
                                      held=plan.held)
                           if self.wakeup is not None else None)
        self.slots: list[Slot] = []
        self.async_slots: list[AsyncSlot] = []
        """Slots of a coroutine handler: asyncio tasks on one loop instead of threads."""
        self.bridge: Bridge | None = None
        if plan.slots == "coroutines":
            from taskqueue.worker.aslot import AsyncSlot, Bridge

            assert self.dispatcher is not None and isinstance(handler, AsyncHandler)
            bridge = self.bridge = Bridge(dispatcher=self.dispatcher)
            self.async_slots = [AsyncSlot(config=config, held=plan.held, handler=handler,
                                          state=self.state, bridge=bridge, index=i)
                                for i in range(config.concurrency)]
        else:
            inbox: queue.SimpleQueue[list[str] | None] = queue.SimpleQueue()
            self.slots = [Slot(config=config, plan=plan, handler=handler, state=self.state,
                               dispatcher=self.dispatcher, index=i, leases=leases,
                               inbox=inbox)
                          for i in range(config.concurrency)]
        self.stopped = threading.Event()
        self.watchdog: Watchdog | None = self._watchdog() if plan.watch_loop else None
        """Started by `run_until_signal` only: it may end the process. Made here when it
        watches the event loop (`plan.watch_loop`), else when the drain begins."""

    def _watchdog(self) -> Watchdog:
        from taskqueue.worker.watchdog import Watchdog

        return Watchdog(handler=self.config.handler, task_timeout=self.config.task_timeout,
                        grace=self.config.grace_seconds, stopping=self.state.stopping,
                        abandon=self.abandon, in_fetch=self._loop_in_fetch)

    def _loop_in_fetch(self) -> bool:
        return self.bridge is not None and self.bridge.fetching

    def start(self) -> None:
        """Register (requeueing what an earlier process with our id left), then consume."""
        self._register()
        # what is due already is promoted before the first fetch, so it is served by its
        # priority at once; a failure is the promoter thread's to meet again and log
        with contextlib.suppress(*REDIS_ERRORS):
            self.promoter.step()
        # the first blocking pops know the pauses
        if self.flow_watch is not None:
            with contextlib.suppress(*REDIS_ERRORS):
                self.flow_watch.step()
        if self.plan.loop:
            handlers.shared_loop()
        if self.wakeup is not None:
            self.wakeup.start()
        self.heartbeat.loop.start()
        self.promoter.loop.start()
        self.lifecycle.loop.start()
        if self.flow_watch is not None:
            self.flow_watch.loop.start()
        if self.lease_keeper is not None:
            self.lease_keeper.loop.start()
        inline = [slot for slot in self.slots if slot.inline]
        for slot in self.slots:
            if not slot.inline:
                slot.thread.start()
        for aslot in self.async_slots:
            aslot.start()
        if self.dispatcher is not None:
            self.dispatcher.start(ready=inline)  # the inline slot runs on its thread
        log.info("worker %s consuming %s (%s, concurrency %d, prefetch %d; %s)",
                 self.config.worker_id, ", ".join(self.config.schema.queue_keys),
                 self.config.delivery, self.config.concurrency, self.config.prefetch,
                 self.plan.describe(), extra={"worker_id": self.config.worker_id})

    def _register(self) -> None:
        def register() -> None:
            requeued, dead = self.heartbeat.store.recover(
                worker_id=self.config.worker_id, max_attempts=self.config.max_attempts,
                reason=f"worker {self.config.worker_id} restarted")
            if requeued or dead:
                log.warning("requeued %d task(s) left by an earlier run of %s", requeued,
                            self.config.worker_id)
            self.heartbeat.beat()
            wrongtype.check(self.heartbeat.store, self.state.skips)

        with contextlib.suppress(backoff.GaveUpError):  # stopped before Redis could be reached
            # an ACL refusal is not transient: the worker does not start, naming the command
            backoff.retry(register, what="registering with Redis", log=log,
                          wait=self.state.stopping.wait, retry_on=REDIS_ERRORS,
                          fatal=(resp.NoPermissionError,))

    def stop(self) -> None:
        """Stop taking tasks (idle slots return at once); `join()` drains."""
        self.state.stopping.set()
        if self.wakeup is not None:
            self.wakeup.stop()
        if self.dispatcher is not None:
            self.dispatcher.stop()

    def join(self, *, grace: float | None = None) -> None:
        """Wait for the slots up to the grace period, give back the rest, deregister."""
        deadline = time.monotonic() + (self.config.grace_seconds if grace is None else grace)
        dispatcher = self.dispatcher
        if dispatcher is not None and dispatcher.thread.is_alive():
            dispatcher.thread.join(max(0.0, deadline - time.monotonic()))
        for slot in self.slots:
            if slot.thread.is_alive():
                slot.thread.join(max(0.0, deadline - time.monotonic()))
        for aslot in self.async_slots:
            aslot.ended.wait(max(0.0, deadline - time.monotonic()))
        busy_dispatcher = dispatcher is not None and dispatcher.thread.is_alive()
        stuck: list[Slot | AsyncSlot] = [
            slot for slot in self.slots
            if slot.thread.is_alive() or (slot.inline and busy_dispatcher)]
        abandoned = [aslot for aslot in self.async_slots if not aslot.ended.is_set()]
        for aslot in abandoned:
            aslot.abandon()
        unwound = time.monotonic() + ABANDON_WAIT_SECONDS
        for aslot in abandoned:
            aslot.ended.wait(max(0.0, unwound - time.monotonic()))
        stuck += abandoned
        if stuck:
            self._give_back_stuck(stuck)
        self.heartbeat.stop()
        self.lifecycle.loop.halt()
        if self.lease_keeper is not None:
            self.lease_keeper.stop()
        self._deregister()
        self.stopped.set()

    def _give_back_stuck(self, stuck: list[Slot | AsyncSlot]) -> None:
        store = Store(url=self.config.redis_url, schema=self.config.schema,
                      worker_id=self.config.worker_id, tracking=self.config.tracking)
        try:
            acks = [a for slot in stuck for a in slot.ledger.acks]
            if acks:
                store.ack(acks, held=self.plan.held)
                self.state.unhold(acks)
            # only the stuck slots hold entries now: give back all that is left
            n = store.release(store.held_entries())
            log.warning("grace period over: gave back %d unfinished task(s)", n)
        except REDIS_ERRORS as exc:
            log.error("could not give back unfinished tasks (%s); recovery will", exc)
        finally:
            store.close()

    def _deregister(self) -> None:
        store = Store(url=self.config.redis_url, schema=self.config.schema,
                      worker_id=self.config.worker_id, tracking=self.config.tracking)
        try:
            if not store.deregister():
                log.warning("tasks still held: leaving the heartbeat to expire for recovery")
        except REDIS_ERRORS as exc:
            log.warning("could not deregister (%s); the heartbeat will expire", exc)
        finally:
            store.close()

    def abandon(self, reason: str) -> None:
        """For a process about to exit because a handler stalled it: take nothing more, and
        requeue everything this worker holds as a recovery would (attempts + 1, `reason` in a
        dead-letter record), with no fetch in flight meanwhile."""
        self.stop()
        self.heartbeat.loop.stop.set()  # no beat after the requeue: peers find nothing to do
        store = Store(url=self.config.redis_url, schema=self.config.schema,
                      worker_id=self.config.worker_id, tracking=self.config.tracking)
        try:
            with self.state.fetch_lock:
                requeued, dead = store.recover(worker_id=self.config.worker_id,
                                               max_attempts=self.config.max_attempts,
                                               reason=reason)
            log.warning("requeued %d task(s) with attempts + 1, dead-lettered %d", requeued,
                        dead)
        except REDIS_ERRORS as exc:
            log.error("could not requeue this worker's tasks (%s); recovery will once its "
                      "heartbeat expires", backoff.describe(exc))
        finally:
            store.close()

    def threads(self) -> list[threading.Thread]:
        """The long-lived threads (`plan.threads`); each must live until the worker stops
        (the watchdog's counts once `run_until_signal` started it; one started for the drain
        is not long-lived)."""
        loops = [self.heartbeat.loop, self.promoter.loop, self.lifecycle.loop]
        if self.flow_watch is not None:
            loops.append(self.flow_watch.loop)
        if self.watchdog is not None and self.plan.watch_loop:
            loops.append(self.watchdog.loop)
        if self.lease_keeper is not None:
            loops.append(self.lease_keeper.loop)
        threads = [loop.thread for loop in loops]
        if self.wakeup is not None:
            threads.append(self.wakeup.loop.thread)
        if self.dispatcher is not None:
            threads.append(self.dispatcher.thread)
        threads += [slot.thread for slot in self.slots if not slot.inline]
        started = handlers.started_loop() if self.plan.loop else None
        if started is not None:
            threads.append(started[1])
        return threads

    def dead_threads(self) -> list[str]:
        """Names of long-lived threads that ended although the worker is not stopping."""
        if self.state.stopping.is_set():
            return []
        dead = [t.name for t in self.threads() if t.ident is not None and not t.is_alive()]
        return dead + [aslot.name for aslot in self.async_slots if aslot.crashed]

    def run_until_signal(self) -> int:
        """start() with the watchdog, then drain on SIGTERM/SIGINT. Exit status 0 after a
        drain; EXIT_THREAD_DIED when a long-lived thread ended on its own (the pod restarts
        instead of idling on). The watchdog ends the process itself when a handler holds the
        event loop past the task timeout or the drain overruns the grace period."""
        got = threading.Event()

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log.info("signal %d: draining", signum)
            got.set()
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start()
        if self.watchdog is not None:
            self.watchdog.loop.start()
        status = 0
        while not got.wait(1.0):
            dead = self.dead_threads()
            if dead:
                log.critical("thread(s) %s ended unexpectedly: draining and exiting with "
                             "status %d so the worker is restarted", ", ".join(dead),
                             EXIT_THREAD_DIED)
                status = EXIT_THREAD_DIED
                self.stop()
                break
        watchdog = self.watchdog
        if watchdog is None:  # a drain must end: watched from now on
            watchdog = self.watchdog = self._watchdog()
            watchdog.loop.start()
        self.join()
        watchdog.loop.stop.set()
        log.info("worker %s stopped", self.config.worker_id)
        return status
