"""Per-queue service-time totals of this worker, handed to Redis with each heartbeat.

Every attempt a slot runs (success or failure) adds its seconds to its queue's total here; the
heartbeat takes the totals (whole milliseconds, and the squares in ms^2 for the variance; the
remainders stay) and heartbeat.lua adds them to the stats hash (`keys.service_fields`,
`keys.service_sq_fields`), so the operator measures each queue's mean service time and its
variance exactly instead of inferring them from sampled in-flight counts. A failed beat gives the
totals back for the next one. One `Totals` per worker id (`of`): thread-safe, no I/O. Each slot
adds through a `SlotTotals` of its own (`Totals.slot`), so slots finishing tasks at once do not
wait for one lock; `take` gathers them.
"""

from __future__ import annotations

import threading

from taskqueue import keys


class SlotTotals:
    """What one slot added since the last `Totals.take`, under a lock of its own."""

    __slots__ = ("_attempts", "_lock", "_seconds", "_squares")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, float] = {}
        self._squares: dict[str, float] = {}
        """Sum of the squared attempt times, ms^2."""
        self._attempts: dict[str, int] = {}

    def add(self, queue: str, seconds: float) -> None:
        with self._lock:
            seconds = max(0.0, seconds)
            self._seconds[queue] = self._seconds.get(queue, 0.0) + seconds
            self._squares[queue] = self._squares.get(queue, 0.0) + (seconds * 1000) ** 2
            self._attempts[queue] = self._attempts.get(queue, 0) + 1

    def drain_into(self, seconds: dict[str, float], squares: dict[str, float],
                   attempts: dict[str, int]) -> None:
        """Add everything here to the three totals and start again from zero."""
        with self._lock:
            for queue, n in self._attempts.items():
                seconds[queue] = seconds.get(queue, 0.0) + self._seconds[queue]
                squares[queue] = squares.get(queue, 0.0) + self._squares[queue]
                attempts[queue] = attempts.get(queue, 0) + n
            self._seconds, self._squares, self._attempts = {}, {}, {}


class Totals:
    """Seconds and attempts per queue since the last `take`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, float] = {}
        self._squares: dict[str, float] = {}
        """Sum of the squared attempt times, ms^2."""
        self._attempts: dict[str, int] = {}
        self._direct = SlotTotals()
        self._slots: list[SlotTotals] = [self._direct]

    def slot(self) -> SlotTotals:
        """A new slot's own way in (see the module docstring)."""
        added = SlotTotals()
        with self._lock:
            self._slots.append(added)
        return added

    def add(self, queue: str, seconds: float) -> None:
        self._direct.add(queue, seconds)

    def take(self) -> list[str | int]:
        """heartbeat.lua's field/increment pairs for what was added since the last take."""
        out: list[str | int] = []
        with self._lock:
            for added in self._slots:
                added.drain_into(self._seconds, self._squares, self._attempts)
            for queue, attempts in self._attempts.items():
                ms, squares = int(self._seconds[queue] * 1000), int(self._squares[queue])
                self._seconds[queue] -= ms / 1000
                self._squares[queue] -= squares
                ms_field, served_field = keys.service_fields(queue)
                sq_field, sq_served_field = keys.service_sq_fields(queue)
                out += [ms_field, ms, served_field, attempts, sq_field, squares,
                        sq_served_field, attempts]
            self._attempts.clear()
        return out

    def give_back(self, pairs: list[str | int]) -> None:
        """Undo a `take` whose heartbeat failed."""
        with self._lock:
            for i in range(0, len(pairs), 8):
                queue = str(pairs[i])[len(keys.SERVICE_MS_FIELD_PREFIX):]
                self._seconds[queue] = self._seconds.get(queue, 0.0) + int(pairs[i + 1]) / 1000
                self._attempts[queue] = self._attempts.get(queue, 0) + int(pairs[i + 3])
                self._squares[queue] = self._squares.get(queue, 0.0) + int(pairs[i + 5])


_BY_WORKER: dict[str, Totals] = {}
_LOCK = threading.Lock()


def of(worker_id: str) -> Totals:
    """The totals of worker `worker_id` (one process may host several in tests)."""
    with _LOCK:
        return _BY_WORKER.setdefault(worker_id, Totals())
