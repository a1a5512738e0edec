"""One consume slot: a thread that fetches, runs and acks tasks, one at a time.

A worker runs `concurrency` slots. Fetch strategies (`fetch_mode`):
- "held" (AtLeastOnce): fetch.lua acks the previous task(s) and moves the next ones into the
  processing list in one round trip; an idle slot sleeps until a tracking push or the sweep.
- "unheld" (AtMostOnce with zset+list queues or starvation limits): the same script without
  the processing list.
- "brpop" / "bzpopmin" (AtMostOnce, all queues lists / all zsets, no starvation limits): the
  blocking pop over the keys in priority order, the seed's model.
An idle slot asks for one task (so a burst spreads over idle workers); after a fetch that found
work it asks for `prefetch` tasks, all held in the processing list. Packing: after a wake-up, the
slots of a worker holding no task wait `PACK_DELAY_SECONDS` before fetching, so a busy worker's
idle slot takes a lone task first and fully idle pods stay idle (removable by the operator).
Due retries are promoted by at most one fetch per `PROMOTE_SECONDS` per slot (and by every idle
re-check).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Literal

from taskqueue import backoff
from taskqueue.worker import keycheck
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.execute import Executor
from taskqueue.worker.handlers import Handler
from taskqueue.worker.idempotency import Guard, Leases
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import CONNECTION_ERRORS, REDIS_ERRORS, Store
from taskqueue.worker.wakeup import Wakeup

log = logging.getLogger(__name__)

FetchMode = Literal["held", "unheld", "brpop", "bzpopmin"]
BLOCK_SECONDS = 0.5
"""Longest blocking pop, so an idle AtMostOnce slot notices a stop quickly."""
PROMOTE_SECONDS = 0.05
"""A busy slot asks fetch.lua to promote due retries this often (not on every task)."""
PACK_DELAY_SECONDS = 0.005
"""After a wake-up, a slot of a worker that holds no task waits this long before it fetches, so
an idle slot of a busy worker takes the task: work packs onto fewer pods and fully idle pods
remain for the operator to remove (a task that only an idle pod can take waits this much more)."""
DRAIN_ATTEMPTS = 20
"""Tries of an ack or give-back while stopping, before recovery is left to do it."""


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
                 wakeup: Wakeup | None, index: int, leases: Leases | None = None) -> None:
        self.config = config
        self.state = state
        self.wakeup = wakeup
        self.mode = fetch_mode(config)
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, wait_replicas=config.wait_replicas)
        self.executor = Executor(config=config, handler=handler, store=self.store,
                                 stopping=state.stopping)
        self.acks: list[str] = []
        self.guard = None if leases is None else Guard(
            config=config, store=self.store, leases=leases, slot=index, held=self.held,
            stopping=state.stopping)
        self.index = index
        self.busy = False
        self._schedule = backoff.Backoff()
        self._skips_version = -1
        self._last_promote = 0.0
        self._next_promote = 0.0
        self.thread = threading.Thread(target=self.run, name=f"slot-{index}", daemon=True)

    @property
    def held(self) -> bool:
        return self.mode == "held"

    def run(self) -> None:
        want = 1
        try:
            while not self.state.stopping.is_set():
                entries = self._next(want)
                if entries:
                    want = self.config.prefetch
                    self._work(entries)
                elif entries is not None:
                    want = 1
        except BaseException:
            # a bug outside the handler (which cannot end the thread) and Redis (retried):
            # carrying on could leave held tasks behind a live heartbeat, so the thread ends,
            # the worker exits with status 3, and recovery requeues what this slot held
            log.exception("%s: unexpected error; the slot stops and the worker exits",
                          self.thread.name)
            raise
        self._flush_acks()
        self.store.close()

    def _next(self, want: int) -> list[str] | None:
        """Fetched entries, [] when idle (after waiting), None after an error."""
        try:
            self._sync_queues()
            if self.mode in ("brpop", "bzpopmin"):
                entries = self._pop_blocking()
            else:
                entries = self._fetch(want)
        except CONNECTION_ERRORS as exc:
            self.state.needs_reconcile = self.state.needs_reconcile or self.held
            self._backoff(exc)
            return None
        except REDIS_ERRORS as exc:  # OOM, BUSY, READONLY, MISCONF, WRONGTYPE...
            self.state.needs_reconcile = self.state.needs_reconcile or self.held
            if keycheck.is_wrong_type(exc):
                self._check_keys()
            self._backoff(exc)
            return None
        except Exception:  # an unexpected reply: nothing is held yet, keep consuming
            log.exception("%s: fetch failed", self.thread.name)
            self.state.needs_reconcile = self.state.needs_reconcile or self.held
            self._backoff(None)
            return None
        self._schedule.succeeded()
        return entries

    def _sync_queues(self) -> None:
        """Follow the shared list of skipped queue keys; re-check them now and then."""
        skips = self.state.skips
        if skips.skipped and skips.recheck_due():  # no lock on the per-task path
            keycheck.check(self.store, skips)
        if self._skips_version != skips.version:
            self._skips_version = skips.version
            self.store.use_queues(skip=skips.skipped)

    def _check_keys(self) -> None:
        try:
            keycheck.check(self.store, self.state.skips)
        except REDIS_ERRORS as exc:
            log.warning("%s: cannot look up key types (%s)", self.thread.name,
                        backoff.describe(exc))

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
            if self.held and self.state.held_count() == 0:
                self.state.stopping.wait(PACK_DELAY_SECONDS)  # busy workers fetch first
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
            if self.guard is not None:
                self._work_idempotent(entry)
                continue
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
            self.busy = True
            try:
                ok = self.executor.run(entry, held=self.held)
            finally:
                self.busy = False
            if ok:
                guard.complete(entry)
            else:
                guard.release(entry)
        if self.held:
            self.state.unhold([entry])

    def give_back(self, entries: list[str]) -> None:
        """Release entries this slot will not run (drain), attempts unchanged."""
        if not self.held or not entries:
            return

        def release() -> None:
            self.store.release(entries)
            self.state.unhold(entries)

        if not self._retry_briefly(release, what="giving back unrun tasks"):
            log.error("could not give back %d task(s); recovery will requeue them",
                      len(entries))

    def _flush_acks(self) -> None:
        if not self.acks:
            return

        def ack() -> None:
            self.store.fetch(acks=self.acks, count=0)
            self.state.unhold(self.acks)
            self.acks = []

        if not self._retry_briefly(ack, what="acking finished tasks"):
            log.error("could not ack %d finished task(s); they may run again", len(self.acks))

    def _retry_briefly(self, fn: Callable[[], None], *, what: str) -> bool:
        """`fn` with up to `DRAIN_ATTEMPTS` tries (used while stopping); False if it failed."""
        try:
            backoff.retry(fn, what=f"{self.thread.name}: {what}", log=log,
                          wait=_sleep, retry_on=REDIS_ERRORS, attempts=DRAIN_ATTEMPTS)
        except backoff.GaveUpError:
            return False
        return True

    def _backoff(self, exc: BaseException | None) -> None:
        delay = self._schedule.failed()
        if exc is not None:
            log.warning("%s: Redis call failed (%s); retrying in %.2fs", self.thread.name,
                        backoff.describe(exc), delay)
        self.state.stopping.wait(delay)


def _sleep(seconds: float) -> bool:
    """A `backoff.retry` wait that cannot be interrupted (the drain's last calls)."""
    time.sleep(seconds)
    return False
