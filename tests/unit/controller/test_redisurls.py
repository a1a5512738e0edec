"""The Redis URL of a TaskQueue and the sentinels' password, read from Secrets: each Secret key
is read at most once per SECRET_TTL_SECONDS, a missing one is a SpecError naming the field, and
a URL that is not usable is refused and not cached (its fix is read at the next poll)."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import models
from taskqueue.controller import redisurls
from taskqueue.controller.kube import NotFoundError
from taskqueue.controller.record import SpecError

URL_REF = {"name": "redis", "key": "url"}
SENTINEL = {"masterName": "mymaster", "addresses": ["s1:26379"],
            "passwordSecretRef": {"name": "sentinel", "key": "password"}}


class Secrets:
    """The Secrets of a namespace as the operator reads them, counting the reads."""

    def __init__(self, values: dict[tuple[str, str], str]) -> None:
        self.values = values
        self.reads: list[tuple[str, str]] = []

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        self.reads.append((name, key))
        try:
            return self.values[(name, key)]
        except KeyError:
            raise NotFoundError(f"secret {name} has no key {key!r}") from None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def taskqueue(redis: dict[str, Any]) -> models.TaskQueue:
    return models.TaskQueue.model_validate({
        "metadata": {"name": "tq", "namespace": "ns"},
        "spec": {"queues": [{"key": "{q}"}], "worker": {"image": "w:1", "handler": "m:f"},
                 "redis": redis}})


def urls(values: dict[tuple[str, str], str]) -> tuple[redisurls.RedisUrls, Secrets, Clock]:
    secrets, clock = Secrets(values), Clock()
    kube: Any = secrets
    return redisurls.RedisUrls(kube, clock=clock), secrets, clock


@pytest.mark.parametrize(("redis", "values", "reads"), [
    pytest.param({"urlSecretRef": URL_REF}, {("redis", "url"): "redis://r:6379/0\n"},
                 [("redis", "url")], id="url-secret"),
    pytest.param({"url": "redis://r:6379/0", "sentinel": SENTINEL},
                 {("sentinel", "password"): "pw"}, [("sentinel", "password")],
                 id="sentinel-password"),
    pytest.param({"urlSecretRef": URL_REF, "sentinel": SENTINEL},
                 {("redis", "url"): "redis://r:6379/0", ("sentinel", "password"): "pw"},
                 [("redis", "url"), ("sentinel", "password")], id="both"),
])
async def test_each_secret_is_read_once_per_ttl(redis: dict[str, Any],
                                                values: dict[tuple[str, str], str],
                                                reads: list[tuple[str, str]]) -> None:
    resolver, secrets, clock = urls(values)
    tq = taskqueue(redis)
    first = await resolver.url(tq)
    clock.now += redisurls.SECRET_TTL_SECONDS - 1
    assert await resolver.url(tq) == first
    assert secrets.reads == reads
    clock.now += 1
    await resolver.url(tq)
    assert secrets.reads == reads * 2


async def test_the_dsn_carries_the_secrets() -> None:
    resolver, _, _ = urls({("redis", "url"): "redis://:pw@r:6379/0\n",
                           ("sentinel", "password"): "spw"})
    url = await resolver.url(taskqueue({"urlSecretRef": URL_REF, "sentinel": SENTINEL}))
    assert url == "redis+sentinel://:pw@s1:26379/mymaster/0?sentinel_password=spw"


@pytest.mark.parametrize(("redis", "field"), [
    pytest.param({"urlSecretRef": URL_REF}, "spec.redis.urlSecretRef: Secret 'redis' with key "
                 "'url' not found in namespace ns", id="url"),
    pytest.param({"url": "redis://r:6379/0", "sentinel": SENTINEL},
                 "spec.redis.sentinel.passwordSecretRef: Secret 'sentinel' with key 'password' "
                 "not found in namespace ns", id="sentinel-password"),
])
async def test_a_missing_secret_names_the_field(redis: dict[str, Any], field: str) -> None:
    resolver, _, _ = urls({})
    with pytest.raises(SpecError, match=field):
        await resolver.url(taskqueue(redis))


async def test_an_unusable_url_is_refused_and_its_fix_read_at_once() -> None:
    resolver, secrets, _ = urls({("redis", "url"): "http://r:6379"})
    tq = taskqueue({"urlSecretRef": URL_REF})
    with pytest.raises(SpecError, match=r"^spec.redis.urlSecretRef \(Secret 'redis', key "
                                        r"'url'\): scheme must be"):
        await resolver.url(tq)
    secrets.values[("redis", "url")] = "redis://r:6379/0"
    assert await resolver.url(tq) == "redis://r:6379/0"
    assert len(secrets.reads) == 2


async def test_the_dsn_of_the_topology_is_checked() -> None:
    resolver, _, _ = urls({})
    with pytest.raises(SpecError, match=r"^spec\.redis: Redis Cluster has only database 0"):
        await resolver.url(taskqueue({"url": "redis://r:6379/3", "mode": "cluster"}))
