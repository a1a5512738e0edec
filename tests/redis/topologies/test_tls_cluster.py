"""TLS and Redis Cluster together, as managed offerings run them: a real 6-node cluster that speaks
only TLS on its client port, its replication links and its cluster bus, with client certificates
required. The worker (CA and client certificate from the Secret's files), the producer, the CLI
and the operator's observe all work over `rediss+cluster://`, and a wrong CA is refused."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from taskqueue import client
from taskqueue.api import manifest
from taskqueue.redisio import clients, queueops
from taskqueue.wire import keys
from tests.fixtures.redis_cluster import RedisCluster, wait_until
from tests.helpers.cli import Run
from tests.redis.topologies import handlers
from tests.redis.topologies.manifests import StartWorker, taskqueue

TLS = {"secretName": "redis-tls", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"}


def _hosts(cluster: RedisCluster) -> str:
    return ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes)


def _spec_url(cluster: RedisCluster) -> str:
    """What the TaskQueue says: no file paths (those come from the mounted Secret)."""
    return f"rediss+cluster://{_hosts(cluster)}"


@pytest.fixture
def tls_cluster_url(tls_cluster: RedisCluster) -> str:
    """The TLS cluster's DSN with the CA and client certificate, every master flushed."""
    tls_cluster.wait_healthy()
    tls_cluster.flush()
    return tls_cluster.url


@pytest.fixture
def secret_dir(tls_cluster: RedisCluster, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Path:
    """The TLS Secret as a worker pod sees it mounted, one file per key."""
    assert tls_cluster.tls is not None
    d = tmp_path / "secret"
    d.mkdir()
    shutil.copy(tls_cluster.tls.ca, d / "ca.crt")
    shutil.copy(tls_cluster.tls.client_cert, d / "tls.crt")
    shutil.copy(tls_cluster.tls.client_key, d / "tls.key")
    monkeypatch.setenv("TASKQUEUE_REDIS_TLS_DIR", str(d))
    return d


def test_workers_and_the_cli_run_every_task_once_over_a_tls_cluster(
        tls_cluster: RedisCluster, tls_cluster_url: str, secret_dir: Path,
        start_worker: StartWorker, cli: Run, tmp_path: Path) -> None:
    spec_redis = {"url": _spec_url(tls_cluster), "tls": TLS}
    for i in range(2):
        start_worker(_spec_url(tls_cluster), worker_id=f"w{i}", redis=spec_redis,
                     record_url=tls_cluster_url, worker={"prefetch": 4})
    r = clients.sync_client(clients.RedisSettings.from_dsn(tls_cluster_url),
                               decode_responses=True)
    ids = client.enqueue_many_sync(r, "{emails}:normal", [f"n{i}" for i in range(50)])
    path = tmp_path / "tq.json"
    path.write_text(json.dumps(taskqueue(_spec_url(tls_cluster), redis=spec_redis)))
    assert cli("enqueue", "-f", str(path), "{emails}:vip", "v0", "v1").code == 0
    wait_until(lambda: r.llen(handlers.DONE) >= 52, timeout=30, what="tasks not run over TLS")
    assert sorted(r.lrange(handlers.DONE, 0, -1)) == sorted(
        [f"n{i}" for i in range(50)] + ["v0", "v1"])
    assert len(ids) == 50
    stats = cli("stats", "-f", str(path), "--json", "--interval", "0")
    assert stats.code == 0, stats.err


def test_the_operators_observe_is_one_call_over_a_tls_cluster(tls_cluster_url: str) -> None:
    schema = keys.KeySchema.from_spec(manifest.parse(taskqueue("redis://x", redis={
        "url": "redis://x", "mode": "cluster"})).spec)

    async def run() -> dict[str, int]:
        c = clients.async_client(clients.RedisSettings.from_dsn(tls_cluster_url),
                                    decode_responses=True)
        try:
            await c.lpush("{emails}:vip", "a", "b")
            return (await queueops.observe(c, schema)).backlog
        finally:
            await c.aclose()

    assert asyncio.run(run()) == {"{emails}:vip": 2, "{emails}:normal": 0}


def test_a_tls_cluster_refuses_a_client_that_trusts_another_ca(tls_cluster: RedisCluster) -> None:
    assert tls_cluster.tls is not None
    url = (f"{_spec_url(tls_cluster)}?ssl_ca_certs={tls_cluster.tls.other_ca}"
           f"&ssl_certfile={tls_cluster.tls.client_cert}&ssl_keyfile={tls_cluster.tls.client_key}")
    with pytest.raises((redis.ConnectionError, ssl.SSLError)) as err:
        clients.sync_client(clients.RedisSettings.from_dsn(url), socket_timeout=2,
                               retry=Retry(NoBackoff(), 0)).ping()
    assert "certificate verify failed" in str(err.value)
