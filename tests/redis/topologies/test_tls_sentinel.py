"""TLS and Sentinel together: a master, a replica and three sentinels that speak only TLS (to
clients, to each other and for replication), client certificates required. A worker configured
from spec.redis.sentinel + spec.redis.tls (the CA and client certificate from the mounted Secret)
runs every task, follows a failover, and a client that trusts another CA is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError

from taskqueue.redisio import clients
from tests.fixtures.redis_cluster import SentinelGroup, wait_until
from tests.redis.topologies import handlers
from tests.redis.topologies.failover import push_while_failing_over
from tests.redis.topologies.manifests import StartWorker

TLS = {"secretName": "redis-tls", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"}


@pytest.mark.timeout(240)
def test_a_worker_over_tls_sentinel_follows_a_failover(
        tls_sentinel_group: SentinelGroup, start_worker: StartWorker, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    group = tls_sentinel_group
    assert group.tls is not None
    secret = tmp_path / "secret"  # the TLS Secret as the worker pod sees it mounted
    secret.mkdir()
    shutil.copy(group.tls.ca, secret / "ca.crt")
    shutil.copy(group.tls.client_cert, secret / "tls.crt")
    shutil.copy(group.tls.client_key, secret / "tls.key")
    monkeypatch.setenv("TASKQUEUE_REDIS_TLS_DIR", str(secret))
    by_spec = {"url": "rediss://unused-host/0", "tls": TLS, "sentinel": {
        "masterName": group.master_name,
        "addresses": [f"127.0.0.1:{s.port}" for s in group.sentinels]}}
    start_worker(group.url, worker_id="w1", redis=by_spec)
    r = clients.sync_client(clients.RedisSettings.from_dsn(group.url),
                               decode_responses=True, socket_timeout=2, socket_connect_timeout=2)
    push_while_failing_over(r, "a", 20)
    wait_until(lambda: r.llen(handlers.DONE) >= 20, timeout=20, what="tasks not run over TLS")
    group.master().client().execute_command("WAIT", 1, 2000)
    old = group.kill_master()
    push_while_failing_over(r, "b", 20)
    wait_until(lambda: {f"b{i}" for i in range(20)} <= set(r.lrange(handlers.DONE, 0, -1)),
               timeout=60, what="the worker did not follow the failover over TLS")
    assert group.master().port != old.port


def test_tls_sentinels_refuse_a_client_that_trusts_another_ca(
        tls_sentinel_group: SentinelGroup) -> None:
    group = tls_sentinel_group
    assert group.tls is not None
    url = group.url.replace(f"ssl_ca_certs={group.tls.ca}", f"ssl_ca_certs={group.tls.other_ca}")
    r = clients.sync_client(clients.RedisSettings.from_dsn(url), socket_timeout=2,
                               retry=Retry(NoBackoff(), 0))
    # every sentinel fails the handshake (certificate verify failed), so none names a master
    with pytest.raises(MasterNotFoundError, match="No master found for 'mymaster'"):
        r.ping()
    assert clients.sync_client(clients.RedisSettings.from_dsn(group.url)).ping()
