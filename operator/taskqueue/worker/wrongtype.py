"""Keys of the wrong type: a queue key that holds, say, a hash must not stall the other queues.

fetch.lua fails as a whole with WRONGTYPE when one key it touches holds the wrong type. The
consume slots then look up the type of every key (`Store.key_types`), name the misfits in the
log, and fetch from the other queues; skipped queue keys are re-checked every
`RECHECK_SECONDS` and served again once they hold the right type or are deleted. A bookkeeping
key of the wrong type (processing list, delayed zset...) cannot be skipped: it is named in the
log at every retry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from taskqueue.worker.store import Store

log = logging.getLogger(__name__)

RECHECK_SECONDS = 5.0
"""How often skipped queue keys are looked at again."""


def misfits(actual: Mapping[str, str], expected: Mapping[str, str]) -> dict[str, str]:
    """Keys whose type is neither the expected one nor "none", with the type they hold. Pure."""
    return {key: kind for key, kind in actual.items()
            if kind not in ("none", expected.get(key, kind))}


def is_wrong_type(exc: BaseException) -> bool:
    """A WRONGTYPE reply, directly or from inside a script."""
    return "WRONGTYPE" in str(exc)


class QueueSkips:
    """Queue keys every slot of one worker leaves out, shared by the slots (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.skipped: frozenset[str] = frozenset()
        self.version = 0
        self._recheck_at = 0.0

    def set(self, skipped: frozenset[str]) -> bool:
        """Replace the skipped keys; True when that changed them."""
        with self._lock:
            self._recheck_at = time.monotonic() + RECHECK_SECONDS
            if skipped == self.skipped:
                return False
            self.skipped = skipped
            self.version += 1
            return True

    def recheck_due(self) -> bool:
        """True for one caller once per `RECHECK_SECONDS` while keys are skipped."""
        with self._lock:
            if not self.skipped or time.monotonic() < self._recheck_at:
                return False
            self._recheck_at = time.monotonic() + RECHECK_SECONDS
            return True


def check(store: Store, skips: QueueSkips) -> dict[str, str]:
    """Look up the type of every key a fetch touches, log each misfit by name, and skip the
    queue keys among them (served again once fixed). Returns the misfits {key: type held}."""
    expected = store.schema.expected_types(processing=[store.processing])
    found = misfits(store.key_types(), expected)
    queue_keys = set(store.schema.queue_keys)
    for key, kind in sorted(found.items()):
        what = "queue" if key in queue_keys else "bookkeeping"
        action = ("skipping it and serving the other queues" if key in queue_keys
                  else "no task can be fetched until it is fixed")
        log.error("%s key %r holds a %s, not a %s: %s; delete or fix the key", what, key, kind,
                  expected[key], action, extra={"key": key})
    bad_queues = frozenset(k for k in found if k in queue_keys)
    back = skips.skipped - bad_queues
    if skips.set(bad_queues) and back:
        log.warning("queue key(s) %s usable again: serving them", ", ".join(sorted(back)))
    return found
