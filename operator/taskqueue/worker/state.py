"""State shared by the threads of one worker process: stop flag, the entries held, and what
the worker has seen of its queues (keys of the wrong type, flow control).

`held` is the multiset of processing entries some slot of this process owns (prefetched,
running, or finished and not yet acked). After a connection error a fetch may have moved
entries into the processing list whose reply never arrived; the reconcile
(`fetching.Fetching.reconcile`) gives back whatever the list holds beyond `held`. A fetch that
takes entries holds `fetch_lock` from its call until its entries are registered here, and so
do the reconcile and the requeue of a stalled worker (`runner.Worker.abandon`): neither sees
an entry that is in Redis and not yet here.

Both are on the per-task path, so the common case is one plain lock acquisition each.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from taskqueue.worker.flowseen import FlowSeen
from taskqueue.worker.running import CancelsSeen
from taskqueue.worker.wrongtype import QueueSkips


class WorkerState:
    """Stop flag, held entries and the fetch lock of one worker process."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.fetch_lock = threading.Lock()
        self.skips = QueueSkips()
        """Queue keys holding the wrong type, left out by every slot."""
        self.flow = FlowSeen()
        """Whether flow control exists and what it pauses (kept by the `flow` thread)."""
        self.cancels = CancelsSeen()
        """Whether the cancels zset may hold a cancel (kept by the `lifecycle` thread)."""
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
