"""Test processes that run side by side (pytest-xdist workers) draw cluster and Sentinel ports
from separate shares, so that two never pick the same free port before either listens."""

from __future__ import annotations

import pytest

from tests.fixtures.redis_cluster import port_share


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 8])
def test_the_workers_shares_are_apart_and_in_range(workers: int) -> None:
    shares = [set(port_share(worker=f"gw{i}", workers=workers)) for i in range(workers)]
    assert all(len(share) >= 1000 for share in shares)
    assert sum(len(share) for share in shares) == len(set().union(*shares))
    assert min(map(min, shares)) >= 20000 and max(map(max, shares)) <= 29999


@pytest.mark.parametrize(("worker", "workers"), [
    pytest.param("", 1, id="no-xdist"),
    pytest.param("gw0", 1, id="one-worker"),
])
def test_alone_a_process_draws_from_the_whole_range(worker: str, workers: int) -> None:
    assert port_share(worker=worker, workers=workers) == range(20000, 30000)
