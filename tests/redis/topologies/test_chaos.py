"""Chaos under load (3,000 tasks, 3 workers): a Redis Cluster master and a Sentinel master are
killed mid-run. Default mode may lose acknowledged pushes (replication is asynchronous); the
durable mode (WAIT for one replica after each push and each fetch) loses none."""

from __future__ import annotations

import pytest

from tests.fixtures.redis_cluster import RedisCluster, SentinelGroup
from tests.fixtures.redis_server import RedisServer
from tests.redis.topologies import chaos

pytestmark = pytest.mark.slow  # chaos under load (~40 s): scripts/test runs it, --fast does not


@pytest.mark.timeout(400)
@pytest.mark.parametrize("durable", [False, True], ids=["default", "durable"])
def test_killing_a_cluster_master_under_load(own_cluster: RedisCluster,
                                             redis_server: RedisServer, durable: bool,
                                             record_property: pytest.RecordProperty) -> None:
    outcome = chaos.run(own_cluster.url, redis_server.url, durable=durable,
                        kill=lambda: own_cluster.kill_master_of(chaos.QUEUE, restart=True))
    record_property("outcome", outcome)
    print(f"cluster {'durable' if durable else 'default'}: {outcome}")
    assert outcome.acked == 3000
    if durable:
        assert outcome.lost == 0, outcome


@pytest.mark.timeout(400)
@pytest.mark.parametrize("durable", [False, True], ids=["default", "durable"])
def test_killing_the_sentinel_master_under_load(sentinel_group: SentinelGroup,
                                                redis_server: RedisServer, durable: bool,
                                                record_property: pytest.RecordProperty) -> None:
    outcome = chaos.run(sentinel_group.url, redis_server.url, durable=durable,
                        kill=lambda: sentinel_group.kill_master(restart=True))
    record_property("outcome", outcome)
    print(f"sentinel {'durable' if durable else 'default'}: {outcome}")
    assert outcome.acked == 3000
    if durable:
        assert outcome.lost == 0, outcome
