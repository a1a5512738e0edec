"""The one redis-py client factory: standalone, Cluster or Sentinel, sync and async, TLS and ACL.

The operator, the CLI and `taskqueue.client` build their clients here from a `RedisSettings`
(`taskqueue.redisio.dsn`: the DSN forms, re-exported here). The worker talks to Redis over its own
connection (`taskqueue.worker.resp`) and comes here only for `master_address()`: the master that
serves a key in a Cluster or behind Sentinel (all keys of a TaskQueue share one hash slot),
asked again at every reconnect, which is how a worker follows a failover. Clients retry a
command on connection loss or READONLY, asking Sentinel for the master again on every reconnect.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, cast

import redis
import redis.cluster
import redis.sentinel
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import RedisClusterException
from redis.retry import Retry as SyncRetry

from taskqueue.redisio.dsn import (
    Mode,
    RedisSettings,
    SettingsError,
    dsn_for,
    is_cluster_dsn,
    with_sentinel_password,
    with_tls_dir,
)

__all__ = [
    "AsyncClient", "Mode", "RedisSettings", "SettingsError", "SyncClient", "async_client",
    "dsn_for", "is_cluster_dsn", "master_address", "sync_client",
    "with_sentinel_password", "with_tls_dir",
]

# redis-py leaves these untyped; called through Any so the typed code around them stays strict
_parse_url: Any = redis.connection.parse_url
_ClusterNode: Any = redis.cluster.ClusterNode
_RedisCluster: Any = redis.cluster.RedisCluster
_Sentinel: Any = redis.sentinel.Sentinel

RETRIES = 8
"""Retries of a command after connection loss or READONLY (~3 s in all: a failover's span)."""

SyncClient = redis.Redis
"""What `sync_client` returns (a RedisCluster offers the same command methods)."""
if TYPE_CHECKING:
    # What `async_client` returns (an async RedisCluster offers the same command methods).
    # redis.asyncio is imported only when an asyncio client is made: the synchronous worker
    # never loads it (start-up time; see docs/worker.md).
    from redis.asyncio import Redis as AsyncClient


def _retry_class(*, asyncio: bool) -> Any:
    if asyncio:
        from redis.asyncio.retry import Retry as AsyncRetry
        return AsyncRetry
    return SyncRetry


class _RetryOnceAnswered(SyncRetry):
    """No retry until Redis has answered once, then up to `retries`: a first contact that is
    refused or times out (a wrong URL, a port-forward that is not running) fails at once, a
    connection lost after that is retried (a failover in the middle of a command). One object
    shared by every connection of a client (redis-py deep-copies the retry it is given)."""

    def __init__(self, backoff: Any, retries: int) -> None:
        super().__init__(backoff, 0)
        self._once_answered = retries

    def __deepcopy__(self, memo: dict[int, Any]) -> _RetryOnceAnswered:
        return self

    def call_with_retry(self, do: Any, fail: Any, *args: Any, **kwargs: Any) -> Any:
        result = super().call_with_retry(do, fail, *args, **kwargs)
        self.update_retries(self._once_answered)
        return result


@cache
def _async_retry_once_answered() -> type[Any]:
    """The asyncio twin of `_RetryOnceAnswered` (defined on first use: redis.asyncio is not
    imported by programs that never make an asyncio client)."""
    from redis.asyncio.retry import Retry as AsyncRetry

    class _AsyncRetryOnceAnswered(AsyncRetry):
        def __init__(self, backoff: Any, retries: int) -> None:
            super().__init__(backoff, 0)
            self._once_answered = retries

        def __deepcopy__(self, memo: dict[int, Any]) -> _AsyncRetryOnceAnswered:
            return self

        async def call_with_retry(self, do: Any, fail: Any, *args: Any, **kwargs: Any) -> Any:
            result = await super().call_with_retry(do, fail, *args, **kwargs)
            self.update_retries(self._once_answered)
            return result

    return _AsyncRetryOnceAnswered


def _with_retry(options: dict[str, Any], *, asyncio: bool,
                retry_first_contact: bool = True) -> dict[str, Any]:
    """`options` plus a retry on connection loss and READONLY (a demoted master), unless the
    caller chose one: the retry reconnects, and through Sentinel it asks for the master again.
    Retried commands run at least once (an LPUSH whose reply was lost may be pushed twice).
    Without `retry_first_contact`, nothing is retried until Redis has answered once (a
    command-line tool reports an unreachable Redis at once)."""
    out = dict(options)
    if "retry" not in out:
        backoff = ExponentialBackoff(cap=1.0, base=0.05)
        if retry_first_contact:
            retry_class = _retry_class(asyncio=asyncio)
        else:
            retry_class = _async_retry_once_answered() if asyncio else _RetryOnceAnswered
        out["retry"] = retry_class(backoff, RETRIES)
    out.setdefault("retry_on_error", [redis.ConnectionError, redis.TimeoutError,
                                      redis.ReadOnlyError])
    return out


# -- clients -----------------------------------------------------------------------------------
def _node_kwargs(settings: RedisSettings, options: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of a connection to a data node (from a node URL plus `options`)."""
    kwargs: dict[str, Any] = _parse_url(settings.node_url())
    kwargs.pop("host", None)
    kwargs.pop("port", None)
    kwargs.update(options)
    return kwargs


def _sentinel_kwargs(settings: RedisSettings, options: dict[str, Any], *,
                     asyncio: bool = False) -> dict[str, Any]:
    """Connection kwargs for the sentinels: no retry of their own (a sentinel that fails is
    skipped for the next one, and the command's retry asks them all again)."""
    kw: dict[str, Any] = {
        k: v for k, v in options.items() if k in ("socket_timeout", "socket_connect_timeout")
    }
    kw["retry"] = _retry_class(asyncio=asyncio)(NoBackoff(), 0)
    if settings.sentinel_password:
        kw["password"] = settings.sentinel_password
    if settings.sentinel_username:
        kw["username"] = settings.sentinel_username
    if settings.tls:
        kw["ssl"] = True
        for k, v in settings.query:
            if k.startswith("ssl_"):
                kw[k] = v
    return kw


def sync_client(settings: RedisSettings, *, retry_first_contact: bool = True,
                **options: Any) -> SyncClient:
    """A synchronous client (with its own pool); `options` are redis-py keyword arguments.
    `retry_first_contact=False`: a Redis that never answered is not retried (`_with_retry`)."""
    if settings.mode == "cluster":
        nodes = [_ClusterNode(h, p) for h, p in settings.hosts]
        kwargs = _node_kwargs(settings, options)
        kwargs.pop("db", None)
        kwargs.pop("connection_class", None)
        ssl = kwargs.pop("ssl", settings.tls)
        try:
            return cast(SyncClient, _RedisCluster(startup_nodes=nodes, ssl=ssl, **kwargs))
        except RedisClusterException as exc:  # no seed answered: what callers catch already
            raise redis.ConnectionError(
                f"Redis Cluster at {settings.describe()} unreachable: {exc}") from exc
    if settings.mode == "sentinel":
        kwargs = _node_kwargs(settings, _with_retry(
            options, asyncio=False, retry_first_contact=retry_first_contact))
        sentinel = _Sentinel(list(settings.hosts), sentinel_kwargs=_sentinel_kwargs(
            settings, options), **_sentinel_master_kwargs(kwargs, asyncio=False))
        return cast(SyncClient, sentinel.master_for(settings.master_name))
    return redis.Redis.from_url(settings.node_url(), **_with_retry(
        options, asyncio=False, retry_first_contact=retry_first_contact))


def async_client(settings: RedisSettings, *, retry_first_contact: bool = True,
                 pool_size: int | None = None, **options: Any) -> AsyncClient:
    """An asyncio client (with its own pool); `options` are redis-py keyword arguments.
    `retry_first_contact=False`: a Redis that never answered is not retried (`_with_retry`).
    `pool_size` (one server only): at most that many connections, a command past them waits for
    one (up to the socket timeout) where redis-py's default pool of 100 raises
    MaxConnectionsError."""
    import redis.asyncio as aioredis
    import redis.asyncio.cluster as aiocluster
    import redis.asyncio.sentinel as aiosentinel

    if settings.mode == "cluster":
        nodes = [aiocluster.ClusterNode(h, p) for h, p in settings.hosts]
        kwargs = _node_kwargs(settings, options)
        for k in ("db", "connection_class", "health_check_interval"):
            kwargs.pop(k, None)
        ssl = kwargs.pop("ssl", settings.tls)
        return cast("AsyncClient",
                    aiocluster.RedisCluster(startup_nodes=nodes, ssl=ssl, **kwargs))
    if settings.mode == "sentinel":
        kwargs = _node_kwargs(settings, _with_retry(
            options, asyncio=True, retry_first_contact=retry_first_contact))
        async_sentinel: Any = aiosentinel.Sentinel
        sentinel = async_sentinel(list(settings.hosts), sentinel_kwargs=_sentinel_kwargs(
            settings, options, asyncio=True), **_sentinel_master_kwargs(kwargs, asyncio=True))
        return cast("AsyncClient", sentinel.master_for(settings.master_name))
    kwargs = _with_retry(options, asyncio=True, retry_first_contact=retry_first_contact)
    if pool_size is None:
        return aioredis.Redis.from_url(settings.node_url(), **kwargs)
    pool = aioredis.BlockingConnectionPool.from_url(
        settings.node_url(), max_connections=pool_size,
        timeout=kwargs.get("socket_timeout"), **kwargs)
    return aioredis.Redis(connection_pool=pool)


class _FollowMaster(redis.sentinel.SentinelManagedConnection):
    """A Sentinel-managed connection that asks for the master again on every reconnect.

    redis-py re-resolves the master only in `connect()`; a command that reconnects after an
    error goes through `connect_check_health()` to the old address, so a retried command would
    knock at the dead master again. This asks Sentinel there too."""

    def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
        if self._sock is None and self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        return super().connect_check_health(*args, **kwargs)


class _FollowMasterSSL(_FollowMaster, redis.connection.SSLConnection):
    pass


@cache
def _async_follow_master() -> tuple[type[Any], type[Any]]:
    """The asyncio twins of `_FollowMaster` and `_FollowMasterSSL` (defined on first use, so
    redis.asyncio is not imported by programs that never make an asyncio client)."""
    import redis.asyncio as aioredis
    import redis.asyncio.sentinel as aiosentinel

    class _AsyncFollowMaster(aiosentinel.SentinelManagedConnection):
        async def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
            if not self.is_connected and self.connection_pool.is_master:
                self.host, self.port = await self.connection_pool.get_master_address()
            return await super().connect_check_health(*args, **kwargs)

    class _AsyncFollowMasterSSL(_AsyncFollowMaster, aioredis.SSLConnection):
        pass

    return _AsyncFollowMaster, _AsyncFollowMasterSSL


def _sentinel_master_kwargs(kwargs: dict[str, Any], *, asyncio: bool) -> dict[str, Any]:
    """Connection kwargs for the master behind a Sentinel (TLS or not)."""
    out = dict(kwargs)
    tls = out.pop("connection_class", None) is not None or bool(out.pop("ssl", False))
    if asyncio:
        plain, ssl = _async_follow_master()
        out["connection_class"] = ssl if tls else plain
    else:
        out["connection_class"] = _FollowMasterSSL if tls else _FollowMaster
    return out


def master_address(settings: RedisSettings, key: str, **options: Any) -> tuple[str, int] | None:
    """(host, port) of the master that serves `key`, None for a unix socket."""
    if settings.mode == "standalone":
        return None if settings.scheme == "unix" else settings.hosts[0]
    if settings.mode == "sentinel":
        sentinel = _Sentinel(list(settings.hosts),
                            sentinel_kwargs=_sentinel_kwargs(settings, options))
        try:
            host, port = sentinel.discover_master(settings.master_name)
        finally:
            for s in sentinel.sentinels:
                s.close()
        return str(host), int(port)
    client: Any = sync_client(settings, **options)
    try:
        node = client.get_node_from_key(key)
        return str(node.host), int(node.port)
    finally:
        client.close()
