"""The wait estimator: how long each queue's recent tasks waited before they started. Pure.

Workers count, per queue, the tasks whose wait (enqueue to first start) they measured and how
many of those waited longer than each edge of `keys.WAIT_EDGES_SECONDS` (`QueueObservation.waited`,
added to the stats hash with each heartbeat). The sums here forget per measured task
(WAIT_MEMORY_TASKS), so a queue's late share and quantiles are those of its last few hundred
tasks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire.keys import WAIT_EDGES_SECONDS

WAIT_MEMORY_TASKS = 600.0
"""The wait histograms forget per measured task: the late share is that of the last few hundred
tasks of the queue."""
MIN_WAITED = 20.0
"""Measured waits (decayed) needed before a queue's late share is trusted."""


@dataclass(frozen=True)
class Waits:
    """Decayed wait histograms per queue, and the workers' histograms at the last observation."""

    totals: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """The workers' wait histograms at the last observation (`QueueObservation.waited`)."""
    sums: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """Decayed sums of the reported wait histograms per queue (the count, then over each edge
    of `keys.WAIT_EDGES_SECONDS`)."""

    def quantile(self, queue: str, quantile: float) -> float | None:
        """The wait of `queue`'s recent tasks that `quantile` of them stayed under (linear
        between the histogram's edges; the last edge when more are past it); None until
        MIN_WAITED waits were measured."""
        sums = self._trusted(queue)
        return None if sums is None else wait_quantile_of(sums, quantile)

    def late_share(self, queue: str, target: float) -> float | None:
        """The share of `queue`'s recent tasks that waited longer than `target` seconds (linear
        between the histogram's edges; past the last edge, the share over it); None until
        MIN_WAITED waits were measured (or for tasks without an envelope time: never)."""
        sums = self._trusted(queue)
        return None if sums is None else _over(sums, target) / sums[0]

    def counted(self, queue: str) -> float:
        """The measured waits (decayed) `queue`'s late share and quantiles are drawn from: at
        most about WAIT_MEMORY_TASKS; 0 until MIN_WAITED."""
        sums = self._trusted(queue)
        return 0.0 if sums is None else sums[0]

    def _trusted(self, queue: str) -> tuple[float, ...] | None:
        """`queue`'s decayed wait histogram once it holds MIN_WAITED waits."""
        for q, sums in self.sums:
            if q == queue and sums and sums[0] >= MIN_WAITED:
                return sums
        return None


def observed(waits: Waits, obs: QueueObservation) -> Waits:
    """The decayed wait histograms after `obs` (per measured task; a count that went down or a
    histogram that is gone, a reset stats hash, starts that queue again; a queue's first
    histogram, e.g. the totals so far when the operator starts, counts as its last
    WAIT_MEMORY_TASKS tasks)."""
    before = dict(waits.totals)
    sums = {q: v for q, v in waits.sums if q in obs.waited}  # a histogram gone: reset hash
    for q, counts in obs.waited.items():
        if not counts or counts[0] <= 0:
            continue
        if q not in before:
            if q not in sums:
                scale = min(float(counts[0]), WAIT_MEMORY_TASKS) / counts[0]
                sums[q] = tuple(c * scale for c in counts)
            continue
        deltas = [c - b for c, b in zip(counts, before[q], strict=False)]
        if len(deltas) != len(counts) or any(d < 0 for d in deltas):
            sums.pop(q, None)
            continue
        keep = math.exp(-deltas[0] / WAIT_MEMORY_TASKS)
        old = sums.get(q, (0.0,) * len(counts))
        sums[q] = tuple(o * keep + d for o, d in zip(old, deltas, strict=True))
    return Waits(totals=tuple(obs.waited.items()), sums=tuple(sums.items()))


def wait_quantile_of(counts: Sequence[float], quantile: float) -> float | None:
    """The wait `quantile` of a wait histogram's tasks stayed under (the count, then the tasks
    over each edge of WAIT_EDGES_SECONDS, as workers report it); None for an empty one."""
    if not counts or counts[0] <= 0:
        return None
    return _under(counts, (1 - quantile) * counts[0])


def _over(sums: tuple[float, ...], target: float) -> float:
    """Tasks over `target` in a histogram (the count, then the tasks over each edge)."""
    low, below = 0.0, sums[0]
    for edge, over in zip(WAIT_EDGES_SECONDS, sums[1:], strict=False):
        if target <= edge:
            return below + (over - below) * (max(target, low) - low) / (edge - low)
        low, below = edge, over
    return below


def _under(sums: Sequence[float], late: float) -> float:
    """The wait that `late` tasks of a histogram are over (the inverse of `_over`)."""
    low, above = 0.0, sums[0]
    for edge, over in zip(WAIT_EDGES_SECONDS, sums[1:], strict=False):
        if over <= late:
            return low + (edge - low) * (above - late) / (above - over) if above > over else low
        low, above = edge, over
    return low
