"""A TaskQueue behind Sentinel (master + replica + 3 `redis-sentinel`): the worker, the
operator's observe and the CLI find the master through the sentinels and follow a failover."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

import redis
from taskqueue import client, connection, keys, manifest, queueops
from taskqueue.poller import RedisPools
from tests.fixtures.redis_cluster import SentinelGroup, wait_until
from tests.topologies import handlers
from tests.topologies.conftest import Run, StartWorker, taskqueue

SCHEMA = keys.KeySchema.from_spec(manifest.parse(taskqueue("redis://x")).spec)


def sync(url: str) -> connection.SyncClient:
    return connection.sync_client(connection.RedisSettings.from_dsn(url), decode_responses=True,
                                  socket_timeout=2, socket_connect_timeout=2)


def _push(r: connection.SyncClient, prefix: str, n: int, *, timeout: float = 30) -> None:
    """Enqueue, retrying while the master is being replaced (the client asks Sentinel again)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.enqueue_many_sync(r, "{emails}:vip", [f"{prefix}{i}" for i in range(n)])
            return
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.timeout(240)
async def test_worker_operator_and_cli_follow_a_sentinel_failover(
        sentinel_group: SentinelGroup, start_worker: StartWorker, cli: Run,
        tmp_path: Path) -> None:
    url = sentinel_group.url
    # the worker reads spec.redis.sentinel; the URL gives only the database (its host is unused)
    by_spec = {"url": "redis://unused-host/0", "sentinel": {
        "masterName": sentinel_group.master_name,
        "addresses": [f"127.0.0.1:{s.port}" for s in sentinel_group.sentinels]}}
    start_worker(url, worker_id="w1", redis=by_spec)
    r = sync(url)
    _push(r, "a", 20)
    wait_until(lambda: r.llen(handlers.DONE) >= 20, timeout=20, what="first tasks not done")
    sentinel_group.master().client().execute_command("WAIT", 1, 2000)
    pools = RedisPools()
    try:
        before = await queueops.observe(pools.get(url), SCHEMA)
        assert before.completed_total == 20
        old = sentinel_group.kill_master()
        _push(r, "b", 20)
        wait_until(lambda: {f"b{i}" for i in range(20)} <= set(r.lrange(handlers.DONE, 0, -1)),
                   timeout=60, what="the worker did not follow the failover")
        after = await queueops.observe(pools.get(url), SCHEMA)  # the same pooled client
    finally:
        await pools.close()
    assert sentinel_group.master().port != old.port
    assert after.completed_total >= 40
    path = tmp_path / "tq.json"
    path.write_text(json.dumps(taskqueue(url, redis=by_spec)))
    # the CLI runs its own event loop: in a thread, as from a shell
    stats = await asyncio.to_thread(cli, "stats", "-f", str(path), "--json", "--interval", "0")
    assert stats.code == 0, stats.err
    assert stats.json()["queues"][0]["backlog"] == 0
