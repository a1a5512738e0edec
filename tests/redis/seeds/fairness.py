"""Fairness figures over a pickup order (which worker took each task, in time order). Pure;
shared by tests/redis/seeds/test_fairness.py and bench/fairness/fairness.py."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Hashable, Sequence


def max_lag(order: Sequence[Hashable], workers: Sequence[Hashable]) -> int:
    """The most pickups any one worker made while another waited between two of its own (or
    before its first). The seed's rule "no worker waits more than one round while others take
    two" is max_lag <= 2. The tail after a worker's last pickup (the queue ran dry) is not a
    round and is not counted."""
    worst = 0
    for w in workers:
        mine = [i for i, x in enumerate(order) if x == w]
        for a, b in itertools.pairwise([-1, *mine]):
            counts = Counter(order[a + 1:b])
            if counts:
                worst = max(worst, max(counts.values()))
    return worst


def shares(order: Sequence[Hashable], workers: Sequence[Hashable]) -> dict[str, float]:
    """Tasks per worker: mean, min, max, the worst deviation from the mean and the coefficient
    of variation, both in % of the mean."""
    counts = Counter(order)
    per = [counts.get(w, 0) for w in workers]
    mean = statistics.fmean(per)
    return {"mean": round(mean, 2), "min": min(per), "max": max(per),
            "worst_dev_pct": round(100 * max(abs(c - mean) for c in per) / mean, 1),
            "cv_pct": round(100 * statistics.pstdev(per) / mean, 1)}
