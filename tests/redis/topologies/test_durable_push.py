"""Durable producers (spec.redis.waitForReplicas on the producer side): every way of pushing a
task — `enqueue_sync`, the asyncio `enqueue`, `enqueue_many_sync` and `taskqueue enqueue` —
returns only once the replicas asked for have the push, and says so loudly when they do not.

Real servers: a primary with one replica (REPLICAOF), a lone server (no replica: WAIT times out),
and the session's 6-node cluster (the push and its WAIT go to the node that owns the key)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue import client as producer
from taskqueue.wire import keys
from tests.fixtures.redis_server import RedisServer
from tests.helpers.cli import Run
from tests.helpers.wait import wait_for

TIMEOUT_MS = 300
"""How long the tests without a replica wait (those with one keep the 2 s default: under load
the replica's ack can take longer than this)."""


@pytest.fixture(scope="module")
def _replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A primary whose one replica is in sync, shared by the module."""
    root = tmp_path_factory.mktemp("replicated")
    primary = RedisServer(data_dir=root / "primary")
    replica = RedisServer(data_dir=root / "replica")
    primary.start()
    replica.start()
    # the first sync starts at once, not after redis' default 5 s wait for more replicas
    redis.Redis(port=primary.port).config_set("repl-diskless-sync-delay", 0)
    link = redis.Redis(port=replica.port, decode_responses=True)
    try:
        link.replicaof("127.0.0.1", primary.port)
        wait_for("the replica to sync",
                 lambda: link.info("replication")["master_link_status"] == "up", timeout=20)
        yield primary
    finally:
        link.close()
        replica.stop(kill=True)
        primary.stop(kill=True)


@pytest.fixture
def primary_with_replica(_replicated: RedisServer) -> str:
    """The URL of the module's primary, flushed (the replica applies the FLUSHALL before any
    later write, and a WAIT covers both)."""
    redis.Redis.from_url(_replicated.url).flushall()
    return _replicated.url


def _pushes(client: redis.Redis, how: str, *, replicas: int,
            timeout_ms: int = producer.WAIT_TIMEOUT_MS) -> list[str]:
    """Push one task the `how` way; the ids pushed."""
    opts: dict[str, Any] = {"wait_replicas": replicas, "wait_timeout_ms": timeout_ms}
    if how == "plain":
        return [producer.enqueue_sync(client, "{emails}:normal", "p", **opts)]
    if how == "priority":
        return [producer.enqueue_sync(client, "{emails}:vip", "p", priority=1, **opts)]
    if how == "unique":
        return [producer.enqueue_sync(client, "{emails}:normal", "p", unique_for=60, **opts)]
    if how == "scheduled":
        return [producer.enqueue_sync(client, "{emails}:normal", "p", delay=60,
                                      key_prefix="{emails}", **opts)]
    if how == "many":
        return producer.enqueue_many_sync(client, "{emails}:normal", ["a", "b"], **opts)
    return [asyncio.run(_enqueue_async(client, opts))]


async def _enqueue_async(sync_client: redis.Redis, opts: dict[str, Any]) -> str:
    url = sync_client.get_connection_kwargs()
    client = aioredis.Redis(host=url["host"], port=url["port"])
    try:
        return await producer.enqueue(client, "{emails}:normal", "p", **opts)
    finally:
        await client.aclose()


def _stored(client: redis.Redis, how: str) -> int:
    if how == "priority":
        return int(client.zcard("{emails}:vip"))
    if how == "scheduled":
        return int(client.zcard("{emails}:delayed"))
    return int(client.llen("{emails}:normal"))


HOWS = [pytest.param(h, id=h) for h in
        ("plain", "priority", "unique", "scheduled", "many", "asyncio")]


@pytest.mark.parametrize("how", HOWS)
def test_a_push_returns_once_the_replica_has_it(primary_with_replica: str, how: str) -> None:
    client = redis.Redis.from_url(primary_with_replica)
    ids = _pushes(client, how, replicas=1)
    assert ids and all(ids)
    replica_port = next(int(r["port"]) for k, r in client.info("replication").items()
                        if k.startswith("slave") and isinstance(r, dict))
    replica = redis.Redis(port=replica_port)
    # WAIT returned 1: the replica already holds the push (no polling needed)
    assert _stored(replica, how) == len(ids)


@pytest.mark.parametrize("how", HOWS)
def test_a_push_no_replica_confirms_raises_not_replicated(redis_url: str, how: str) -> None:
    client = redis.Redis.from_url(redis_url)
    expected = rf"0 of 1 replica\(s\) confirmed the push to \{{emails\}}:\w+ within {TIMEOUT_MS} ms"
    with pytest.raises(producer.NotReplicated, match=expected):
        _pushes(client, how, replicas=1, timeout_ms=TIMEOUT_MS)
    # the push itself happened: the producer is told it may be lost, not that it failed
    assert _stored(client, how) >= 1


def test_without_wait_replicas_no_wait_is_sent(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.config_resetstat()
    producer.enqueue_sync(client, "{emails}:normal", "p")
    assert "cmdstat_wait" not in client.info("commandstats")


def test_on_a_cluster_the_push_and_its_wait_go_to_the_owner_of_the_key(cluster_url: str) -> None:
    client = producer.connect(cluster_url, decode_responses=True)
    task_id = producer.enqueue_sync(client, "{emails}:normal", "p", wait_replicas=1)
    many = producer.enqueue_many_sync(client, "{emails}:normal", ["a", "b"], wait_replicas=1)
    assert client.llen("{emails}:normal") == 3
    assert keys.unwrap(client.lindex("{emails}:normal", -1)).id == task_id
    assert len(many) == 2


def test_on_a_cluster_the_asyncio_push_waits_on_the_owner_of_the_key(cluster_url: str) -> None:
    async def push() -> str:
        client = producer.connect_async(cluster_url)
        try:
            return await producer.enqueue(client, "{emails}:normal", "p", unique_for=60,
                                          wait_replicas=1)
        finally:
            await client.aclose()

    task_id = asyncio.run(push())
    assert task_id
    assert producer.connect(cluster_url).llen("{emails}:normal") == 1


@pytest.mark.parametrize(("extra", "stored_in"), [
    pytest.param([], "{emails}:normal", id="plain"),
    pytest.param(["--unique-for", "60"], "{emails}:normal", id="unique"),
    pytest.param(["--raw"], "{emails}:normal", id="raw"),
])
def test_the_cli_waits_for_replicas(cli: Run, primary_with_replica: str, extra: list[str],
                                    stored_in: str) -> None:
    result = cli("enqueue", "{emails}:normal", "a", "b", "--wait-replicas", "1", *extra,
                 "--redis-url", primary_with_replica)
    assert result.code == 0, result.err
    assert redis.Redis.from_url(primary_with_replica).llen(stored_in) == 2


def test_the_cli_exits_1_when_no_replica_confirms(cli: Run, redis_url: str) -> None:
    result = cli("enqueue", "{emails}:normal", "a", "--wait-replicas", "1",
                 "--redis-url", redis_url)
    assert result.code == 1
    assert result.err.startswith("taskqueue: 0 of 1 replica(s) confirmed the push to "
                                 "{emails}:normal within 2000 ms: the tasks may be lost")
    assert result.err.count("\n") == 1


@pytest.mark.parametrize("bad", ["-1", "x", "1.5"])
def test_the_cli_refuses_a_bad_replica_count(cli: Run, redis_url: str, bad: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli("enqueue", "{emails}:normal", "a", "--wait-replicas", bad, "--redis-url", redis_url)
    assert exc.value.code == 2
    assert "is not a number of replicas" in capsys.readouterr().err
