"""Pure parts of the worker: the tracking prefixes and the share of a batched fetch per slot."""

from __future__ import annotations

import pytest

from taskqueue.worker.dispatch import share
from taskqueue.worker.wakeup import tracking_prefixes


@pytest.mark.parametrize(
    ("keys", "prefixes"),
    [
        pytest.param([], [], id="none"),
        pytest.param(["q"], ["q"], id="one"),
        pytest.param(["b", "a", "a"], ["a", "b"], id="sorted-deduplicated"),
        pytest.param(["jobs", "jobs:hi", "jobs:lo"], ["jobs"], id="prefix-covers-others"),
        pytest.param(["jobs:hi", "jobs:lo"], ["jobs:hi", "jobs:lo"], id="siblings-kept"),
        pytest.param(["a", "ab", "abc", "b"], ["a", "b"], id="chain"),
    ],
)
def test_tracking_prefixes(keys: list[str], prefixes: list[str]) -> None:
    assert tracking_prefixes(keys) == prefixes


@pytest.mark.parametrize(
    ("wants", "fetched", "shares"),
    [
        pytest.param([], 0, [], id="no-slot"),
        pytest.param([1, 1, 1], 3, [1, 1, 1], id="one-each"),
        pytest.param([1, 1, 1, 1], 2, [1, 1, 0, 0], id="dry-queue-first-slots-served"),
        pytest.param([1, 1], 0, [0, 0], id="nothing-fetched"),
        pytest.param([20, 20, 1], 25, [20, 5, 0], id="prefetch-in-order"),
        pytest.param([20, 1], 21, [20, 1], id="prefetch-and-idle-slot"),
    ],
)
def test_share_of_a_batched_fetch(wants: list[int], fetched: int, shares: list[int]) -> None:
    assert share(wants, fetched) == shares
    assert sum(shares) == min(fetched, sum(wants))
