"""State shared by the threads of one worker process: stop flag and the entries held.

`held` is the multiset of processing entries some slot of this process owns (prefetched,
running, or finished and not yet acked). After a connection error a fetch may have moved
entries into the processing list whose reply never arrived; `reconcile` gives back whatever the
list holds beyond `held`. It runs under the exclusive side of `fetch_gate`, so no fetch is
between its Redis call and registering its entries meanwhile.

Both are on the per-task path, so the common case is one plain lock acquisition each.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from taskqueue.worker.wrongtype import QueueSkips


class SharedExclusiveLock:
    """Many shared holders or one exclusive holder (writers are not starved: they block new
    shared holders while waiting). `acquire_shared`/`release_shared` are the cheap per-fetch
    path: a plain lock, and a condition only while an exclusive holder waits or runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    def acquire_shared(self) -> None:
        with self._lock:
            if self._exclusive or self._waiting:
                self._cond.wait_for(lambda: not self._exclusive and not self._waiting)
            self._shared += 1

    def release_shared(self) -> None:
        with self._lock:
            self._shared -= 1
            if self._waiting and not self._shared:
                self._cond.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._lock:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._exclusive and not self._shared)
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._lock:
                self._exclusive = False
                self._cond.notify_all()


class WorkerState:
    """Stop flag, held entries and the reconcile request of one worker process."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.fetch_gate = SharedExclusiveLock()
        self.needs_reconcile = False
        self.skips = QueueSkips()
        """Queue keys holding the wrong type, left out by every slot."""
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def hold(self, entries: Iterable[str]) -> None:
        self.swap(acked=(), taken=entries)

    def unhold(self, entries: Iterable[str]) -> None:
        self.swap(acked=entries, taken=())

    def swap(self, *, acked: Iterable[str], taken: Iterable[str]) -> None:
        """Forget `acked` and hold `taken`, under one lock acquisition."""
        held = self._held
        with self._lock:
            for entry in acked:
                n = held.get(entry, 0) - 1
                if n > 0:
                    held[entry] = n
                else:
                    held.pop(entry, None)
            for entry in taken:
                held[entry] = held.get(entry, 0) + 1

    def orphans(self, in_redis: Iterable[str]) -> list[str]:
        """Entries in the processing list that no slot of this process holds."""
        with self._lock:
            extra = Counter(in_redis) - Counter(self._held)
        return list(extra.elements())

    def held_count(self) -> int:
        with self._lock:
            return sum(self._held.values())
