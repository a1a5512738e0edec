"""The batch forecast: when the next of a queue's recurring batches lands, and how big it is. Pure.

A batch is what `arrivals` counts beyond a plausible count for the measured rate in one poll
interval (`arrivals._steady_part`); `noted` keeps, per queue, the last ONSETS_KEPT batches (the
poll that first saw each, polls in a row with a batch merged into one, and its tasks). Batches
that recur at a stable period (the last REGULAR_GAPS gaps between them agree within
`tolerance`) forecast the next one at the last onset + their mean gap (`expected`). The policy
starts the fleet for it a start-up and a poll ahead (`taskqueue.scaling.policy`), so a batch
whose wait target is shorter than a re-activation (a poll + a pod start-up) is met without
holding the fleet through the lull. A forecast is only for the next batch after the last one
seen: once its window is past without a batch, nothing more is forecast until batches at a
stable period are seen again. A batch not seen two polls past the spread of the gaps it was
forecast from is overdue (`overdue_at`) and its fleet is left to the idle rule: a missed
forecast costs one early start of that fleet, held a few polls.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

ONSETS_KEPT = 4
"""Batches remembered per queue."""
REGULAR_GAPS = 2
"""Gaps in a row that must agree before a period is trusted: three batches at a stable period
(two batches a given time apart are a coincidence as often as a period)."""
AT_ONCE_POLLS = 2
"""Only batches seen on at most this many polls in a row are forecast: tasks that arrive at once
(a batch that lands between two polls' reads is seen on both). A burst of a high rate for a
while is no batch to start a fleet for ahead: its tasks come over its whole length."""
TOLERANCE_POLLS = 2.0
TOLERANCE_SHARE = 0.05
"""Two gaps agree within TOLERANCE_POLLS poll intervals (each onset is seen at a poll, up to an
interval after it landed) + TOLERANCE_SHARE of the gap (a period that drifts a little)."""


class Onset(NamedTuple):
    """One batch as the polls saw it."""

    at: float
    """The poll that first saw it."""
    last: float
    """The last poll in a row that saw a batch (a batch spread over polls is one)."""
    tasks: float
    polls: int = 1
    """The polls in a row that saw it."""


class QueueBatches(NamedTuple):
    queue: str
    onsets: tuple[Onset, ...] = ()
    """The last ONSETS_KEPT batches of `queue`, oldest first."""


@dataclass(frozen=True)
class Expected:
    """The next batch of a queue, as the recurring ones forecast it."""

    queue: str
    at: float
    """When the poll after it lands is expected (the onsets' times are polls')."""
    tasks: float
    """Its expected size: the mean of the regular batches'."""
    period: float
    tolerance: float
    """How far from `at` it may still land and be the batch forecast."""
    spread: float = 0.0
    """How much the gaps it was forecast from differed."""


def noted(batches: tuple[QueueBatches, ...], entered: Mapping[str, float],
          steady: Mapping[str, float], *, at: float, dt: float) -> tuple[QueueBatches, ...]:
    """`batches` after the poll at `at`, `dt` seconds after the previous one, in which
    `entered` tasks arrived per queue, `steady` of them a plausible count for the rate (more
    than that is a batch, of all the tasks that entered)."""
    before = {b.queue: b.onsets for b in batches}
    out = []
    for q in sorted(set(before) | set(entered)):
        onsets, tasks = before.get(q, ()), entered.get(q, 0.0)
        if tasks > steady.get(q, tasks):
            last = onsets[-1] if onsets else None
            if last is not None and at - last.last <= dt * 1.5:
                onsets = (*onsets[:-1], Onset(last.at, at, last.tasks + tasks, last.polls + 1))
            else:
                onsets = (*onsets, Onset(at, at, tasks))
        if onsets:
            out.append(QueueBatches(q, onsets[-ONSETS_KEPT:]))
    return tuple(out)


def tolerance(gap: float, *, poll: float) -> float:
    """How much two gaps between batches may differ and still be one period."""
    return TOLERANCE_POLLS * poll + TOLERANCE_SHARE * gap


def expected(batches: tuple[QueueBatches, ...], queue: str, *, now: float,
             poll: float) -> Expected | None:
    """The next batch of `queue` when its last REGULAR_GAPS + 1 batches came at a stable period
    and the next one is not overdue by more than the tolerance (then the forecast missed and
    nothing is forecast until the period is seen again); else None."""
    onsets = next((b.onsets for b in batches if b.queue == queue), ())
    if len(onsets) < REGULAR_GAPS + 1:
        return None
    run = onsets[-(REGULAR_GAPS + 1):]
    gaps = [b.at - a.at for a, b in itertools.pairwise(run)]
    period = sum(gaps) / len(gaps)
    slack = tolerance(period, poll=poll)
    if (period <= 0 or max(gaps) - min(gaps) > slack
            or any(o.polls > AT_ONCE_POLLS for o in run)):
        return None
    at = run[-1].at + period
    if now > at + slack:
        return None
    return Expected(queue, at, sum(o.tasks for o in run) / len(run), period, slack,
                    max(gaps) - min(gaps))


OVERDUE_POLLS = 2.0
"""A forecast batch not seen this many polls past the spread of its gaps is overdue: each onset
is the poll that first saw it, up to a poll after it landed, and one more poll sees it."""


def overdue_at(batch: Expected, *, poll: float) -> float:
    """When `batch`, not seen yet, is overdue: its fleet is no longer held for it (a batch
    that lands later is a burst, as one never forecast)."""
    return batch.at + batch.spread + OVERDUE_POLLS * poll
