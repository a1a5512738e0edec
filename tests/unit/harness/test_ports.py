"""Test processes that run side by side (pytest-xdist workers) draw cluster and Sentinel ports
from separate shares, so that two never pick the same free port before either listens; and no
node's port or cluster bus port is one the kernel may give an outgoing connection meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.redis_cluster import PORTS, port_share


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 8])
def test_the_workers_shares_are_apart_and_in_range(workers: int) -> None:
    shares = [set(port_share(worker=f"gw{i}", workers=workers)) for i in range(workers)]
    assert all(len(share) >= 1000 for share in shares)
    assert sum(len(share) for share in shares) == len(set().union(*shares))
    assert min(map(min, shares)) >= 10000 and max(map(max, shares)) <= 19999


@pytest.mark.parametrize(("worker", "workers"), [
    pytest.param("", 1, id="no-xdist"),
    pytest.param("gw0", 1, id="one-worker"),
])
def test_alone_a_process_draws_from_the_whole_range(worker: str, workers: int) -> None:
    assert port_share(worker=worker, workers=workers) == range(10000, 20000)


def test_no_node_or_bus_port_is_one_the_kernel_hands_to_outgoing_connections() -> None:
    low, _high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert PORTS.stop - 1 + 10000 < low, (
        f"cluster bus ports reach {PORTS.stop - 1 + 10000}, into this machine's ephemeral "
        f"ports (from {low}): move tests.fixtures.redis_cluster.PORTS lower")
