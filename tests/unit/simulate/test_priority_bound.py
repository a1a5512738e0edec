"""`bench/scaling/bound.py`'s oracle for queues served in priority order: the fewest
worker-seconds per minute that keep each queue's p95 wait under its own target, the figure the
benchmarks hold a multi-queue run's cost against."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "scaling"))

from bound import BIN, priority_bound, wait_bound

HOUR = [2.0] * 30 + [4.0] * 30
"""Arrivals per second in each minute of an hour: a step from 2/s to 4/s."""

Case = tuple[list[list[float]], list[float], list[float | None]]
"""Each queue's arrivals per minute, its mean service time and its target (highest first)."""


def test_one_queue_costs_what_the_one_queue_oracle_does() -> None:
    one = wait_bound(HOUR, service=1.0, target=2.0, concurrency=1)
    assert priority_bound([HOUR], services=[1.0], targets=[2.0], concurrency=1) == \
        pytest.approx(one, rel=0.03)


def test_no_target_keeps_just_more_slots_than_the_load() -> None:
    # 2 and 4 erlangs: 3 and 5 slots a minute, the fewest that serve the load at all
    cost = priority_bound([HOUR], services=[1.0], targets=[None], concurrency=1)
    assert cost == (30 * 3 + 30 * 5) * BIN


@pytest.mark.parametrize(("scenario", "looser", "tighter"), [
    ("a tighter target", ([HOUR], [1.0], [5.0]), ([HOUR], [1.0], [1.0])),
    ("a queue behind it, even without a target", ([HOUR], [1.0], [2.0]),
     ([HOUR, HOUR], [1.0, 1.0], [2.0, None])),
    ("the tight target on the low queue, not the high one",
     ([HOUR, HOUR], [1.0, 1.0], [1.0, 30.0]), ([HOUR, HOUR], [1.0, 1.0], [30.0, 1.0])),
])
def test_costs_more_for(scenario: str, looser: Case, tighter: Case) -> None:
    def cost(case: Case) -> float:
        rates, services, targets = case
        return priority_bound(rates, services=services, targets=targets, concurrency=1)
    assert cost(tighter) > cost(looser), scenario


def test_pods_hold_concurrency_slots_each() -> None:
    slots = priority_bound([HOUR, HOUR], services=[0.5, 2.0], targets=[2.0, 10.0],
                           concurrency=1)
    pods = priority_bound([HOUR, HOUR], services=[0.5, 2.0], targets=[2.0, 10.0],
                          concurrency=4)
    assert slots / 4 <= pods < slots


def test_a_minute_without_tasks_costs_nothing() -> None:
    quiet = [0.0] * 60
    assert priority_bound([quiet, quiet], services=[1.0, 1.0], targets=[2.0, 5.0],
                          concurrency=1) == 0.0
