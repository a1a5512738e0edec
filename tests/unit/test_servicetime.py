"""The worker's per-queue service totals: whole milliseconds out, the remainder kept, a failed
heartbeat's totals given back."""

from __future__ import annotations

import pytest

from taskqueue.worker.servicetime import Totals


@pytest.mark.parametrize("runs, expected", [
    pytest.param([], [], id="idle-nothing-to-report"),
    pytest.param([("q", 0.5)], ["service_ms:q", 500, "served:q", 1], id="one-attempt"),
    pytest.param([("q", 0.0004), ("q", 0.0004)], ["service_ms:q", 0, "served:q", 2],
                 id="sub-millisecond-kept-as-remainder"),
    pytest.param([("a", 1.0), ("b", 0.25), ("a", 2.0)],
                 ["service_ms:a", 3000, "served:a", 2, "service_ms:b", 250, "served:b", 1],
                 id="per-queue"),
    pytest.param([("q", -1.0)], ["service_ms:q", 0, "served:q", 1], id="clock-step-counts-0"),
])
def test_take(runs: list[tuple[str, float]], expected: list[str | int]) -> None:
    totals = Totals()
    for queue, seconds in runs:
        totals.add(queue, seconds)
    assert totals.take() == expected
    assert totals.take() == []


def test_the_remainder_carries_to_the_next_take() -> None:
    totals = Totals()
    totals.add("q", 0.0006)
    assert totals.take() == ["service_ms:q", 0, "served:q", 1]
    totals.add("q", 0.0006)
    assert totals.take() == ["service_ms:q", 1, "served:q", 1]


def test_give_back_restores_a_failed_take() -> None:
    totals = Totals()
    totals.add("q", 1.5)
    failed = totals.take()
    totals.add("q", 0.5)
    totals.give_back(failed)
    assert totals.take() == ["service_ms:q", 2000, "served:q", 2]
