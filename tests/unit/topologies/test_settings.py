"""Pure: DSN parsing of the one client factory, and the hash-tag rule of a TaskQueue on a
Redis Cluster (admission names the fix)."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from taskqueue.api import models
from taskqueue.redisio import clients
from taskqueue.redisio.clients import RedisSettings, SettingsError
from taskqueue.wire import hashtag


@pytest.mark.parametrize(
    ("dsn", "mode", "hosts", "master", "db", "node_url"),
    [
        pytest.param("redis://r:6379/2", "standalone", (("r", 6379),), None, 2,
                     "redis://r:6379/2", id="standalone"),
        pytest.param("rediss://u:p%40ss@r/0?ssl_ca_certs=/ca.pem", "standalone", (("r", 6379),),
                     None, 0, "rediss://u:p%40ss@r:6379/0?ssl_ca_certs=%2Fca.pem", id="tls-acl"),
        pytest.param("redis+cluster://a:7000,b:7001", "cluster", (("a", 7000), ("b", 7001)),
                     None, 0, "redis://a:7000/0", id="cluster-seeds"),
        pytest.param("redis+sentinel://:pw@s1,s2:26380/mymaster/3", "sentinel",
                     (("s1", 26379), ("s2", 26380)), "mymaster", 3, "redis://:pw@s1:26379/3",
                     id="sentinel"),
        pytest.param("redis://[::1]:6380", "standalone", (("::1", 6380),), None, 0,
                     "redis://[::1]:6380/0", id="ipv6"),
        pytest.param("rediss://r:6380?ssl_ca_certs=/etc/ca.pem", "standalone", (("r", 6380),),
                     None, 0, "rediss://r:6380/0?ssl_ca_certs=%2Fetc%2Fca.pem",
                     id="no-path-query-with-slashes"),
        pytest.param("rediss+cluster://a:7000,b:7001?ssl_ca_certs=/ca/ca.crt", "cluster",
                     (("a", 7000), ("b", 7001)), None, 0,
                     "rediss://a:7000/0?ssl_ca_certs=%2Fca%2Fca.crt",
                     id="cluster-no-path-query-with-slashes"),
    ],
)
def test_dsns_name_the_topology(dsn: str, mode: str, hosts: tuple[tuple[str, int], ...],
                                master: str | None, db: int, node_url: str) -> None:
    s = RedisSettings.from_dsn(dsn)
    assert (s.mode, s.hosts, s.master_name, s.db, s.node_url()) == (mode, hosts, master, db,
                                                                  node_url)


def test_sentinel_credentials_stay_apart_from_the_masters() -> None:
    s = RedisSettings.from_dsn(
        "rediss+sentinel://app:secret@s1/m?sentinel_password=sp&ssl_ca_certs=/ca")
    assert (s.username, s.password, s.sentinel_password, s.tls) == ("app", "secret", "sp", True)
    assert "sentinel_password" not in s.node_url()
    assert "secret" not in s.describe() and "secret" not in repr(s)


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        pytest.param("http://x", "scheme must be redis://", id="scheme"),
        pytest.param("redis://a,b", "use redis+cluster://", id="several-hosts"),
        pytest.param("redis+sentinel://s1:26379", "name the master", id="no-master"),
        pytest.param("redis+cluster://a/1", "only database 0", id="cluster-db"),
        pytest.param("redis://a:x", "port is not a number", id="port"),
    ],
)
def test_bad_dsns_say_what_to_write(dsn: str, message: str) -> None:
    # the parser's check is `redact.problem`: the same words as every other URL check
    with pytest.raises(SettingsError, match=re.escape(message)):
        RedisSettings.from_dsn(dsn)


@pytest.mark.parametrize(
    ("url", "mode", "expected"),
    [
        pytest.param("redis://r:7000", "cluster", "redis+cluster://r:7000", id="to-cluster"),
        pytest.param("rediss://r:7000", "cluster", "rediss+cluster://r:7000", id="tls"),
        pytest.param("redis+cluster://r", "cluster", "redis+cluster://r", id="already"),
        pytest.param("redis://r", "standalone", "redis://r", id="standalone"),
    ],
)
def test_spec_mode_turns_a_url_into_a_cluster_dsn(url: str, mode: str, expected: str) -> None:
    assert clients.dsn_for(url, mode) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("redis://:pw@ignored:6379/2", "redis+sentinel://:pw@s1:26379,s2/mm/2",
                     id="credentials-and-db"),
        pytest.param("rediss://x?ssl_ca_certs=/ca", "rediss+sentinel://s1:26379,s2/mm/0"
                     "?ssl_ca_certs=/ca", id="tls-options"),
    ],
)
def test_spec_sentinel_turns_a_url_into_a_sentinel_dsn(url: str, expected: str) -> None:
    spec = models.SentinelSpec(masterName="mm", addresses=["s1:26379", "s2"])
    dsn = clients.dsn_for(url, "standalone", sentinel=spec)
    assert dsn == expected
    settings = RedisSettings.from_dsn(dsn)
    assert (settings.mode, settings.master_name) == ("sentinel", "mm")


@pytest.mark.parametrize(
    ("redis", "message"),
    [
        pytest.param({"url": "redis://r", "sentinel": {"masterName": "m",
                                                       "addresses": ["s:x"]}},
                     "is not host:port", id="bad-address"),
        pytest.param({"url": "redis://r", "mode": "cluster",
                      "sentinel": {"masterName": "m", "addresses": ["s"]}},
                     "not both", id="cluster-and-sentinel"),
        pytest.param({"url": "redis://r", "sentinel": {"masterName": "m", "addresses": []}},
                     "at least 1", id="no-sentinels"),
    ],
)
def test_bad_sentinel_specs_are_rejected(redis: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _spec(redis, ["{a}:q"])


@pytest.mark.parametrize(
    ("key", "tag"),
    [
        pytest.param("{emails}:vip", "emails", id="tagged"),
        pytest.param("emails", None, id="none"),
        pytest.param("a{}b{c}", None, id="empty-first-tag"),
        pytest.param("x{a}{b}", "a", id="first-tag"),
        pytest.param("{a", None, id="unclosed"),
    ],
)
def test_hash_tag_as_redis_computes_it(key: str, tag: str | None) -> None:
    assert hashtag.hash_tag(key) == tag


def _spec(redis: dict[str, object], queues: list[str], **extra: object) -> models.TaskQueueSpec:
    return models.TaskQueueSpec.model_validate(
        {"redis": redis, "queues": [{"key": k} for k in queues], **extra})


@pytest.mark.parametrize(
    ("redis", "queues", "extra", "fix"),
    [
        pytest.param({"url": "redis://r", "mode": "cluster"}, ["emails", "other"], {},
                     "spec.queues[1].key 'other' -> '{emails}:other'", id="untagged"),
        pytest.param({"url": "redis+cluster://r"}, ["{a}:x", "{b}:y"], {},
                     "spec.queues[1].key '{b}:y' -> '{a}:b:y'", id="two-tags"),
        pytest.param({"url": "redis+cluster://r"}, ["{a}:x"], {"keyPrefix": "jobs"},
                     "spec.keyPrefix 'jobs' -> '{a}:jobs'", id="prefix"),
        pytest.param({"urlSecretRef": {"name": "s", "key": "url"}, "mode": "cluster"}, ["{a}:x"],
                     {"retry": {"deadLetterKey": "dlq"}},
                     "spec.retry.deadLetterKey 'dlq' -> '{a}:dlq'", id="dead-letter"),
    ],
)
def test_admission_rejects_keys_in_several_slots_and_shows_the_fix(
        redis: dict[str, object], queues: list[str], extra: dict[str, object], fix: str) -> None:
    with pytest.raises(ValidationError) as err:
        _spec(redis, queues, **extra)
    assert "must share one hash tag" in str(err.value)
    assert fix in str(err.value)


@pytest.mark.parametrize(
    ("redis", "queues"),
    [
        pytest.param({"url": "redis://r", "mode": "cluster"}, ["{e}:vip", "{e}:normal"],
                     id="cluster-tagged"),
        pytest.param({"url": "redis://r"}, ["a", "b"], id="standalone-untagged"),
    ],
)
def test_admission_accepts_one_slot_or_one_server(redis: dict[str, object],
                                                  queues: list[str]) -> None:
    assert _spec(redis, queues).queues[0].key == queues[0]
