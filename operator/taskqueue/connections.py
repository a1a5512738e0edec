"""The operator's connections to Redis: one client pool per URL, and each TaskQueue's URL
(from spec.redis.url, or from a Secret, cached SECRET_TTL_SECONDS)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis.asyncio as aioredis

from taskqueue import models, redact
from taskqueue.kube import Kube, NotFoundError
from taskqueue.record import SpecError

SECRET_TTL_SECONDS = 30.0


class RedisPools:
    """One client (one connection pool) per Redis URL, shared by every TaskQueue using it."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._clients: dict[str, aioredis.Redis] = {}

    def get(self, url: str) -> aioredis.Redis:
        found = self._clients.get(url)
        if found is None:
            found = aioredis.Redis.from_url(
                url, decode_responses=True, socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout, health_check_interval=30)
            self._clients[url] = found
        return found

    def __len__(self) -> int:
        return len(self._clients)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.aclose()


class RedisUrls:
    """The Redis URL of a TaskQueue; a Secret's value is cached SECRET_TTL_SECONDS."""

    def __init__(self, kube: Kube, *, clock: Callable[[], float] = time.time) -> None:
        self.kube = kube
        self.clock = clock
        self._secrets: dict[tuple[str, str, str], tuple[float, str]] = {}

    async def url(self, tq: models.TaskQueue) -> str:
        """spec.redis.url, or the value of spec.redis.urlSecretRef; SpecError when missing."""
        ref = tq.spec.redis.urlSecretRef
        if ref is None:
            assert tq.spec.redis.url is not None
            return tq.spec.redis.url
        ns = tq.metadata.namespace or "default"
        key = (ns, ref.name, ref.key)
        cached = self._secrets.get(key)
        if cached is not None and self.clock() - cached[0] < SECRET_TTL_SECONDS:
            return cached[1]
        try:
            url = (await self.kube.secret_value(ns, ref.name, ref.key)).strip()
        except NotFoundError:
            raise SpecError(
                f"spec.redis.urlSecretRef: Secret {ref.name!r} with key {ref.key!r} not found in "
                f"namespace {ns}; create it with the Redis URL as the value"
            ) from None
        problem = redact.check(url, field=f"spec.redis.urlSecretRef (Secret {ref.name!r}, key "
                                         f"{ref.key!r})")
        if problem is not None:
            raise SpecError(problem)
        self._secrets[key] = (self.clock(), url)
        return url
