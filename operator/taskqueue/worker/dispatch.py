"""The batched fetch/ack path of one worker process (modes "held" and "unheld").

Slots only run handlers: a slot that finished its entries posts them as acks and itself as
ready (`finished`), and one fetch.lua call acks everything finished since the last call and
takes up to one task per ready slot (`prefetch` per slot that found work last time), then hands
each slot its entries. At concurrency 8 with a backlog that is about one round trip per 8 tasks
instead of 8, and no slot touches Redis on the task path.

One fetcher at a time, by construction: the fetch connection, the list of ready slots and the
error policy belong to the one `Fetcher` of the dispatcher, and only whoever holds it fetches
(`_turn` is None meanwhile; it is taken and given back under `cond`). It is taken by
- the dispatcher thread, for posts nobody else took, dry queues and failed calls;
- the last slot to become ready, when the Fetcher is free, the queues were not dry and the
  last call did not fail (`finished` does the call on the caller's thread: a thread slot, or
  the event loop when its last coroutines running finish, while none of ours runs on it).
  Waking another thread costs more than a short task (50-80 us a hand-over on a 2-vCPU VM:
  bench/worker/handover.py); the batch is then as large as it can be, and no handler runs
  while the leader waits for Redis.
With concurrency 1 the one slot runs inline (`plan.Plan.slots`): the dispatcher thread delivers
to it while holding the Fetcher, so the slot's own post can never lead.

Delivery: the script moves an entry into the processing list in the same atomic call that takes
it, and the dispatcher asks only for what ready slots will run at once; with prefetch 1 an entry
sits in the processing list only while a slot is about to run it (or has run it and its ack
rides on the next call). The calls never promote due retries: the promoter thread does
(`promoter.py`).

Idle: when a call came back with fewer tasks than asked, the queues were dry; the dispatcher
thread waits for a tracking push (`Wakeup.idle`) or for a slot to finish. After a push, a worker
holding no task waits `PACK_DELAY_SECONDS` first (packing), unless it is the TaskQueue's only
registered worker: then nobody else could take the task, and the wait would only add to the idle
pickup latency.

Drain: on stop the dispatcher takes the Fetcher for good, acks what was posted in one last call
and tells every slot to end; a slot still running posts afterwards and then acks its own entries
(`finished` returns False).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Literal, Protocol

from taskqueue.worker import lastcalls
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.fetching import Fetching
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import REDIS_ERRORS, Store
from taskqueue.worker.wakeup import Token, Wakeup

log = logging.getLogger(__name__)

PACK_DELAY_SECONDS = 0.005
"""After a wake-up, a worker that holds no task waits this long before it fetches, so an idle
slot of a busy worker takes the task: work packs onto fewer pods and fully idle pods remain for
the operator to remove (a task that only an idle pod can take waits this much more)."""
WAIT_SECONDS = 1.0
"""Longest wait for a slot while all are busy (a stop also wakes the wait)."""

Outcome = Literal["taken", "dry", "failed"]
"""How a fetch cycle ended: entries for every ready slot, fewer than asked (the queues are dry),
or a Redis error (waited out; the acks go again)."""


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


class Fetcher:
    """What only the fetcher of the moment touches: the fetch connection, its error policy and
    the slots waiting for entries. One per dispatcher, held by one thread at a time
    (`Dispatcher._turn`), so nothing here is locked."""

    def __init__(self, *, config: WorkerConfig, state: WorkerState, held: bool) -> None:
        self.config = config
        self.state = state
        self.held = held
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, wait_replicas=config.wait_replicas,
                           tracking=config.tracking)
        self.fetching = Fetching(store=self.store, state=state, name="dispatch", held=held)
        self.ready: list[Receiver] = []
        """Slots waiting for entries."""
        self.calls = 0
        """fetch.lua calls made for slots (tests, benchmarks)."""

    def cycle(self, acks: list[str]) -> Outcome:
        """One call: `acks`, and entries for the ready slots, handed out."""
        if not self.ready and not acks:
            return "taken"
        count = sum(slot.want for slot in self.ready)
        entries = self.fetching.attempt(self._call, acks, count)
        if entries is None:
            return "failed"
        self._hand_out(entries)
        return "dry" if len(entries) < count else "taken"

    def _call(self, acks: list[str], count: int) -> list[str]:
        if self.fetching.needs_reconcile:
            self.fetching.reconcile()
        if not self.held:
            entries = self.store.fetch(acks=acks, count=count, hold=False)
        else:
            with self.state.fetch_lock:
                entries = self.store.fetch(acks=acks, count=count, hold=True)
                self.state.swap(acked=acks, taken=entries)
        self.calls += 1
        return entries

    def _hand_out(self, entries: list[str]) -> None:
        ready, self.ready = self.ready, []
        start = 0
        for slot, n in zip(ready, share([s.want for s in ready], len(entries)), strict=True):
            if n:
                slot.want = self.config.prefetch
                slot.deliver(entries[start:start + n])
                start += n
            else:
                slot.want = 1
                self.ready.append(slot)


class Dispatcher:
    """The fetch/ack path of one worker process: its thread, and the turn of its one
    `Fetcher`."""

    def __init__(self, *, config: WorkerConfig, state: WorkerState, wakeup: Wakeup,
                 held: bool) -> None:
        self.config = config
        self.state = state
        self.wakeup = wakeup
        self.held = held
        self.cond = wakeup.cond
        self._turn: Fetcher | None = Fetcher(config=config, state=state, held=held)
        """The one Fetcher while nobody fetches; None while its holder does."""
        self._figures = self._turn
        """The same Fetcher, read for `calls` only."""
        self._posted: list[Receiver] = []
        self._acks: list[str] = []
        self._closed = False
        self._dry: Token | None = None
        """The last call found the queues dry: the dispatcher thread waits for a push first."""
        self._retry = False
        """The last call failed (backoff waited): the dispatcher thread calls again."""
        self._flow_wait = 0.0
        """The dry call was held back by a rate limit: seconds until its next task may start
        (the dispatcher sleeps that long instead of waiting for a push)."""
        self.thread = threading.Thread(target=self.run, name="dispatch", daemon=True)

    @property
    def calls(self) -> int:
        """fetch.lua calls made for slots (tests, benchmarks)."""
        return self._figures.calls

    def start(self, *, ready: Sequence[Receiver] = ()) -> None:
        """Start the thread; `ready`: slots waiting for entries from the start that post
        nothing themselves (the inline slot)."""
        with self.cond:
            self._posted.extend(ready)
        self.thread.start()

    # -- called by slots --------------------------------------------------------------------
    def finished(self, slot: Receiver, acks: Sequence[str]) -> bool:
        """`slot` ran its entries (`acks`: the successful ones, AtLeastOnce) and wants more.
        False once the dispatcher has closed: the slot acks on its own. When it is the last
        slot to become ready and the Fetcher is free, the call is made here (see the module
        docstring)."""
        return self.finished_many((slot,), acks)

    def finished_many(self, slots: Sequence[Receiver], acks: Sequence[str]) -> bool:
        """`finished` for several slots at once (`acks`: all of theirs), one wake-up."""
        with self.cond:
            if self._closed:
                return False
            self._acks.extend(acks)
            self._posted.extend(slots)
            # the Fetcher is held (the inline slot posts from its holder's delivery): no lead
            fetcher = None if self._turn is None else self._lead()
            if fetcher is None:
                self.cond.notify_all()
                return True
            token, batch = self._begin(fetcher)
        self._fetch(fetcher, token, batch)
        return True

    def _lead(self) -> Fetcher | None:
        """Under `cond`: the Fetcher, taken, when every slot is ready, it is free, and the
        dispatcher thread has no dry queues or failed call to see to; else None."""
        fetcher = self._turn
        if (fetcher is None or self._dry is not None or self._retry
                or len(self._posted) + len(fetcher.ready) < self.config.concurrency
                or self.state.stopping.is_set()):
            return None
        self._turn = None
        return fetcher

    def stop(self) -> None:
        with self.cond:
            self.cond.notify_all()

    # -- the turn ---------------------------------------------------------------------------
    def _begin(self, fetcher: Fetcher) -> tuple[Token, list[str]]:
        """Under `cond`, by the Fetcher's holder: the wake-up token before the call, and the
        posted acks (the posted slots join the ready ones)."""
        fetcher.ready.extend(self._posted)
        self._posted = []
        acks, self._acks = self._acks, []
        return self.wakeup.token(), acks

    def _fetch(self, fetcher: Fetcher, token: Token, acks: list[str]) -> None:
        """One cycle by the Fetcher's holder, then the Fetcher given back (with what the
        dispatcher thread is to see to: dry queues, a failed call)."""
        outcome: Outcome | None = None
        try:
            outcome = fetcher.cycle(acks)
        finally:
            with self.cond:
                if outcome == "failed":  # the acks go again with the next call
                    self._acks[:0] = acks
                    self._retry = True
                elif outcome == "dry":
                    self._dry = token
                    self._flow_wait = fetcher.store.flow_wait_ms / 1000
                self._turn = fetcher
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

    def _cycle(self) -> None:
        """Wait for work that is the dispatcher thread's (posts nobody leads, dry queues, a
        failed call), then take the Fetcher for it."""
        with self.cond:
            self.cond.wait_for(self._my_turn, WAIT_SECONDS)
            fetcher = self._turn
            if self.state.stopping.is_set() or fetcher is None or not self._my_turn():
                return
            self._turn = None
            dry, self._dry, self._retry = self._dry, None, False
            if dry is None:
                token, acks = self._begin(fetcher)
        if dry is not None:
            try:
                self._idle(dry, fetcher)
                with self.cond:
                    token, acks = self._begin(fetcher)
            except BaseException:
                with self.cond:
                    self._turn = fetcher
                    self.cond.notify_all()
                raise
        self._fetch(fetcher, token, acks)

    def _my_turn(self) -> bool:
        return self.state.stopping.is_set() or (self._turn is not None and (
            bool(self._posted) or self._dry is not None or self._retry))

    def _has_news(self) -> bool:
        return bool(self._posted) or self.state.stopping.is_set()

    def _idle(self, token: Token, fetcher: Fetcher) -> None:
        """The queues ran dry: wait for a push (or a slot to finish, or the sweep). Held back
        by a rate limit: wait until the limit lets the next task start (pushes of new tasks
        cannot help), at most the sweep."""
        with self.cond:
            flow_wait, self._flow_wait = self._flow_wait, 0.0
            if flow_wait > 0:
                self.cond.wait_for(self._has_news, min(flow_wait, self.config.sweep_seconds))
                return
        self.wakeup.idle(token, timeout=self.config.sweep_seconds, until=self._has_news)
        if (self.held and self.state.held_count() == 0
                and others_registered(fetcher.store)):
            self.state.stopping.wait(PACK_DELAY_SECONDS)  # busy workers fetch first

    def _close(self) -> None:
        """Take the Fetcher for good (a leader ends its cycle first), ack what was posted,
        then end every slot (busy ones after their entries)."""
        with self.cond:
            self._closed = True
            self.cond.wait_for(lambda: self._turn is not None)
            fetcher, self._turn = self._turn, None
            assert fetcher is not None
            _, acks = self._begin(fetcher)
        lastcalls.flush_acks(fetcher.store, self.state, acks, name="dispatch", held=self.held)
        for slot in fetcher.ready:
            slot.deliver(None)
        fetcher.ready = []
        fetcher.store.close()

    def close(self) -> None:
        """Close the fetch connection of a dispatcher whose thread was never started (its
        thread closes it when it ends)."""
        with self.cond:
            fetcher = self._turn
        if fetcher is not None:
            fetcher.store.close()
