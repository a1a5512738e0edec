"""The operator's connections to Redis: one client pool per DSN, and each TaskQueue's DSN
(from spec.redis.url, or from a Secret, cached SECRET_TTL_SECONDS), translated for its topology
(spec.redis.mode, spec.redis.sentinel), with the sentinels' password (from a Secret, cached the
same way) and the TLS files of spec.redis.tls (`taskqueue.controller.tlsfiles`). Clients come from
`taskqueue.redisio.clients`, the project's one client factory (one server, Cluster or Sentinel)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis.asyncio as aioredis

from taskqueue.api import models, redact
from taskqueue.controller import tlsfiles
from taskqueue.controller.kube import Kube, NotFoundError
from taskqueue.controller.record import SpecError
from taskqueue.redisio import clients

SECRET_TTL_SECONDS = 30.0


POOL_CONNECTIONS = 64
"""The most connections the operator opens to one Redis server (`clients.async_client`'s
`pool_size`).
Past it a poll waits for a free connection (up to the pool's timeout) instead of failing:
redis-py's default pool raises MaxConnectionsError at its 101st concurrent command, which with
hundreds of TaskQueues on one Redis turned a burst of polls into RedisUnreachable reports."""


class RedisPools:
    """One client (one connection pool) per Redis DSN, shared by every TaskQueue using it."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._clients: dict[str, aioredis.Redis] = {}

    def get(self, url: str) -> aioredis.Redis:
        found = self._clients.get(url)
        if found is None:
            found = clients.async_client(
                clients.RedisSettings.from_dsn(url), decode_responses=True,
                socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
                health_check_interval=30, pool_size=POOL_CONNECTIONS)
            self._clients[url] = found
        return found

    def __len__(self) -> int:
        return len(self._clients)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.aclose()


class RedisUrls:
    """The Redis DSN of a TaskQueue; a Secret's value is cached SECRET_TTL_SECONDS."""

    def __init__(self, kube: Kube, *, clock: Callable[[], float] = time.time) -> None:
        self.kube = kube
        self.clock = clock
        self._secrets: dict[tuple[str, str, str], tuple[float, str]] = {}

    async def url(self, tq: models.TaskQueue) -> str:
        """The DSN spec.redis names (`taskqueue.redisio.dsn`): its URL or Secret, topology, sentinel
        password and TLS files; SpecError naming the field when a Secret is missing or the DSN
        is not usable."""
        redis = tq.spec.redis
        url = clients.dsn_for(await self._url(tq), redis.mode, sentinel=redis.sentinel)
        problem = redact.check(url, field="spec.redis")  # the topology's DSN (cluster: db 0)
        if problem is not None:
            raise SpecError(problem)
        ns = tq.metadata.namespace or "default"
        if redis.sentinel is not None and redis.sentinel.passwordSecretRef is not None:
            ref = redis.sentinel.passwordSecretRef
            url = clients.with_sentinel_password(url, await self._secret(
                ns, ref, missing=f"spec.redis.sentinel.passwordSecretRef: Secret {ref.name!r} "
                f"with key {ref.key!r} not found in namespace {ns}; create it with the "
                "sentinels' password as the value"))
        if redis.tls is None:
            return url
        try:
            folder = await tlsfiles.materialize(self.kube, ns, redis.tls)
        except NotFoundError as e:
            raise SpecError(str(e)) from None
        return clients.with_tls_dir(url, redis.tls, str(folder))

    async def _url(self, tq: models.TaskQueue) -> str:
        """spec.redis.url, or the value of spec.redis.urlSecretRef; SpecError when missing or
        not a usable Redis URL."""
        ref = tq.spec.redis.urlSecretRef
        if ref is None:
            assert tq.spec.redis.url is not None
            return tq.spec.redis.url
        ns = tq.metadata.namespace or "default"
        field = f"spec.redis.urlSecretRef (Secret {ref.name!r}, key {ref.key!r})"
        return await self._secret(
            ns, ref, check=lambda url: redact.check(url, field=field),
            missing=f"spec.redis.urlSecretRef: Secret {ref.name!r} with key {ref.key!r} not "
            f"found in namespace {ns}; create it with the Redis URL as the value")

    async def _secret(self, ns: str, ref: models.SecretKeyRef, *, missing: str,
                      check: Callable[[str], str | None] = lambda _: None) -> str:
        """The value of a Secret's key, stripped, read at most once per SECRET_TTL_SECONDS;
        SpecError(`missing`) when the Secret or the key does not exist, SpecError(the problem)
        when `check` finds one (such a value is not cached: a fix is read at the next call)."""
        key = (ns, ref.name, ref.key)
        cached = self._secrets.get(key)
        if cached is not None and self.clock() - cached[0] < SECRET_TTL_SECONDS:
            return cached[1]
        try:
            value = (await self.kube.secret_value(ns, ref.name, ref.key)).strip()
        except NotFoundError:
            raise SpecError(missing) from None
        problem = check(value)
        if problem is not None:
            raise SpecError(problem)
        self._secrets[key] = (self.clock(), value)
        return value
