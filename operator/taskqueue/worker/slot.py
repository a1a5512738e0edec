"""One consume slot: a thread that runs tasks, one at a time.

A worker runs `concurrency` slots; the plan (`plan.Plan.slots`) says how they get entries:
- "threads": the process's dispatcher (`dispatch.Dispatcher`) fetches for all ready slots in
  one fetch.lua call and delivers each its entries; the slot runs them and posts the successful
  ones back as acks, which ride on the next call. The slot makes no Redis call of its own on
  the task path (the last slot to become ready may make the dispatcher's call, for all:
  dispatch.py). The thread slots of a worker share one inbox: the dispatcher fetches one
  delivery per ready slot, and whichever slot asks next runs it. A slot that finishes while
  deliveries wait takes one at once instead of blocking, so with short tasks the thread that
  holds the GIL runs the next task and the woken ones find nothing (a hand-over between threads
  costs more than a no-op task); the process never holds more than the ready slots asked for.
- "inline": the one slot has no thread: the dispatcher thread runs its entries (`deliver`), so
  a task costs no hand-over between threads.
- "blocking": the slot waits in a blocking pop over the keys in priority order itself, the
  paused ones left out (`flowseen`: a pop cannot read the flow hashes; a pause holds from the
  next pop, within `flowwatch.CHECK_SECONDS` + `BLOCK_SECONDS`).
Failures (fail.lua), give-backs on drain and idempotency scripts go over the slot's own `Store`,
connected on first use; what the slot owes Redis for its entries is its `ledger.Ledger`.
"""

from __future__ import annotations

import logging
import queue
import threading

from taskqueue.worker import lastcalls
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.dispatch import Dispatcher
from taskqueue.worker.execute import Executor
from taskqueue.worker.fetching import Fetching
from taskqueue.worker.handlers import Handler
from taskqueue.worker.idempotency import Guard, Leases
from taskqueue.worker.ledger import Ledger
from taskqueue.worker.plan import Plan
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import Store

log = logging.getLogger(__name__)

BLOCK_SECONDS = 0.5
"""Longest blocking pop, so an idle AtMostOnce slot notices a stop quickly."""


class Slot:
    """The consume loop of one slot; `run()` returns once the worker stops."""

    def __init__(self, *, config: WorkerConfig, plan: Plan, handler: Handler,
                 state: WorkerState, dispatcher: Dispatcher | None, index: int,
                 leases: Leases | None = None,
                 inbox: queue.SimpleQueue[list[str] | None] | None = None) -> None:
        self.config = config
        self.plan = plan
        self.state = state
        self.dispatcher = dispatcher
        self.held = plan.held
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, wait_replicas=config.wait_replicas,
                           tracking=config.tracking)
        self.executor = Executor(config=config, handler=handler, store=self.store,
                                 stopping=state.stopping, name=f"slot-{index}",
                                 check_cancels=plan.fetch in ("brpop", "bzpopmin"),
                                 cancels=state.cancels)
        self.ledger = Ledger(held=self.held, state=state, done_marks=config.tracking)
        self.guard = None if leases is None else Guard(
            config=config, store=self.store, leases=leases, slot=index, held=self.held,
            stopping=state.stopping, counts=self.executor.counts)
        self.index = index
        self.want = 1
        self.inline = plan.slots == "inline"
        """Run on the dispatcher's thread (`deliver` runs the entries); `thread` is not used."""
        self._inbox: queue.SimpleQueue[list[str] | None] = (
            queue.SimpleQueue() if inbox is None else inbox)
        """Deliveries (None: end); shared by the worker's thread slots (one get per post)."""
        self.thread = threading.Thread(target=self.run, name=f"slot-{index}", daemon=True)

    def deliver(self, entries: list[str] | None) -> None:
        """From the dispatcher: entries to run, or None when the worker stops, for the next
        slot that asks (the inbox is shared). An inline slot runs them here, on the
        dispatcher's thread, and posts itself ready again."""
        if not self.inline:
            self._inbox.put(entries)
            return
        if entries is None:
            self.store.close()
            return
        self._work(entries)
        assert self.dispatcher is not None
        if self.dispatcher.finished(self, self.ledger.acks):  # ready again, with the acks
            self.ledger.acks = []
        else:  # the dispatcher has closed: the acks go over our own connection
            self._flush_acks()

    def run(self) -> None:
        try:
            if self.dispatcher is not None:
                self._run_dispatched(self.dispatcher)
            else:
                self._run_blocking()
        except BaseException:
            # a bug outside the handler (which cannot end the thread) and Redis (retried):
            # carrying on could leave held tasks behind a live heartbeat, so the thread ends,
            # the worker exits with status 3, and recovery requeues what this slot held
            log.exception("%s: unexpected error; the slot stops and the worker exits",
                          self.thread.name)
            raise
        self._flush_acks()
        self.store.close()

    def _run_dispatched(self, dispatcher: Dispatcher) -> None:
        """Post ready with the acks, run what comes, again; once the dispatcher has closed,
        the acks go over our own connection (`run`)."""
        inbox, ledger = self._inbox, self.ledger
        while dispatcher.finished(self, ledger.acks):
            ledger.acks = []
            entries = inbox.get()
            if entries is None:
                return
            self._work(entries)

    def _run_blocking(self) -> None:
        fetching = Fetching(store=self.store, state=self.state, name=self.thread.name,
                            held=False)
        while not self.state.stopping.is_set():
            entries = fetching.attempt(self._pop_blocking)
            if entries:
                self._work(entries)

    def _pop_blocking(self) -> list[str]:
        entry = self.store.pop_blocking(zset=self.plan.fetch == "bzpopmin",
                                        timeout=min(BLOCK_SECONDS, self.config.sweep_seconds),
                                        paused=self.state.flow.paused)
        return [entry] if entry is not None else []

    def _work(self, entries: list[str]) -> None:
        ledger = self.ledger
        for entry in ledger.entries(entries):
            if self.guard is not None:
                self._work_idempotent(entry)
                continue
            ledger.ran(entry, ack=self.executor.run(entry, held=self.held))
        if ledger.unrun:
            self.give_back(ledger.take_unrun())

    def _work_idempotent(self, entry: str) -> None:
        """claim -> run -> complete (done marker + ack in one script) or drop the lease; see
        `taskqueue.worker.idempotency`."""
        guard = self.guard
        assert guard is not None
        verdict = guard.claim(entry)
        if verdict is None:  # stopping while Redis was unreachable: not run
            self.give_back([entry])
            return
        if verdict == "run":
            if self.executor.run(entry, held=self.held):
                guard.complete(entry)
            else:
                guard.release(entry)
        self.ledger.ran(entry, ack=False)  # the scripts acked or moved it

    def give_back(self, entries: list[str]) -> None:
        """Release entries this slot will not run (drain), attempts unchanged."""
        if self.held and entries:
            lastcalls.give_back(self.store, self.state, entries, name=self.thread.name)

    def _flush_acks(self) -> None:
        """Ack on our own connection what the dispatcher can no longer take (it closed)."""
        self.ledger.acks = lastcalls.flush_acks(self.store, self.state, self.ledger.acks,
                                                name=self.thread.name, held=self.held)
