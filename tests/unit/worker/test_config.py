"""The worker's Redis URL: checked by `redact.check` (the project's one URL check) where it was
given (--redis-url, $TASKQUEUE_REDIS_URL, spec.redis.url), and again as the DSN of the
topology spec.redis names, so a URL the worker cannot connect with is one line at start."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import models
from taskqueue.worker import config


def spec(redis: dict[str, Any]) -> models.TaskQueueSpec:
    return models.TaskQueueSpec.model_validate({
        "queues": [{"key": "{q}"}], "worker": {"image": "w:1", "handler": "m:f"},
        "redis": redis})


@pytest.mark.parametrize(("redis", "flag", "env", "dsn"), [
    pytest.param({"url": "redis://r:6379/2"}, None, None, "redis://r:6379/2", id="spec-url"),
    pytest.param({"url": "redis://r:6379/0", "mode": "cluster"}, None, None,
                 "redis+cluster://r:6379/0", id="cluster-mode"),
    pytest.param({"url": "redis://r/0", "sentinel": {"masterName": "m", "addresses": ["s:1"]}},
                 None, None, "redis+sentinel://s:1/m/0", id="sentinel"),
    pytest.param({"urlSecretRef": {"name": "s", "key": "k"}}, None, "redis://:pw@e:1/0",
                 "redis://:pw@e:1/0", id="env"),
    pytest.param({"url": "redis://r:6379/0"}, "unix:///run/r.sock", "redis://e:1/0",
                 "unix:///run/r.sock", id="flag-wins"),
])
def test_the_redis_url_becomes_the_dsn_of_the_topology(
        monkeypatch: pytest.MonkeyPatch, redis: dict[str, Any], flag: str | None,
        env: str | None, dsn: str) -> None:
    if env is not None:
        monkeypatch.setenv("TASKQUEUE_REDIS_URL", env)
    assert config.from_spec(spec(redis), redis_url=flag).redis_url == dsn


@pytest.mark.parametrize(("redis", "flag", "env", "line"), [
    pytest.param({"url": "redis://r:6379/0"}, "http://r", None,
                 "--redis-url: scheme must be redis://", id="flag"),
    pytest.param({"urlSecretRef": {"name": "s", "key": "k"}}, None, "redis://:p/w@r:6379/0",
                 "TASKQUEUE_REDIS_URL: port is not a number", id="env"),
    pytest.param({"urlSecretRef": {"name": "s", "key": "k"}}, None, "redis+sentinel://s1",
                 "TASKQUEUE_REDIS_URL: name the master", id="sentinel-without-master"),
    pytest.param({"urlSecretRef": {"name": "s", "key": "k"}}, None, "redis://a:1,b:2/0",
                 "TASKQUEUE_REDIS_URL: several hosts", id="several-hosts"),
    pytest.param({"url": "redis://r:6379/3", "mode": "cluster"}, None, None,
                 "spec.redis.url: Redis Cluster has only database 0", id="cluster-database"),
])
def test_a_url_the_worker_cannot_use_is_one_line_naming_where_it_was_given(
        monkeypatch: pytest.MonkeyPatch, redis: dict[str, Any], flag: str | None,
        env: str | None, line: str) -> None:
    if env is not None:
        monkeypatch.setenv("TASKQUEUE_REDIS_URL", env)
    with pytest.raises(ValueError) as raised:
        config.from_spec(spec(redis), redis_url=flag)
    assert str(raised.value).startswith(line)
    assert "pw" not in str(raised.value) and "\n" not in str(raised.value)
