"""One consume slot: a thread that fetches, runs and acks tasks, one at a time.

A worker runs `concurrency` slots. Fetch strategies (`fetch_mode`):
- "held" (AtLeastOnce): fetch.lua acks the previous task(s) and moves the next ones into the
  processing list in one round trip; an idle slot sleeps until a tracking push or the sweep.
- "unheld" (AtMostOnce with zset+list queues or starvation limits): the same script without
  the processing list.
- "brpop" / "bzpopmin" (AtMostOnce, all queues lists / all zsets, no starvation limits): the
  blocking pop over the keys in priority order, the seed's model.
An idle slot asks for one task (so a burst spreads over idle workers); after a fetch that found
work it asks for `prefetch` tasks, all held in the processing list. Due retries are promoted by
at most one fetch per `PROMOTE_SECONDS` per slot (and by every idle re-check).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Literal

from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.execute import Executor
from taskqueue.worker.handlers import Handler
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import CONNECTION_ERRORS, Store
from taskqueue.worker.wakeup import Wakeup

log = logging.getLogger(__name__)

FetchMode = Literal["held", "unheld", "brpop", "bzpopmin"]
BLOCK_SECONDS = 0.5
"""Longest blocking pop, so an idle AtMostOnce slot notices a stop quickly."""
PROMOTE_SECONDS = 0.05
"""A busy slot asks fetch.lua to promote due retries this often (not on every task)."""


def fetch_mode(config: WorkerConfig) -> FetchMode:
    """Which fetch strategy a worker with `config` uses. Pure."""
    if config.delivery == "AtLeastOnce":
        return "held"
    queues = config.schema.queues
    types = {q.type for q in queues}
    if len(types) > 1 or any(q.starvation_limit for q in queues):
        return "unheld"
    return "bzpopmin" if types == {"zset"} else "brpop"


class Slot:
    """The consume loop of one slot; `run()` returns once the worker stops."""

    def __init__(self, *, config: WorkerConfig, handler: Handler, state: WorkerState,
                 wakeup: Wakeup | None, index: int) -> None:
        self.config = config
        self.state = state
        self.wakeup = wakeup
        self.mode = fetch_mode(config)
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, wait_replicas=config.wait_replicas)
        self.executor = Executor(config=config, handler=handler, store=self.store,
                                 stopping=state.stopping)
        self.acks: list[str] = []
        self.index = index
        self.busy = False
        self._delay = 0.05
        self._last_promote = 0.0
        self._next_promote = 0.0
        self.thread = threading.Thread(target=self.run, name=f"slot-{index}", daemon=True)

    @property
    def held(self) -> bool:
        return self.mode == "held"

    def run(self) -> None:
        want = 1
        while not self.state.stopping.is_set():
            entries = self._next(want)
            if entries:
                want = self.config.prefetch
                self._work(entries)
            elif entries is not None:
                want = 1
        self._flush_acks()
        self.store.close()

    def _next(self, want: int) -> list[str] | None:
        """Fetched entries, [] when idle (after waiting), None after an error."""
        try:
            if self.mode in ("brpop", "bzpopmin"):
                entries = self._pop_blocking()
            else:
                entries = self._fetch(want)
        except CONNECTION_ERRORS as exc:
            self.state.needs_reconcile = self.state.needs_reconcile or self.held
            self._backoff(exc)
            return None
        except Exception:  # an unexpected reply or a bug: keep consuming, never die silently
            log.exception("fetch failed")
            self.state.needs_reconcile = self.state.needs_reconcile or self.held
            self._backoff(None)
            return None
        self._delay = 0.05
        return entries

    def _fetch(self, want: int) -> list[str]:
        wakeup = self.wakeup
        assert wakeup is not None
        token = wakeup.token()
        if self.state.needs_reconcile:
            self._maybe_reconcile()
        acks = self.acks
        now = time.monotonic()
        promote = now >= self._next_promote
        if promote:
            self._next_promote = now + PROMOTE_SECONDS
        gate = self.state.fetch_gate
        gate.acquire_shared()
        try:
            entries = self.store.fetch(acks=acks, count=want, hold=self.held, promote=promote)
            if self.held:
                self.state.swap(acked=acks, taken=entries)
        finally:
            gate.release_shared()
        if acks:
            self.acks = []
        if not entries:
            wakeup.idle(token, timeout=self.config.sweep_seconds)
            self._next_promote = 0.0  # an idle re-check always promotes
        return entries

    def _pop_blocking(self) -> list[str]:
        now = time.monotonic()
        if now - self._last_promote >= self.config.sweep_seconds:
            self.store.fetch(acks=(), count=0, hold=False)
            self._last_promote = now
        entry = self.store.pop_blocking(zset=self.mode == "bzpopmin",
                                        timeout=min(BLOCK_SECONDS, self.config.sweep_seconds))
        return [entry] if entry is not None else []

    def _maybe_reconcile(self) -> None:
        """Give back entries a lost fetch reply moved into our processing list."""
        if not self.state.needs_reconcile:
            return
        with self.state.fetch_gate.exclusive():
            if not self.state.needs_reconcile:
                return
            orphans = self.state.orphans(self.store.held_entries())
            if orphans:
                n = self.store.release(orphans)
                log.warning("gave back %d task(s) whose fetch reply was lost", n)
            self.state.needs_reconcile = False

    def _work(self, entries: list[str]) -> None:
        for i, entry in enumerate(entries):
            if self.state.stopping.is_set() and self.held:
                self.give_back(entries[i:])
                return
            self.busy = True
            try:
                ok = self.executor.run(entry, held=self.held)
            finally:
                self.busy = False
            if not self.held:
                continue
            if ok:
                self.acks.append(entry)
            else:
                self.state.unhold([entry])

    def give_back(self, entries: list[str]) -> None:
        """Release entries this slot will not run (drain), attempts unchanged."""
        if not self.held or not entries:
            return
        for _ in range(20):
            try:
                self.store.release(entries)
                self.state.unhold(entries)
                return
            except CONNECTION_ERRORS as exc:
                self._backoff(exc, stoppable=False)
        log.error("could not give back %d task(s); recovery will requeue them", len(entries))

    def _flush_acks(self) -> None:
        for _ in range(20):
            if not self.acks:
                return
            try:
                self.store.fetch(acks=self.acks, count=0)
                self.state.unhold(self.acks)
                self.acks = []
            except CONNECTION_ERRORS as exc:
                self._backoff(exc, stoppable=False)
        log.error("could not ack %d finished task(s); they may run again", len(self.acks))

    def _backoff(self, exc: BaseException | None, *, stoppable: bool = True) -> None:
        delay = self._delay * random.uniform(0.5, 1.0)
        if exc is not None:
            log.warning("Redis unavailable (%s); retrying in %.2fs", exc, delay)
        if stoppable:
            self.state.stopping.wait(delay)
        else:
            time.sleep(delay)
        self._delay = min(self._delay * 2, 5.0)
