"""The test tiers stay honest: a test may use the fixtures of its own tier and the ones below,
never one above (`tests/conftest.py` fails the collection then), and every test is in a tier."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURE_TIERS, TIERS, tier_problem


@pytest.mark.parametrize("folder, fixtures", [
    pytest.param("unit", ["tmp_path", "monkeypatch", "capsys"], id="unit-with-pytest-fixtures"),
    pytest.param("redis", ["redis_server", "redis_url", "make_worker"], id="redis-with-redis"),
    pytest.param("redis", ["tls_cluster", "sentinel_group"], id="redis-with-topologies"),
    pytest.param("cluster", ["control_plane", "redis_server", "helm"], id="cluster-with-lower"),
    pytest.param("node", ["node_cluster", "engine", "control_plane", "redis_server"],
                 id="node-with-everything"),
])
def test_a_test_may_use_its_tier_and_the_ones_below(folder: str, fixtures: list[str]) -> None:
    assert tier_problem(folder=folder, fixtures=fixtures) is None


@pytest.mark.parametrize("folder, fixtures, says", [
    pytest.param("unit", ["redis_url", "redis_server"],
                 "uses redis_server (redis): move it to tests/redis/", id="unit-starting-redis"),
    pytest.param("unit", ["helm"], "uses helm (cluster): move it to tests/cluster/",
                 id="unit-running-helm"),
    pytest.param("redis", ["namespace", "control_plane", "redis_server"],
                 "uses control_plane (cluster): move it to tests/cluster/",
                 id="redis-starting-a-control-plane"),
    pytest.param("cluster", ["engine", "registry"],
                 "uses engine (node), registry (node): move it to tests/node/",
                 id="cluster-building-images"),
    pytest.param("unit", ["redis_server", "control_plane"],
                 "uses control_plane (cluster), redis_server (redis): move it to tests/cluster/",
                 id="the-highest-tier-wins"),
    pytest.param("worker", [], "is not in a tier folder", id="outside-the-tiers"),
])
def test_a_test_above_its_tier_is_refused_with_where_it_belongs(
        folder: str, fixtures: list[str], says: str) -> None:
    problem = tier_problem(folder=folder, fixtures=fixtures)
    assert problem is not None and problem.startswith(says)


def test_every_fixture_that_starts_something_has_a_tier_folder() -> None:
    assert set(FIXTURE_TIERS.values()) <= set(TIERS) - {"unit"}
