"""Per-queue service-time totals and wait histograms of this worker, handed to Redis with each
heartbeat.

Every attempt a slot runs (success or failure) adds its seconds to its queue's total here; the
heartbeat takes the totals (whole milliseconds, and the squares in ms^2 for the variance; the
remainders stay) and heartbeat.lua adds them to the stats hash (`keys.service_fields`,
`keys.service_sq_fields`), so the operator measures each queue's mean service time and its
variance exactly instead of inferring them from sampled in-flight counts. A failed beat gives the
totals back for the next one. The first attempt of a task whose envelope carries its
`enqueued_at` also counts its wait (`waited`) in the histogram of `keys.wait_fields`: the
operator reads the share of a queue's tasks that waited longer than its target from it.
One `Totals` per worker id (`of`): thread-safe, no I/O. Each slot adds through a `SlotTotals` of
its own (`Totals.slot`), so slots finishing tasks at once do not wait for one lock; `take`
gathers them into the `SlotTotals` the worker keeps between heartbeats and reports it. The
heartbeat also reports how long the running tasks have run (`Totals.running_ms`): the operator
counts a slot whose task has run far longer than the mean as held, not free soon.
"""

from __future__ import annotations

import threading
import time

from taskqueue.wire import keys


class SlotTotals:
    """Per-queue sums of attempts (seconds, squares in ms^2, count) and wait-histogram
    increments, under a lock of their own: what one slot added since the last `Totals.take`,
    and what `Totals` keeps between takes. The one owner of these sums."""

    __slots__ = ("_attempts", "_lock", "_seconds", "_squares", "_waits", "running")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running: dict[int, float] = {}
        """The tasks this slot runs now (by `id` of their context: two raw payloads' contexts
        can be equal) -> when each started (`time.perf_counter`): a dict insert and delete per
        task (`begin`, `end`), read by the heartbeat."""
        self._seconds: dict[str, float] = {}
        self._squares: dict[str, float] = {}
        """Sum of the squared attempt times, ms^2."""
        self._attempts: dict[str, int] = {}
        self._waits: dict[str, int] = {}
        """Wait-histogram field -> increment."""

    def begin(self, task: object) -> float:
        """`task` starts now (returned, `time.perf_counter`)."""
        started = self.running[id(task)] = time.perf_counter()
        return started

    def end(self, task: object) -> None:
        """`task` is over (`begin`)."""
        self.running.pop(id(task), None)

    def add(self, queue: str, seconds: float) -> None:
        """Count an attempt of `queue` that ran `seconds` (a clock step back counts 0)."""
        seconds = max(0.0, seconds)
        squares = (seconds * 1000) ** 2
        with self._lock:  # `_add` written out: this runs once per task
            self._seconds[queue] = self._seconds.get(queue, 0.0) + seconds
            self._squares[queue] = self._squares.get(queue, 0.0) + squares
            self._attempts[queue] = self._attempts.get(queue, 0) + 1

    def waited(self, queue: str, seconds: float) -> None:
        """Count a task of `queue` that waited `seconds` before its first attempt."""
        counted = _wait_fields(queue)[:1 + keys.edges_below(seconds)]
        with self._lock:
            waits = self._waits
            for name in counted:
                waits[name] = waits.get(name, 0) + 1

    def move_into(self, other: SlotTotals) -> None:
        """Add everything here to `other` and start again from zero."""
        with self._lock:
            seconds, squares, attempts, waits = (self._seconds, self._squares, self._attempts,
                                                 self._waits)
            self._seconds, self._squares, self._attempts, self._waits = {}, {}, {}, {}
        with other._lock:
            for queue, n in attempts.items():
                other._add(queue, seconds[queue], squares[queue], n)
            for name, n in waits.items():
                other._waits[name] = other._waits.get(name, 0) + n

    def report(self) -> list[str | int]:
        """heartbeat.lua's field/increment pairs for everything here: the service totals (8
        per queue: whole milliseconds and ms^2, the remainders stay), then the wait-histogram
        increments; the counts start again from zero."""
        out: list[str | int] = []
        with self._lock:
            for queue, attempts in self._attempts.items():
                ms, squares = int(self._seconds[queue] * 1000), int(self._squares[queue])
                self._seconds[queue] -= ms / 1000
                self._squares[queue] -= squares
                ms_field, served_field = keys.service_fields(queue)
                sq_field, sq_served_field = keys.service_sq_fields(queue)
                out += [ms_field, ms, served_field, attempts, sq_field, squares,
                        sq_served_field, attempts]
            self._attempts.clear()
            for name, n in self._waits.items():
                out += [name, n]
            self._waits.clear()
        return out

    def restore(self, pairs: list[str | int]) -> None:
        """Add back what `report` returned (a heartbeat that failed)."""
        with self._lock:
            i = 0
            while i < len(pairs) and str(pairs[i]).startswith(keys.SERVICE_MS_FIELD_PREFIX):
                queue = str(pairs[i])[len(keys.SERVICE_MS_FIELD_PREFIX):]
                self._add(queue, int(pairs[i + 1]) / 1000, int(pairs[i + 5]), int(pairs[i + 3]))
                i += 8
            for j in range(i, len(pairs), 2):
                name = str(pairs[j])
                self._waits[name] = self._waits.get(name, 0) + int(pairs[j + 1])

    def _add(self, queue: str, seconds: float, squares: float, attempts: int) -> None:
        """Under the lock."""
        self._seconds[queue] = self._seconds.get(queue, 0.0) + seconds
        self._squares[queue] = self._squares.get(queue, 0.0) + squares
        self._attempts[queue] = self._attempts.get(queue, 0) + attempts


class Totals:
    """The service totals of one worker: every slot's `SlotTotals` and what is kept between
    heartbeats (the remainders below a millisecond, a failed heartbeat's increments)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept = SlotTotals()
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

    def waited(self, queue: str, seconds: float) -> None:
        self._direct.waited(queue, seconds)

    def take(self) -> list[str | int]:
        """heartbeat.lua's field/increment pairs for what was added since the last take
        (`SlotTotals.report`)."""
        with self._lock:
            for added in self._slots:
                added.move_into(self._kept)
            return self._kept.report()

    def running_ms(self) -> list[int]:
        """How long the oldest running tasks of every slot have run, in whole ms, longest first
        (at most `keys.STARTED_REPORTED`): heartbeat.lua keeps their start times for the
        operator, which counts the slots held by long tasks."""
        now = time.perf_counter()
        with self._lock:
            slots = list(self._slots)
        starts = sorted(t for slot in slots for t in tuple(slot.running.values()))
        return [max(0, int((now - t) * 1000)) for t in starts[:keys.STARTED_REPORTED]]

    def give_back(self, pairs: list[str | int]) -> None:
        """Undo a `take` whose heartbeat failed."""
        self._kept.restore(pairs)


_WAIT_FIELDS: dict[str, tuple[str, ...]] = {}


def _wait_fields(queue: str) -> tuple[str, ...]:
    """`keys.wait_fields`, built once per queue (it runs for every task)."""
    fields = _WAIT_FIELDS.get(queue)
    if fields is None:
        fields = _WAIT_FIELDS[queue] = keys.wait_fields(queue)
    return fields


_BY_WORKER: dict[str, Totals] = {}
_LOCK = threading.Lock()


def of(worker_id: str) -> Totals:
    """The totals of worker `worker_id` (one process may host several in tests)."""
    with _LOCK:
        return _BY_WORKER.setdefault(worker_id, Totals())
