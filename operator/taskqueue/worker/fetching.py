"""The Redis error policy of a fetching thread: backoff, the reconcile after a lost reply,
wrong-type queue keys, and following the shared list of skipped queues.

Each fetcher has one (`plan.Plan.fetchers`): the dispatcher's `Fetcher`, which the slots'
fetches take turns with, or each blocking slot (modes "brpop" and "bzpopmin").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from taskqueue.worker import backoff, wrongtype
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import CONNECTION_ERRORS, REDIS_ERRORS, Store

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


class Fetching:
    """The error policy of one fetching thread over its own `Store`."""

    def __init__(self, *, store: Store, state: WorkerState, name: str, held: bool) -> None:
        self.store = store
        self.state = state
        self.name = name
        self.held = held
        self.needs_reconcile = False
        """A call failed while entries may be held: its reply, lost, may have moved entries
        into our processing list that no slot knows of (`reconcile` before the next call)."""
        self._schedule = backoff.Backoff()
        self._skips_version = -1

    def attempt(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """`call(*args, **kwargs)` after following the skipped queues; None after a Redis error
        (logged, the reconcile requested when entries may be held, and the backoff waited)."""
        try:
            skips = self.state.skips
            if skips.skipped or self._skips_version != skips.version:  # else: nothing to do
                self.sync_queues()
            result = call(*args, **kwargs)
        except CONNECTION_ERRORS as exc:
            self._failed(exc)
            return None
        except REDIS_ERRORS as exc:  # OOM, BUSY, READONLY, MISCONF, WRONGTYPE...
            if wrongtype.is_wrong_type(exc):
                self.check_keys()
            self._failed(exc)
            return None
        except Exception:  # an unexpected reply: nothing is held yet, keep consuming
            log.exception("%s: fetch failed", self.name)
            self._failed(None)
            return None
        if self._schedule.failures:
            self._schedule.succeeded()
        return result

    def _failed(self, exc: BaseException | None) -> None:
        self.needs_reconcile = self.needs_reconcile or self.held
        delay = self._schedule.failed()
        if exc is not None:
            log.warning("%s: Redis call failed (%s); retrying in %.2fs", self.name,
                        backoff.describe(exc), delay)
        self.state.stopping.wait(delay)

    def sync_queues(self) -> None:
        """Follow the shared list of skipped queue keys; re-check them now and then."""
        skips = self.state.skips
        if skips.skipped and skips.recheck_due():  # no lock on the per-task path
            wrongtype.check(self.store, skips)
        if self._skips_version != skips.version:
            self._skips_version = skips.version
            self.store.use_queues(skip=skips.skipped)

    def check_keys(self) -> None:
        try:
            wrongtype.check(self.store, self.state.skips)
        except REDIS_ERRORS as exc:
            log.warning("%s: cannot look up key types (%s)", self.name, backoff.describe(exc))

    def reconcile(self) -> None:
        """Give back entries a lost fetch reply moved into our processing list (under the
        fetch lock, so that no entry is between Redis and `state` meanwhile); the caller calls
        it when `needs_reconcile` is set."""
        with self.state.fetch_lock:
            orphans = self.state.orphans(self.store.held_entries())
            if orphans:
                n = self.store.release(orphans)
                log.warning("gave back %d task(s) whose fetch reply was lost", n)
        self.needs_reconcile = False
