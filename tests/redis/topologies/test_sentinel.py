"""A TaskQueue behind Sentinel (master + replica + 3 `redis-sentinel`): the worker, the
operator's observe and the CLI find the master through the sentinels and follow a failover."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from taskqueue.api import manifest, models
from taskqueue.controller import workload
from taskqueue.controller.poller import Poller
from taskqueue.controller.redisurls import RedisPools
from taskqueue.redisio import clients, queueops
from taskqueue.wire import keys
from tests.fixtures.redis_cluster import SentinelGroup, running, wait_until
from tests.helpers.cli import Run
from tests.helpers.poll import observe_taskqueue
from tests.redis.topologies import handlers
from tests.redis.topologies.failover import push_while_failing_over
from tests.redis.topologies.manifests import StartWorker, taskqueue

SCHEMA = keys.KeySchema.from_spec(manifest.parse(taskqueue("redis://x")).spec)


def sync(url: str) -> clients.SyncClient:
    return clients.sync_client(clients.RedisSettings.from_dsn(url), decode_responses=True,
                                  socket_timeout=2, socket_connect_timeout=2)


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
    push_while_failing_over(r, "a", 20)
    wait_until(lambda: r.llen(handlers.DONE) >= 20, timeout=20, what="first tasks not done")
    sentinel_group.master().client().execute_command("WAIT", 1, 2000)
    pools = RedisPools()
    try:
        before = await queueops.observe(pools.get(url), SCHEMA)
        assert before.completed_total == 20
        old = sentinel_group.kill_master()
        push_while_failing_over(r, "b", 20)
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


@pytest.fixture
def locked_sentinels(tmp_path: Path) -> Iterator[SentinelGroup]:
    """Sentinels that require a password of their own."""
    with running(SentinelGroup(root=tmp_path / "locked", sentinel_password="s3ntinel")) as group:
        yield group


def test_sentinels_with_their_own_password_from_a_secret(
        locked_sentinels: SentinelGroup, start_worker: StartWorker,
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"url": "redis://unused/0", "sentinel": {
        "masterName": locked_sentinels.master_name,
        "addresses": [f"127.0.0.1:{s.port}" for s in locked_sentinels.sentinels],
        "passwordSecretRef": {"name": "sentinel", "key": "password"}}}
    with_password = locked_sentinels.url + "?sentinel_password=s3ntinel"
    # the worker pod gets the Secret as TASKQUEUE_REDIS_SENTINEL_PASSWORD (a secretKeyRef)
    monkeypatch.setenv("TASKQUEUE_REDIS_SENTINEL_PASSWORD", "s3ntinel")
    start_worker(with_password, worker_id="w1", redis=spec)
    r = sync(with_password)
    push_while_failing_over(r, "p", 5)
    wait_until(lambda: r.llen(handlers.DONE) >= 5, timeout=20, what="tasks not run")

    class SecretKube:
        async def secret_value(self, namespace: str, name: str, key: str) -> str:
            assert (name, key) == ("sentinel", "password")
            return "s3ntinel"

    kube: Any = SecretKube()
    tq = models.TaskQueue.model_validate(taskqueue("redis://x", redis=spec))
    poller = Poller(kube=kube)

    async def observe() -> Any:
        try:
            return await observe_taskqueue(poller, tq)
        finally:
            await poller.pools.close()

    obs, error = asyncio.run(observe())
    assert error is None and obs.completed_total == 5
    no_password = sync(locked_sentinels.url)
    with pytest.raises(redis.RedisError):
        no_password.ping()
    pod = workload.build_deployment(tq, uid="u", replicas=1)["spec"]["template"]["spec"]
    assert {"name": "TASKQUEUE_REDIS_SENTINEL_PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "sentinel", "key": "password"}}} in pod["containers"][0]["env"]
