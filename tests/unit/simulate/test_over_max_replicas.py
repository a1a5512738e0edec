"""`bench/scaling/families.py` says when a trace's wait target asks more pods than the manifest's
maxReplicas: minutes in which no scaler within the manifest meets the target, so a p95 miss
there is the manifest's, not the policy's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "scaling"))

import bound
from families import DURATION, over_max

from taskqueue.simulate.trace import Arrival


def steady(rate: float, service: float, minutes: int = 60) -> list[Arrival]:
    """Tasks of `service` seconds arriving evenly at `rate` a second."""
    return [Arrival(i / rate, "tasks", service) for i in range(int(minutes * 60 * rate))]


@pytest.mark.parametrize(("scenario", "rate", "concurrency", "max_replicas", "minutes"), [
    ("40 erlangs on 40 one-slot pods: never enough", 5.0, 1, 40, 60),
    ("the same load on pods of 4 slots: room to spare", 5.0, 4, 40, 0),
    ("20 erlangs on 40 pods", 2.5, 1, 40, 0),
    ("a cap under the load", 2.5, 1, 15, 60),
])
def test_minutes_over_max_replicas(scenario: str, rate: float, concurrency: int,
                                   max_replicas: int, minutes: int) -> None:
    binned = bound.minutes(steady(rate, 8.0), ["tasks"], duration=DURATION)
    assert over_max(binned, target=5.0, concurrency=concurrency,
                    max_replicas=max_replicas) == minutes, scenario
