"""The Redis calls a slot makes on its own connection while the worker stops: give back the
entries it will not run, and ack what it finished once the dispatcher has closed. Each is tried
up to `DRAIN_ATTEMPTS` times; what still fails is left to recovery (and said so in the log).
Shared by the dispatcher's last ack, the thread slots (`slot.Slot`) and the coroutine slots
(`aslot.AsyncSlot`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from taskqueue.worker import backoff
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import REDIS_ERRORS, Store

log = logging.getLogger(__name__)

DRAIN_ATTEMPTS = 20
"""Tries of an ack or give-back while stopping, before recovery is left to do it."""


def give_back(store: Store, state: WorkerState, entries: list[str], *, name: str) -> None:
    """Release `entries` to their queues, attempts unchanged."""
    def release() -> None:
        store.release(entries)
        state.unhold(entries)

    if not _retry_briefly(release, what=f"{name}: giving back unrun tasks"):
        log.error("could not give back %d task(s); recovery will requeue them", len(entries))


def flush_acks(store: Store, state: WorkerState, acks: list[str], *, name: str,
               held: bool = True) -> list[str]:
    """Ack `acks` (not `held`: done marks of the task index); the ones still not acked ([]
    once done)."""
    if not acks:
        return []

    def ack() -> None:
        store.ack(acks, held=held)
        state.unhold(acks)

    if not _retry_briefly(ack, what=f"{name}: acking finished tasks"):
        log.error("could not ack %d finished task(s); they may run again", len(acks))
        return acks
    return []


def _retry_briefly(fn: Callable[[], None], *, what: str) -> bool:
    try:
        backoff.retry(fn, what=what, log=log, wait=sleep, retry_on=REDIS_ERRORS,
                      attempts=DRAIN_ATTEMPTS)
    except backoff.GaveUpError:
        return False
    return True


def sleep(seconds: float) -> bool:
    """A `backoff.retry` wait that cannot be interrupted (the drain's last calls)."""
    time.sleep(seconds)
    return False
