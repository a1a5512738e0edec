"""The worker's per-queue service totals: whole milliseconds (and ms^2) out, the remainders kept,
a failed heartbeat's totals given back."""

from __future__ import annotations

import pytest

from taskqueue.worker.servicetime import Totals


def fields(queue: str, ms: int, attempts: int, squares: int) -> list[str | int]:
    """heartbeat.lua's pairs for one queue."""
    return [f"service_ms:{queue}", ms, f"served:{queue}", attempts,
            f"service_sq_ms2:{queue}", squares, f"served_sq:{queue}", attempts]


@pytest.mark.parametrize("runs, expected", [
    pytest.param([], [], id="idle-nothing-to-report"),
    pytest.param([("q", 0.5)], fields("q", 500, 1, 250_000), id="one-attempt"),
    pytest.param([("q", 0.0004), ("q", 0.0004)], fields("q", 0, 2, 0),
                 id="sub-millisecond-kept-as-remainder"),
    pytest.param([("a", 1.0), ("b", 0.25), ("a", 2.0)],
                 fields("a", 3000, 2, 5_000_000) + fields("b", 250, 1, 62_500), id="per-queue"),
    pytest.param([("q", -1.0)], fields("q", 0, 1, 0), id="clock-step-counts-0"),
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
    assert totals.take() == fields("q", 0, 1, 0)
    totals.add("q", 0.0006)
    assert totals.take() == fields("q", 1, 1, 0)


def test_give_back_restores_a_failed_take() -> None:
    totals = Totals()
    totals.add("q", 1.5)
    failed = totals.take()
    totals.add("q", 0.5)
    totals.give_back(failed)
    assert totals.take() == fields("q", 2000, 2, 2_500_000)


def test_take_gathers_what_every_slot_added() -> None:
    totals = Totals()
    first, second = totals.slot(), totals.slot()
    first.add("q", 1.0)
    second.add("q", 0.5)
    second.add("r", 0.25)
    totals.add("q", 0.5)
    assert totals.take() == fields("q", 2000, 3, 1_500_000) + fields("r", 250, 1, 62_500)
    assert totals.take() == []
    first.add("q", 0.75)
    assert totals.take() == fields("q", 750, 1, 562_500)
