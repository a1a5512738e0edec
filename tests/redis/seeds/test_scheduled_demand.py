"""Scheduled tasks as scaling demand (seed 004 §1.2/§5.3 delay queues, operator side): tasks
due within the next poll plus pod start-up count as demand, read in the one observe round trip;
status and `taskqueue stats` show the delayed set and the next due time."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue import client as producer
from taskqueue.api.models import ScalingSpec
from taskqueue.controller import status
from taskqueue.redisio import queueops
from taskqueue.scaling.observation import QueueObservation
from taskqueue.scaling.policy import PolicyState, decide, due_horizon
from taskqueue.wire import keys
from tests.helpers.cli import Run

NOW = 1_000_000.0
SCHEMA = keys.KeySchema(prefix="q", queues=(keys.QueueRef("q"),), dead_letter="q:dead")


@pytest.mark.parametrize(
    ("queued", "due_soon", "current", "expected"),
    [
        pytest.param(0, 0, 0, 0, id="nothing"),
        pytest.param(0, 1, 0, 1, id="one-due-soon-activates"),
        pytest.param(0, 25, 0, 3, id="due-soon-over-target"),
        pytest.param(15, 10, 1, 3, id="queued-plus-due-soon"),
    ],
)
def test_seed_004_1_2_tasks_due_soon_are_demand(queued: int, due_soon: int, current: int,
                                                expected: int) -> None:
    spec = ScalingSpec(targetBacklogPerReplica=10, idleCooldownSeconds=0,
                       scaleDownStabilizationSeconds=0)
    obs = QueueObservation(at=NOW, backlog={"q": queued}, due_soon=due_soon)
    decision = decide(spec=spec, observation=obs, state=PolicyState(replicas=current), now=NOW)
    assert decision.replicas == expected
    if due_soon:
        assert f"{due_soon} due soon" in decision.reason


@pytest.mark.parametrize(
    ("poll", "startup", "horizon"),
    [
        pytest.param(5.0, 30.0, 35.0, id="defaults"),
        pytest.param(1.0, 0.0, 1.0, id="no-startup"),
    ],
)
def test_due_horizon(poll: float, startup: float, horizon: float) -> None:
    spec = ScalingSpec(pollIntervalSeconds=poll, podStartupSeconds=startup)
    assert due_horizon(spec) == horizon


async def test_observe_counts_due_soon_in_one_call(redis_client: aioredis.Redis,
                                                   redis_sync: redis.Redis) -> None:
    now = time.time()
    for delay in (5, 20, 3600):
        producer.enqueue_sync(redis_sync, "q", "x", delay=delay)
    redis_sync.hset(SCHEMA.stats, "duplicates", 4)
    obs = await queueops.observe(redis_client, SCHEMA, due_within=35)
    assert (obs.delayed, obs.due_soon, obs.duplicates_total) == (3, 2, 4)
    assert obs.next_due_at is not None and 4 < obs.next_due_at - now < 6
    empty = await queueops.observe(redis_client, SCHEMA, due_within=0)
    assert empty.due_soon == 0


def test_stats_shows_scheduled_tasks_and_duplicates(
        cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis) -> None:
    path = manifest_file([{"key": "q"}])
    producer.enqueue_sync(redis_sync, "q", "x", delay=90)
    redis_sync.hset(SCHEMA.stats, "duplicates", 2)
    snap = cli("stats", "-f", path, "--json").json()
    assert snap["delayed"] == 1 and 85 < snap["next_due_in_seconds"] <= 90
    assert snap["duplicates_skipped_total"] == 2
    text = cli("stats", "-f", path).out
    assert "1 (retries + scheduled), next due in" in text
    assert "duplicates skipped 2" in text


def test_status_counts_show_due_soon_and_next_due_time() -> None:
    obs = QueueObservation(at=NOW, backlog={"q": 0}, delayed=3, due_soon=2,
                           next_due_at=1_796_126_400.0)
    counts = status.counts(obs, PolicyState(replicas=0))
    assert (counts["delayed"], counts["dueSoon"]) == (3, 2)
    assert counts["nextDueTime"] == "2026-12-01T12:00:00Z"
