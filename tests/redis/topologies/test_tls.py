"""TLS on a real redis-server (`--tls-port`, client certificates required) with a CA made by the
fixture: the worker, the operator and the CLI verify the server by default, read the CA and
client certificate from a Secret's files, and a wrong CA is refused."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from taskqueue import client
from taskqueue.api import manifest, models
from taskqueue.controller.kube import NotFoundError
from taskqueue.controller.poller import Poller
from taskqueue.controller.record import SpecError
from taskqueue.redisio import clients, queueops
from taskqueue.wire import keys
from tests.fixtures.redis_cluster import wait_until
from tests.fixtures.redis_tls import TlsRedis
from tests.helpers.cli import Run
from tests.helpers.poll import observe_taskqueue
from tests.redis.topologies import handlers
from tests.redis.topologies.manifests import StartWorker, taskqueue
from tests.unit.topologies.test_tls import TLS

SCHEMA = keys.KeySchema.from_spec(manifest.parse(taskqueue("redis://x")).spec)


def _secret_dir(tls_redis: TlsRedis, tmp_path: Path) -> Path:
    """The Secret as the worker pod sees it mounted: one file per key."""
    d = tmp_path / "secret"
    d.mkdir()
    shutil.copy(tls_redis.files.ca, d / "ca.crt")
    shutil.copy(tls_redis.files.client_cert, d / "tls.crt")
    shutil.copy(tls_redis.files.client_key, d / "tls.key")
    return d


def _plain(tls_redis: TlsRedis) -> str:
    return f"rediss://127.0.0.1:{tls_redis.port}/0"


def test_worker_and_cli_over_tls_with_the_secrets_files(
        tls_redis: TlsRedis, tmp_path: Path, start_worker: StartWorker, cli: Run,
        monkeypatch: pytest.MonkeyPatch) -> None:
    secret = _secret_dir(tls_redis, tmp_path)
    monkeypatch.setenv("TASKQUEUE_REDIS_TLS_DIR", str(secret))
    r = clients.sync_client(clients.RedisSettings.from_dsn(tls_redis.url()),
                               decode_responses=True)
    r.flushall()
    start_worker(_plain(tls_redis), redis={"url": _plain(tls_redis), "tls": TLS},
                 record_url=tls_redis.url())
    path = tmp_path / "tq.json"
    path.write_text(json.dumps(taskqueue(_plain(tls_redis),
                                         redis={"url": _plain(tls_redis), "tls": TLS})))
    assert cli("enqueue", "-f", str(path), "{emails}:vip", "a", "b").code == 0
    wait_until(lambda: r.llen(handlers.DONE) >= 2, timeout=20, what="tasks not run over TLS")
    stats = cli("stats", "-f", str(path), "--json", "--interval", "0")
    assert stats.code == 0, stats.err


@pytest.mark.parametrize(
    ("which", "error"),
    [
        pytest.param("other-ca", "certificate verify failed", id="wrong-ca"),
        pytest.param("no-ca", "certificate verify failed", id="system-cas-only"),
        pytest.param("no-client-cert", "", id="no-client-certificate"),
    ],
)
def test_a_server_the_ca_did_not_sign_or_a_missing_client_cert_is_refused(
        tls_redis: TlsRedis, which: str, error: str) -> None:
    url = {"other-ca": tls_redis.url(ca=tls_redis.files.other_ca),
           "no-ca": _plain(tls_redis),
           "no-client-cert": tls_redis.url(client_cert=False)}[which]
    r = clients.sync_client(clients.RedisSettings.from_dsn(url), socket_timeout=2,
                               retry=Retry(NoBackoff(), 0))
    with pytest.raises((redis.ConnectionError, ssl.SSLError)) as err:
        r.ping()
    assert error in str(err.value)


class _SecretKube:
    """The Kube methods the operator uses to read a Secret (the rest is not called)."""

    def __init__(self, data: dict[str, str]) -> None:
        self.data = data

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        if (name, key) not in {("redis-tls", k) for k in self.data}:
            raise NotFoundError(f"secret {name} has no key {key!r}")
        return self.data[key]


def test_the_operator_reads_the_tls_secret_and_observes_over_tls(tls_redis: TlsRedis) -> None:
    files = tls_redis.files
    kube: Any = _SecretKube({"ca.crt": files.ca.read_text(),
                             "tls.crt": files.client_cert.read_text(),
                             "tls.key": files.client_key.read_text()})
    tq = models.TaskQueue.model_validate(
        taskqueue(_plain(tls_redis), redis={"url": _plain(tls_redis), "tls": TLS}))
    poller = Poller(kube=kube)
    r = clients.sync_client(clients.RedisSettings.from_dsn(tls_redis.url()))
    r.flushall()
    client.enqueue_sync(r, "{emails}:vip", "x")

    async def run() -> Any:
        try:
            url = await poller.urls.url(tq)
            obs, error = await observe_taskqueue(poller, tq)
            return url, obs, error
        finally:
            await poller.pools.close()

    url, obs, error = asyncio.run(run())
    assert error is None and obs.backlog["{emails}:vip"] == 1
    folder = Path(urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["ssl_ca_certs"][0]).parent
    assert (folder / "tls.key").stat().st_mode & 0o077 == 0, "the key is private to the operator"
    missing: Any = _SecretKube({"ca.crt": files.ca.read_text()})
    with pytest.raises(SpecError, match=r"key 'tls\.crt' not found"):
        asyncio.run(Poller(kube=missing).urls.url(tq))


def test_observe_works_over_tls(tls_redis: TlsRedis) -> None:
    async def run() -> int:
        c = clients.async_client(clients.RedisSettings.from_dsn(tls_redis.url()),
                                    decode_responses=True)
        try:
            await c.flushall()
            await c.lpush("{emails}:vip", "a")
            return (await queueops.observe(c, SCHEMA)).backlog["{emails}:vip"]
        finally:
            await c.aclose()

    assert asyncio.run(run()) == 1
