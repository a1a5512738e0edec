"""`bench/scaling/firstbatch.py` counts the tasks of a batch that standing pods (and the pods
joining once the reinforcements are up) start by a deadline: the count behind its verdict that
a box is out of reach before a batch has been seen."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "scaling"))

from firstbatch import started_by


@pytest.mark.parametrize(
    ("scenario", "services", "pods", "slots", "deadline", "more_at", "more", "started"),
    [
        ("one pod, one a second, until the deadline", [1.0] * 10, 1, 1, 3.5, 99.0, 0, 4),
        ("a task starting at the deadline counts", [1.0] * 10, 1, 1, 3.0, 99.0, 0, 4),
        ("slots per pod multiply the pods", [1.0] * 10, 1, 4, 0.5, 99.0, 0, 4),
        ("two pods join at 2 s", [1.0] * 10, 1, 1, 3.5, 2.0, 2, 8),
        ("joining after the deadline starts nothing more", [1.0] * 10, 1, 1, 3.5, 4.0, 40, 4),
        ("a batch smaller than the slots starts at once", [5.0] * 3, 4, 1, 0.0, 99.0, 0, 3),
        ("long tasks hold the pods", [10.0, 10.0, 1.0, 1.0], 2, 1, 6.0, 99.0, 0, 2),
    ],
)
def test_tasks_started_by_the_deadline(scenario: str, services: list[float], pods: int,
                                       slots: int, deadline: float, more_at: float, more: int,
                                       started: int) -> None:
    assert started_by(services, pods=pods, slots_each=slots, deadline=deadline,
                      more_at=more_at, more=more) == started, scenario
