"""The batched fetch/ack path of one worker process (modes "held" and "unheld").

One thread owns the process's fetch connection. Slots only run handlers: a slot that finished
its entries posts them as acks and itself as ready (`finished`), and the dispatcher, per
wake-up, sends ONE fetch.lua call that acks everything finished since the last call and takes
up to one task per ready slot (`prefetch` per slot that found work last time), then hands each
slot its entries. At concurrency 8 with a backlog that is about one round trip per 8 tasks
instead of 8, and no slot thread touches Redis on the task path.

Delivery is unchanged: the script moves an entry into the processing list in the same atomic
call that takes it, and the dispatcher asks only for what ready slots will run at once; with
prefetch 1 an entry sits in the processing list only while a slot is about to run it (or has
run it and its ack rides on the next call, as before).

Last one leads: a thread slot that finishes when every other slot is ready too (and nobody is
fetching, and the queues are not dry) makes the call itself (`finished(..., lead=True)`), on
its own thread, instead of waking the dispatcher (coroutine slots: the event loop, when the
last coroutines running finish; none of ours is then on the loop to be held up). Waking
another thread costs more than a short task (50-80 us a hand-over on a 2-vCPU VM:
bench/worker/handover.py), and the leader then takes its next entry from the shared inbox
without blocking. The batch is then as large as it can be: every slot is in it, and no
handler runs while the leader waits for Redis. One fetcher at a time (`_fetching`, under
`cond`): the dispatcher thread or the leader; whoever it is owns the fetch connection and the
ready list for that cycle. Errors and dry queues are left to the dispatcher thread (the
leader marks them; the dispatcher calls again after the backoff, or waits for a push).

Idle: when a call came back with fewer tasks than asked, the queues were dry; the dispatcher
waits for a tracking push (`Wakeup.idle`, same arming rule as before) or for a slot to finish.
After a push, a worker holding no task waits `PACK_DELAY_SECONDS` first (packing, issue 11), unless
it is the TaskQueue's only registered worker: then nobody else could take the task, and the wait
would only add to the idle pickup latency.

Drain: on stop the dispatcher acks what was posted in one last call and tells every slot to
end; a slot still running posts afterwards and then acks its own entries (`finished` returns
False).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from taskqueue.worker import lastcalls
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.fetching import Fetching
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import REDIS_ERRORS, Store
from taskqueue.worker.wakeup import Token, Wakeup

log = logging.getLogger(__name__)

PROMOTE_SECONDS = 0.05
"""A busy worker asks fetch.lua to promote due retries this often (not on every call)."""
PACK_DELAY_SECONDS = 0.005
"""After a wake-up, a worker that holds no task waits this long before it fetches, so an idle
slot of a busy worker takes the task: work packs onto fewer pods and fully idle pods remain for
the operator to remove (a task that only an idle pod can take waits this much more)."""
WAIT_SECONDS = 1.0
"""Longest wait for a slot while all are busy (a stop also wakes the wait)."""


class Receiver(Protocol):
    """A slot as the dispatcher sees it."""

    want: int
    """Entries to ask for on its behalf (1 when idle, `prefetch` after it found work)."""

    def deliver(self, entries: list[str] | None) -> None:
        """Hand over entries to run; None: the worker stops."""


def share(wants: Sequence[int], n: int) -> list[int]:
    """How many of `n` fetched entries each ready slot gets, in order (the first slots are
    served in full). Pure."""
    out = []
    for want in wants:
        take = min(want, n)
        out.append(take)
        n -= take
    return out


def others_registered(store: Store) -> bool:
    """Whether a worker other than `store`'s is registered on its TaskQueue (one ZCARD of the
    workers zset); True when Redis cannot say, so that packing errs on the fleet's side."""
    try:
        return int(store.call("ZCARD", store.schema.workers)) > 1
    except REDIS_ERRORS:
        return True


class Dispatcher:
    """The fetch/ack thread of one worker process."""

    def __init__(self, *, config: WorkerConfig, state: WorkerState, wakeup: Wakeup) -> None:
        self.config = config
        self.state = state
        self.wakeup = wakeup
        self.held = config.delivery == "AtLeastOnce"
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, wait_replicas=config.wait_replicas)
        self.fetching = Fetching(store=self.store, state=state, name="dispatch",
                                 held=self.held)
        self.cond = wakeup.cond
        self.calls = 0
        """fetch.lua calls made for slots (tests, benchmarks)."""
        self._posted: list[Receiver] = []
        self._acks: list[str] = []
        self._ready: list[Receiver] = []
        """Slots waiting for entries; changed only by the fetcher of the moment."""
        self._closed = False
        self._fetching = False
        """A fetch cycle is running (the dispatcher thread's or a leader's)."""
        self._dry: Token | None = None
        """The last call found the queues dry: the dispatcher waits for a push after this."""
        self._retry = False
        """The last call failed (backoff waited): the dispatcher thread calls again."""
        self._flow_wait = 0.0
        """The dry call was held back by a rate limit: seconds until its next task may start
        (the dispatcher sleeps that long instead of waiting for a push)."""
        self._next_promote = 0.0
        self.thread = threading.Thread(target=self.run, name="dispatch", daemon=True)

    # -- called by slots --------------------------------------------------------------------
    def finished(self, slot: Receiver, acks: Sequence[str], *, lead: bool = False) -> bool:
        """`slot` ran its entries (`acks`: the successful ones, AtLeastOnce) and wants more.
        False once the dispatcher has closed: the slot acks on its own. With `lead` (a thread
        slot), the caller makes the fetch itself when it is the last slot to become ready
        (see the module docstring)."""
        return self.finished_many((slot,), acks, lead=lead)

    def finished_many(self, slots: Sequence[Receiver], acks: Sequence[str], *,
                      lead: bool = False) -> bool:
        """`finished` for several slots at once (`acks`: all of theirs), one wake-up; with
        `lead`, the call is made here when these were the last slots to become ready."""
        with self.cond:
            if self._closed:
                return False
            self._acks.extend(acks)
            self._posted.extend(slots)
            if not (lead and self._may_lead()):
                self.cond.notify_all()
                return True
            self._fetching = True
        try:
            self._fetch_cycle()
        finally:
            with self.cond:
                self._fetching = False
                self.cond.notify_all()
        return True

    def _may_lead(self) -> bool:
        """Under `cond`: every slot is ready, nobody fetches, and the dispatcher thread has no
        dry queues or failed call to see to."""
        return (not self._fetching and self._dry is None and not self._retry
                and len(self._posted) + len(self._ready) >= self.config.concurrency
                and not self.state.stopping.is_set())

    def stop(self) -> None:
        with self.cond:
            self.cond.notify_all()

    # -- the dispatcher thread --------------------------------------------------------------
    def run(self) -> None:
        try:
            while not self.state.stopping.is_set():
                self._cycle()
        except BaseException:
            log.exception("dispatch: unexpected error; the worker exits")
            raise
        finally:
            self._close()

    def _take_posted(self) -> list[str]:
        with self.cond:
            posted, self._posted = self._posted, []
            acks, self._acks = self._acks, []
        self._ready.extend(posted)
        return acks

    def _cycle(self) -> None:
        """Wait for work that is the dispatcher thread's (posts nobody leads, dry queues, a
        failed call), then be the fetcher for it."""
        with self.cond:
            self.cond.wait_for(self._my_turn, WAIT_SECONDS)
            if self.state.stopping.is_set() or not self._my_turn():
                return
            self._fetching = True
            dry, self._dry, self._retry = self._dry, None, False
        try:
            if dry is not None:
                self._idle(dry)
            self._fetch_cycle()
        finally:
            with self.cond:
                self._fetching = False
                self.cond.notify_all()

    def _my_turn(self) -> bool:
        return self.state.stopping.is_set() or (not self._fetching and (
            bool(self._posted) or self._dry is not None or self._retry))

    def _fetch_cycle(self) -> None:
        """One call by the fetcher of the moment: the posted acks, and entries for the ready
        slots; marks dry queues and a failed call for the dispatcher thread."""
        token = self.wakeup.token()
        acks = self._take_posted()
        if not self._ready and not acks:
            return
        count = sum(slot.want for slot in self._ready)
        entries = self._fetch(acks, count)
        if entries is None:  # a Redis error (waited out): the acks go again next time
            with self.cond:
                self._acks[:0] = acks
                self._retry = True
            return
        self._hand_out(entries)
        if len(entries) < count:
            with self.cond:
                self._dry = token
                self._flow_wait = self.store.flow_wait_ms / 1000

    def _has_news(self) -> bool:
        return bool(self._posted) or self.state.stopping.is_set()

    def _fetch(self, acks: list[str], count: int) -> list[str] | None:
        def call() -> list[str]:
            if self.state.needs_reconcile:
                self.fetching.reconcile()
            now = time.monotonic()
            promote = now >= self._next_promote
            if promote:
                self._next_promote = now + PROMOTE_SECONDS
            gate = self.state.fetch_gate
            gate.acquire_shared()
            try:
                entries = self.store.fetch(acks=acks, count=count, hold=self.held,
                                           promote=promote)
                if self.held:
                    self.state.swap(acked=acks, taken=entries)
            finally:
                gate.release_shared()
            self.calls += 1
            return entries

        return self.fetching.attempt(call)

    def _hand_out(self, entries: list[str]) -> None:
        ready, self._ready = self._ready, []
        start = 0
        for slot, n in zip(ready, share([s.want for s in ready], len(entries)), strict=True):
            if n:
                slot.want = self.config.prefetch
                slot.deliver(entries[start:start + n])
                start += n
            else:
                slot.want = 1
                self._ready.append(slot)

    def _idle(self, token: tuple[int, int]) -> None:
        """The queues ran dry: wait for a push (or a slot to finish, or the sweep). Held back
        by a rate limit: wait until the limit lets the next task start (pushes of new tasks
        cannot help), at most the sweep."""
        flow_wait, self._flow_wait = self._flow_wait, 0.0
        if flow_wait > 0:
            with self.cond:
                self.cond.wait_for(self._has_news, min(flow_wait, self.config.sweep_seconds))
            return
        self.wakeup.idle(token, timeout=self.config.sweep_seconds, until=self._has_news)
        self._next_promote = 0.0  # an idle re-check always promotes
        if self.held and self.state.held_count() == 0 and others_registered(self.store):
            self.state.stopping.wait(PACK_DELAY_SECONDS)  # busy workers fetch first

    def _close(self) -> None:
        """Ack what was posted, then end every slot (busy ones after their entries)."""
        with self.cond:
            self._closed = True
            self.cond.wait_for(lambda: not self._fetching)  # a leader ends its cycle first
            acks, self._acks = self._acks, []
            self._ready.extend(self._posted)
            self._posted = []
        lastcalls.flush_acks(self.store, self.state, acks, name="dispatch")
        for slot in self._ready:
            slot.deliver(None)
        self._ready = []
