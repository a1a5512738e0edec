"""`taskqueue drain`'s plan: batches never larger than asked, for any length (pure)."""

from __future__ import annotations

import pytest

from taskqueue.cli import drain

BIG = 200_000


@pytest.mark.parametrize(
    ("length", "batch", "expected"),
    [
        pytest.param(0, 1000, [], id="empty"),
        pytest.param(999, 1000, [999], id="under-one-batch"),
        pytest.param(2000, 1000, [1000, 1000], id="exact"),
        pytest.param(2500, 1000, [1000, 1000, 500], id="remainder"),
    ],
)
def test_plan_never_exceeds_the_batch(length: int, batch: int, expected: list[int]) -> None:
    assert drain.plan(length, batch) == expected


def test_plan_of_a_huge_list() -> None:
    steps = drain.plan(BIG, 1000)
    assert (len(steps), max(steps), sum(steps)) == (200, 1000, BIG)
